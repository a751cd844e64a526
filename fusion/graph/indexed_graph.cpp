#include "fusion/graph/indexed_graph.h"

#include <algorithm>

#include "fusion/graph/op_schema.h"

namespace opfuse::graph {

IndexedGraph::IndexedGraph(const Graph& g) : g_(&g) {
  const size_t n = g.nodes().size();
  if (g.topo_order().size() != n) {
    throw GraphError("graph '" + g.name + "' must be validated before it is indexed");
  }
  kinds_.resize(n);
  topo_pos_.resize(n);
  preds_.resize(n);
  succs_.resize(n);
  for (size_t pos = 0; pos < n; ++pos) topo_pos_[g.topo_order()[pos]] = pos;
  for (size_t i = 0; i < n; ++i) {
    kinds_[i] = schema_of(g.nodes()[i]).kind;
    for (const auto& out : g.nodes()[i].outputs) producer_[out] = int(i);
  }
  static const std::vector<size_t> none;
  for (size_t i = 0; i < n; ++i) {
    for (const auto& in : g.nodes()[i].inputs) {
      auto& c = consumers_[in];
      if (c.empty() || c.back() != i) c.push_back(i);
      auto it = producer_.find(in);
      if (it != producer_.end()) {
        auto& p = preds_[i];
        if (std::find(p.begin(), p.end(), size_t(it->second)) == p.end()) p.push_back(it->second);
        auto& s = succs_[it->second];
        if (std::find(s.begin(), s.end(), i) == s.end()) s.push_back(i);
      }
    }
  }
  for (const auto& o : g.outputs()) outputs_[o] = true;
}

int IndexedGraph::producer(const std::string& tensor) const {
  auto it = producer_.find(tensor);
  return it == producer_.end() ? -1 : it->second;
}

const std::vector<size_t>& IndexedGraph::consumers(const std::string& tensor) const {
  static const std::vector<size_t> none;
  auto it = consumers_.find(tensor);
  return it == consumers_.end() ? none : it->second;
}

double IndexedGraph::bytes(const std::string& tensor) const {
  const Tensor& t = g_->tensor(tensor);
  return double(num_elements(t.shape)) * double(dtype_bytes(t.dtype));
}

}  // namespace opfuse::graph
