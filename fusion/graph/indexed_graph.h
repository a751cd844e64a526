// An index over a validated Graph for passes that walk it many times (as TVM's
// IndexedForwardGraph): node order, producer and consumer nodes, consumers of each tensor.
// Everything is by node index into graph.nodes(); lookups are O(1).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

class IndexedGraph {
 public:
  explicit IndexedGraph(const Graph& g);  // g must be validated

  const Graph& graph() const { return *g_; }
  size_t size() const { return g_->nodes().size(); }
  const Node& node(size_t i) const { return g_->nodes()[i]; }
  FusionKind kind(size_t i) const { return kinds_[i]; }
  const std::vector<size_t>& topo() const { return g_->topo_order(); }
  size_t topo_pos(size_t i) const { return topo_pos_[i]; }
  // Distinct producer / consumer nodes of node i.
  const std::vector<size_t>& preds(size_t i) const { return preds_[i]; }
  const std::vector<size_t>& succs(size_t i) const { return succs_[i]; }
  // -1 for graph inputs and params.
  int producer(const std::string& tensor) const;
  const std::vector<size_t>& consumers(const std::string& tensor) const;
  bool is_graph_output(const std::string& tensor) const { return outputs_.count(tensor) != 0; }
  // Bytes of a tensor in its storage dtype.
  double bytes(const std::string& tensor) const;

 private:
  const Graph* g_;
  std::vector<FusionKind> kinds_;
  std::vector<size_t> topo_pos_;
  std::vector<std::vector<size_t>> preds_, succs_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::unordered_map<std::string, bool> outputs_;
};

}  // namespace opfuse::graph
