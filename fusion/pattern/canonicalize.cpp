#include "fusion/pattern/canonicalize.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/op_schema.h"
#include "fusion/pattern/matcher.h"

namespace opfuse::fusion {

using graph::Graph;
using graph::Node;
using graph::Tensor;

const std::vector<Rule>& canonical_rules() {
  static const std::vector<Rule> rules = parse_rules(R"(
layer_norm_affine: reduce_mean -> sub -> pow -> reduce_mean -> add -> sqrt -> div -> mul -> add
layer_norm: reduce_mean -> sub -> pow -> reduce_mean -> add -> sqrt -> div
gelu_erf: (div | mul) -> erf -> add -> mul -> mul
silu: sigmoid -> mul
relu6: clamp
linear: matmul -> add
linear_no_bias: matmul
conv_bn: conv2d -> batch_norm
)",
                                                     "canonical rules");
  return rules;
}

namespace {

constexpr double kTol = 1e-4;  // constants as exported (0.5, sqrt 2, 2.0), f32-rounded

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}

  // Tries every rule once over the graph; returns the log line of the first rewrite done.
  std::optional<std::string> step() {
    const graph::IndexedGraph ig(g_);
    for (const Rule& rule : canonical_rules()) {
      for (const Match& m : match_rule(ig, rule)) {
        std::vector<const Node*> ns;
        for (size_t i : m.nodes) ns.push_back(&ig.node(i));
        if (!inner_values_private(ig, m.nodes)) continue;
        std::optional<Node> rep = build(rule.name, ns);
        if (!rep) continue;
        std::string line = "canonicalize: " + rule.name + ":";
        for (const Node* n : ns) line += " " + n->name;
        line += " -> " + rep->op + " '" + rep->name + "'";
        replace(m.nodes, std::move(*rep));
        return line;
      }
    }
    return std::nullopt;
  }

 private:
  // Every matched node but the last feeds only nodes of the match and is no graph output.
  bool inner_values_private(const graph::IndexedGraph& ig, const std::vector<size_t>& nodes) {
    const std::set<size_t> in(nodes.begin(), nodes.end());
    for (size_t k = 0; k + 1 < nodes.size(); ++k) {
      const std::string& out = ig.node(nodes[k]).outputs[0];
      if (ig.is_graph_output(out)) return false;
      for (size_t c : ig.consumers(out)) {
        if (!in.count(c)) return false;
      }
    }
    return true;
  }

  bool is_param(const std::string& t) const {
    return g_.tensor(t).kind == graph::TensorKind::param;
  }
  // The value of a one-element constant.
  std::optional<double> scalar(const std::string& t) const {
    const Tensor& p = g_.tensor(t);
    if (p.kind != graph::TensorKind::param || graph::num_elements(p.shape) != 1) {
      return std::nullopt;
    }
    return double(graph::param_values(p).data[0]);
  }
  static bool near(std::optional<double> v, double want) {
    return v && std::fabs(*v - want) <= kTol * std::max(1.0, std::fabs(want));
  }
  // The operand of a binary node other than `t`, or "" if `t` is not one of them.
  static std::string other(const Node& n, const std::string& t) {
    if (n.inputs.size() != 2) return "";
    if (n.inputs[0] == t) return n.inputs[1];
    if (n.inputs[1] == t) return n.inputs[0];
    return "";
  }
  const std::string& out(const Node* n) const { return n->outputs[0]; }

  std::optional<Node> build(const std::string& rule, const std::vector<const Node*>& n) {
    if (rule == "layer_norm_affine" || rule == "layer_norm") return layer_norm(n);
    if (rule == "gelu_erf") return gelu(n);
    if (rule == "silu") {
      const std::string x = n[0]->inputs[0];
      if (other(*n[1], out(n[0])) != x) return std::nullopt;
      return unary("silu", x, *n[1]);
    }
    if (rule == "relu6") {
      const graph::UnaryParams p = graph::unary_params(*n[0]);
      if (p.lo != 0 || p.hi != 6) return std::nullopt;
      return unary("relu6", n[0]->inputs[0], *n[0]);
    }
    if (rule == "linear") return linear(n);
    if (rule == "linear_no_bias") return linear_no_bias(*n[0]);
    if (rule == "conv_bn") return conv_bn(n);
    return std::nullopt;
  }

  Node unary(const std::string& op, const std::string& x, const Node& last) {
    Node r;
    r.name = last.name;
    r.op = op;
    r.inputs = {x};
    r.outputs = last.outputs;
    return r;
  }

  // x * 0.5 * (1 + erf(x / sqrt 2)), the multiplications in either order.
  std::optional<Node> gelu(const std::vector<const Node*>& n) {
    const std::string x = n[0]->inputs[0];
    if (n[0]->inputs.size() != 2 || n[0]->inputs[1] == x) return std::nullopt;
    const auto k = scalar(n[0]->inputs[1]);
    const bool scaled = n[0]->op == "div" ? near(k, std::sqrt(2.0)) : near(k, std::sqrt(0.5));
    if (!scaled) return std::nullopt;
    if (!near(scalar(other(*n[2], out(n[1]))), 1.0)) return std::nullopt;
    // mul(x, 1 + erf) then mul(., 0.5), or mul(0.5 or x ...): one of the two muls takes x,
    // the other 0.5.
    const std::string a = other(*n[3], out(n[2])), b = other(*n[4], out(n[3]));
    const bool ok = (a == x && near(scalar(b), 0.5)) || (b == x && near(scalar(a), 0.5));
    if (!ok) return std::nullopt;
    return unary("gelu", x, *n[4]);
  }

  std::optional<Node> layer_norm(const std::vector<const Node*>& n) {
    const Node &m0 = *n[0], &sub = *n[1], &pw = *n[2], &m1 = *n[3], &add = *n[4], &sq = *n[5],
               &dv = *n[6];
    const std::string x = m0.inputs[0];
    if (sub.inputs[0] != x || sub.inputs[1] != out(&m0)) return std::nullopt;
    if (pw.inputs[0] != out(&sub) || !near(graph::unary_params(pw).exponent, 2.0)) {
      return std::nullopt;
    }
    if (m1.inputs[0] != out(&pw) || dv.inputs[0] != out(&sub) || dv.inputs[1] != out(&sq)) {
      return std::nullopt;
    }
    const auto eps = scalar(other(add, out(&m1)));
    if (!eps || *eps < 0) return std::nullopt;
    // Both means over the same trailing axes, kept: LayerNorm's x.shape[axis:].
    const graph::Shape& xs = g_.tensor(x).shape;
    const std::vector<bool> r0 = graph::reduced_axes(m0, xs.size()),
                            r1 = graph::reduced_axes(m1, xs.size());
    if (r0 != r1 || graph::attr_int(m0, "keepdims", 1) == 0 ||
        graph::attr_int(m1, "keepdims", 1) == 0) {
      return std::nullopt;
    }
    int axis = int(xs.size());
    while (axis > 0 && r0[size_t(axis - 1)]) --axis;
    for (int i = 0; i < axis; ++i) {
      if (r0[size_t(i)]) return std::nullopt;  // not a trailing block of axes
    }
    const graph::Shape norm(xs.begin() + axis, xs.end());
    const Node* last = &dv;
    std::string gamma, beta;
    if (n.size() == 9) {
      gamma = other(*n[7], out(&dv));
      beta = other(*n[8], out(n[7]));
      if (gamma.empty() || beta.empty() || !is_param(gamma) || !is_param(beta)) {
        return std::nullopt;
      }
      gamma = as_param(gamma, norm, n[7]->name + "_gamma");
      beta = as_param(beta, norm, n[8]->name + "_beta");
      if (gamma.empty() || beta.empty()) return std::nullopt;
      last = n[8];
    } else {
      gamma = constant(norm, 1.0f, dv.name + "_gamma");
      beta = constant(norm, 0.0f, dv.name + "_beta");
    }
    Node r;
    r.name = last->name;
    r.op = "layer_norm";
    r.inputs = {x, gamma, beta};
    r.outputs = last->outputs;
    r.attrs["axis"] = int64_t(axis);
    r.attrs["epsilon"] = *eps;
    return r;
  }

  // x W + b with W a 2-D constant [K, N] and b a constant of N values.
  std::optional<Node> linear(const std::vector<const Node*>& n) {
    const Node &mm = *n[0], &add = *n[1];
    const std::string w = mm.inputs[1];
    if (!is_param(w) || g_.tensor(w).shape.size() != 2) return std::nullopt;
    const std::string b = other(add, out(&mm));
    if (b.empty() || !is_param(b)) return std::nullopt;
    const int64_t N = g_.tensor(w).shape[1];
    const std::string bias = as_param(b, {N}, add.name + "_bias");
    if (bias.empty()) return std::nullopt;
    Node r;
    r.name = add.name;
    r.op = "linear";
    r.inputs = {mm.inputs[0], w, bias};
    r.outputs = add.outputs;
    return r;
  }

  // x W with W a 2-D constant [K, N] and no bias to take (Swin-T's patch merging, nn.Linear
  // with bias=False): a linear all the same, whose weights the build packs and whose rows and
  // columns the schedule tiles as a linear's, not a matmul of two activations. Tried after
  // `linear`, so a bias that follows is always taken first.
  std::optional<Node> linear_no_bias(const Node& mm) {
    const std::string w = mm.inputs[1];
    if (!is_param(w) || g_.tensor(w).shape.size() != 2) return std::nullopt;
    if (g_.tensor(mm.inputs[0]).shape.size() < 2) return std::nullopt;  // a vector: not rows
    Node r;
    r.name = mm.name;
    r.op = "linear";
    r.inputs = {mm.inputs[0], w};
    r.outputs = mm.outputs;
    return r;
  }

  // An inference batch norm after a convolution with constant weights, folded into them:
  // with s = gamma / sqrt(var + eps) per output channel, W' = W s and b' = (b - mean) s + beta,
  // as PyTorch's TorchScript export, ONNX Runtime and OpenVINO do; the dynamo exporter keeps
  // the norm. Both exports then plan alike (run time measured no different: README).
  std::optional<Node> conv_bn(const std::vector<const Node*>& n) {
    const Node &conv = *n[0], &bn = *n[1];
    const std::string w_name = bn.name + "_folded_weight", b_name = bn.name + "_folded_bias";
    if (bn.inputs[0] != out(&conv) || g_.has_tensor(w_name) || g_.has_tensor(b_name)) {
      return std::nullopt;
    }
    for (size_t i = 1; i < conv.inputs.size(); ++i) {
      if (!is_param(conv.inputs[i])) return std::nullopt;
    }
    for (size_t i = 1; i < 5; ++i) {
      if (!is_param(bn.inputs[i])) return std::nullopt;
    }
    const Tensor &x = g_.tensor(conv.inputs[0]), &w = g_.tensor(conv.inputs[1]);
    if (graph::batch_norm_axis(bn, g_.tensor(out(&conv))) !=
        graph::conv2d_window(conv, x, w).c_axis()) {
      return std::nullopt;
    }
    const double eps = graph::attr_float(bn, "epsilon", 1e-5);
    const graph::HostTensor gamma = graph::param_values(g_.tensor(bn.inputs[1])),
                            beta = graph::param_values(g_.tensor(bn.inputs[2])),
                            mean = graph::param_values(g_.tensor(bn.inputs[3])),
                            var = graph::param_values(g_.tensor(bn.inputs[4]));
    const int64_t cout = w.shape[0];
    const graph::HostTensor wv = graph::param_values(w);
    const size_t per = wv.data.size() / size_t(cout);  // [Cout, Cin/groups, KH, KW]
    Tensor w2;
    w2.name = w_name;
    w2.kind = graph::TensorKind::param;
    w2.shape = w.shape;
    w2.data.resize(wv.data.size());
    Tensor b2;
    b2.name = b_name;
    b2.kind = graph::TensorKind::param;
    b2.shape = {cout};
    b2.data.resize(size_t(cout));
    const std::vector<float> b = conv.inputs.size() == 3
                                     ? graph::param_values(g_.tensor(conv.inputs[2])).data
                                     : std::vector<float>(size_t(cout), 0.0f);
    for (size_t c = 0; c < size_t(cout); ++c) {
      const double scale = double(gamma.data[c]) / std::sqrt(double(var.data[c]) + eps);
      for (size_t k = 0; k < per; ++k) {
        w2.data[c * per + k] = float(double(wv.data[c * per + k]) * scale);
      }
      b2.data[c] = float((double(b[c]) - double(mean.data[c])) * scale + double(beta.data[c]));
    }
    Node r = conv;
    r.name = bn.name;
    r.inputs = {conv.inputs[0], w2.name, b2.name};
    r.outputs = bn.outputs;
    added_.push_back(std::move(w2));
    added_.push_back(std::move(b2));
    return r;
  }

  // The constant `p` as a param of exactly `shape` (the same values: leading 1s dropped,
  // one value broadcast); "" when its values do not fit.
  std::string as_param(const std::string& p, const graph::Shape& shape, const std::string& name) {
    const Tensor& t = g_.tensor(p);
    if (t.shape == shape) return p;
    const graph::HostTensor v = graph::param_values(t);
    const int64_t want = graph::num_elements(shape);
    if (int64_t(v.data.size()) != want && v.data.size() != 1) return "";
    Tensor q;
    q.name = name;
    q.kind = graph::TensorKind::param;
    q.shape = shape;
    q.data = v.data.size() == 1 ? std::vector<float>(size_t(want), v.data[0]) : v.data;
    added_.push_back(q);
    return name;
  }

  std::string constant(const graph::Shape& shape, float value, const std::string& name) {
    Tensor q;
    q.name = name;
    q.kind = graph::TensorKind::param;
    q.shape = shape;
    q.data.assign(size_t(graph::num_elements(shape)), value);
    added_.push_back(q);
    return name;
  }

  // Rebuilds the graph: the matched nodes go, `rep` takes the last one's place.
  void replace(const std::vector<size_t>& nodes, Node rep) {
    const std::set<size_t> gone(nodes.begin(), nodes.end());
    std::vector<Node> kept;  // topological order, `rep` where the match's last node was
    for (size_t i : g_.topo_order()) {
      if (i == nodes.back()) {
        kept.push_back(rep);
      } else if (!gone.count(i)) {
        kept.push_back(g_.nodes()[i]);
      }
    }
    // Params only the removed nodes read (a GELU's 0.5, a LayerNorm's eps) are dropped.
    std::set<std::string> used;
    for (const Node& n : kept) used.insert(n.inputs.begin(), n.inputs.end());
    Graph h;
    h.name = g_.name;
    auto keep = [&](const Tensor& t) {
      if (t.kind == graph::TensorKind::intermediate || h.has_tensor(t.name)) return;
      if (t.kind == graph::TensorKind::param && !used.count(t.name)) return;
      h.add_tensor(t);
    };
    for (const auto& name : g_.tensor_names()) keep(g_.tensor(name));
    for (const auto& t : added_) keep(t);
    added_.clear();
    for (const Node& n : kept) h.add_node(n);
    for (const auto& o : g_.outputs()) h.mark_output(o);
    h.validate();
    g_ = std::move(h);
  }

  Graph& g_;
  std::vector<Tensor> added_;
};

}  // namespace

std::vector<std::string> canonicalize(Graph& g) {
  std::vector<std::string> log;
  Rewriter r(g);
  // Each rewrite removes nodes, so this ends; the bound guards against a rule that would not.
  for (size_t guard = 0; guard <= g.nodes().size(); ++guard) {
    auto line = r.step();
    if (!line) break;
    log.push_back(*line);
  }
  return log;
}

}  // namespace opfuse::fusion
