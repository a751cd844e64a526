#include "fusion/frontend/channels_last.h"

#include <algorithm>
#include <map>
#include <set>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/op_schema.h"

namespace opfuse::fusion {
namespace {

using graph::Graph;
using graph::Node;
using graph::Shape;
using graph::Tensor;

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2};

Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(s[size_t(p)]);
  return out;
}

bool is_activation(const Graph& g, const std::string& t) {
  return g.tensor(t).kind != graph::TensorKind::param && g.tensor(t).shape.size() == 4 &&
         !graph::is_integer(g.tensor(t).dtype);
}

// A param broadcast against an NCHW activation that can be permuted with it: one value, or one
// per channel ([C,1,1] or [1,C,1,1]).
bool permutable_param(const Graph& g, const std::string& t) {
  const Tensor& p = g.tensor(t);
  if (p.kind != graph::TensorKind::param || graph::is_integer(p.dtype)) return false;
  if (graph::num_elements(p.shape) == 1) return true;
  const Shape& s = p.shape;
  if (s.size() == 3) return s[1] == 1 && s[2] == 1;
  if (s.size() == 4) return s[0] == 1 && s[2] == 1 && s[3] == 1;
  return false;
}

// Can `n` run on NHWC tensors, given its attributes and inputs?
bool convertible(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !is_activation(g, n.outputs[0])) return false;
  const graph::OpSchema& s = graph::schema_of(n);
  if (graph::has_trait(n.op, graph::OpTrait::channel_layout)) {
    if (!is_activation(g, n.inputs[0])) return false;
    if (n.op == "batch_norm") return graph::attr_int(n, "axis", 1) == 1;
    return graph::attr_string(n, "layout", "NCHW") == "NCHW";
  }
  if (s.kind == graph::FusionKind::elementwise && n.inputs.size() == 1 && n.op != "cast") {
    return is_activation(g, n.inputs[0]);
  }
  if (n.op == "add" || n.op == "sub" || n.op == "mul" || n.op == "div") {
    for (const auto& in : n.inputs) {
      if (!is_activation(g, in) && !permutable_param(g, in)) return false;
    }
    return true;
  }
  if (n.op == "concat") {
    for (const auto& in : n.inputs) {
      if (!is_activation(g, in)) return false;
    }
    return true;
  }
  // A reduction that keeps its dims (the output is 4-D, checked above): the dynamo exporter's
  // squeeze-excite pooling is ReduceMean over H and W, where TorchScript's is GlobalAveragePool.
  if (graph::has_trait(n.op, graph::OpTrait::axes_reduction)) return is_activation(g, n.inputs[0]);
  return false;
}

// An NCHW axis's position in NHWC.
int64_t nhwc_axis(const Node& n, int64_t nchw_axis) {
  const int64_t a = graph::normalize_axis(n, nchw_axis, 4);
  return int64_t(std::find(kToNhwc.begin(), kToNhwc.end(), a) - kToNhwc.begin());
}

}  // namespace

std::vector<std::string> to_channels_last(Graph& g, int min_convs) {
  // The regions: convertible nodes joined through the tensors between them, each kept only
  // where it holds a layout op. Elsewhere a 4-D elementwise op is left as it is: Swin's
  // [N, H, W, C] tensors between layer norms and window reshapes would otherwise each run
  // "NHWC" between two transposes (169 of them in Swin-T, none of them needed).
  const std::vector<Node>& nodes = g.nodes();
  std::vector<size_t> root(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) root[i] = i;
  auto component = [&](size_t i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  std::map<std::string, size_t> producer;
  std::vector<bool> convertible_node(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    convertible_node[i] = convertible(g, nodes[i]);
    if (convertible_node[i]) producer[nodes[i].outputs[0]] = i;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!convertible_node[i]) continue;
    for (const auto& in : nodes[i].inputs) {
      if (auto it = producer.find(in); it != producer.end())
        root[component(i)] = component(it->second);
    }
  }
  std::set<size_t> with_layout_op;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (convertible_node[i] && graph::has_trait(nodes[i].op, graph::OpTrait::channel_layout)) {
      with_layout_op.insert(component(i));
    }
  }
  std::set<std::string> converted;
  int convs = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!convertible_node[i] || !with_layout_op.count(component(i))) continue;
    converted.insert(nodes[i].name);
    convs += nodes[i].op == "conv2d";
  }
  if (convs < min_convs) return {};

  Graph out;
  out.name = g.name;
  std::map<std::string, std::string> nhwc, nchw;  // a tensor's name in the other layout
  std::set<std::string> nhwc_tensors;              // produced by converted nodes
  std::vector<std::string> log;
  int transposes = 0;
  auto unique = [&](const std::string& base) {
    std::string name = base;
    for (int i = 2; g.has_tensor(name) || out.has_tensor(name); ++i) name = base + std::to_string(i);
    return name;
  };
  auto transpose = [&](const std::string& from, const std::string& to,
                       const std::vector<int64_t>& perm) {
    Node t;
    t.name = unique(to + "_layout");
    t.op = "transpose";
    t.inputs = {from};
    t.outputs = {to};
    t.attrs["perm"] = perm;
    out.add_node(std::move(t));
    ++transposes;
  };
  // Inputs and params, as they are.
  for (const auto& name : g.tensor_names()) {
    const Tensor& t = g.tensor(name);
    if (t.kind != graph::TensorKind::intermediate) out.add_tensor(t);
  }
  // Graph outputs produced in NHWC keep their names, produced by a transpose back.
  std::set<std::string> outputs(g.outputs().begin(), g.outputs().end());
  // An NHWC tensor read where NCHW is wanted: through one transpose back (a graph output's
  // keeps the output's name).
  auto back_to_nchw = [&](std::string& in) {
    if (!nhwc_tensors.count(in)) return;
    if (!nchw.count(in)) {
      const std::string back = outputs.count(in) ? in : unique(in + "_nchw");
      transpose(nhwc.at(in), back, kToNchw);
      nchw[in] = back;
    }
    in = nchw.at(in);
  };
  for (size_t idx : g.topo_order()) {
    Node n = g.nodes()[idx];
    if (!converted.count(n.name)) {
      for (auto& in : n.inputs) back_to_nchw(in);  // its NHWC inputs go back to NCHW first
      out.add_node(std::move(n));
      continue;
    }
    // A layout op's weights and statistics are no activations, computed ones included (weights
    // standardised or scaled by a gate in the graph: W' [Cout, Cin, KH, KW] stays so; one
    // computed from NHWC tensors goes back to NCHW first).
    const size_t activations =
        graph::has_trait(n.op, graph::OpTrait::channel_layout) ? 1 : n.inputs.size();
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      std::string& in = n.inputs[k];
      if (k >= activations) {
        back_to_nchw(in);
        continue;
      }
      if (nhwc_tensors.count(in)) {
        in = nhwc.at(in);
      } else if (is_activation(g, in)) {
        if (!nhwc.count(in)) {
          const std::string to = unique(in + "_nhwc");
          transpose(in, to, kToNhwc);
          nhwc[in] = to;
        }
        in = nhwc.at(in);
      } else if (permutable_param(g, in) && graph::num_elements(g.tensor(in).shape) > 1) {
        if (!nhwc.count(in)) {  // [C,1,1] -> [1,1,C], [1,C,1,1] -> [1,1,1,C]
          Tensor p = g.tensor(in);
          const graph::HostTensor v = graph::param_values(p);
          p.name = unique(in + "_nhwc");
          p.data = v.data;  // one value per channel: the order is the same
          p.shape = p.shape.size() == 3 ? Shape{1, 1, p.shape[0]} : Shape{1, 1, 1, p.shape[1]};
          nhwc[in] = p.name;
          out.add_tensor(std::move(p));
        }
        in = nhwc.at(in);
      }
    }
    if (graph::has_trait(n.op, graph::OpTrait::channel_layout)) {
      if (n.op == "batch_norm") {
        n.attrs["axis"] = int64_t(3);
      } else {
        n.attrs["layout"] = std::string("NHWC");
      }
    }
    if (n.op == "concat") n.attrs["axis"] = nhwc_axis(n, graph::attr_int(n, "axis", 1));
    if (graph::has_trait(n.op, graph::OpTrait::axes_reduction)) {
      std::vector<int64_t> axes = graph::attr_ints(n, "axes", {});  // empty: all, in any layout
      for (int64_t& a : axes) a = nhwc_axis(n, a);
      std::sort(axes.begin(), axes.end());
      n.attrs["axes"] = axes;
    }
    const std::string name = n.outputs[0];
    const std::string renamed = outputs.count(name) ? unique(name + "_nhwc") : name;
    n.outputs[0] = renamed;
    nhwc[name] = renamed;
    nhwc_tensors.insert(name);
    out.add_node(std::move(n));
  }
  for (const auto& o : g.outputs()) {
    if (nhwc_tensors.count(o) && !nchw.count(o)) {
      transpose(nhwc.at(o), o, kToNchw);
      nchw[o] = o;
    }
    out.mark_output(o);
  }
  out.validate();
  log.push_back("channels-last: " + std::to_string(converted.size()) + " ops (" +
                std::to_string(convs) + " convolutions) run NHWC, " + std::to_string(transposes) +
                " transposes where the layout changes");
  g = std::move(out);
  return log;
}

}  // namespace opfuse::fusion
