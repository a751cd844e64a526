#include "fusion/graph/builder.h"

#include <cmath>

#include "fusion/graph/op_schema.h"

namespace opfuse::graph {

GraphBuilder::GraphBuilder(std::string name) { graph_.name = std::move(name); }

std::string GraphBuilder::fresh(const std::string& base) {
  std::string name;
  do {
    name = base + "_" + std::to_string(counters_[base]++);
  } while (graph_.has_tensor(name));
  return name;
}

GraphBuilder::T GraphBuilder::input(const std::string& name, Shape shape, Layout layout,
                                    DType dtype) {
  Tensor t{name, std::move(shape), dtype, layout, TensorKind::input, {}, {}};
  graph_.add_tensor(t);
  return name;
}

GraphBuilder::T GraphBuilder::param(const std::string& name, Shape shape, ParamInit init) {
  Tensor t{name, std::move(shape), DType::f32, Layout::none, TensorKind::param, init, {}};
  graph_.add_tensor(t);
  return name;
}

GraphBuilder::T GraphBuilder::node(const std::string& op, std::vector<T> inputs, Attrs attrs) {
  Node n;
  n.name = fresh(op);
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = {n.name};
  n.attrs = std::move(attrs);
  const T out = n.name;
  graph_.add_node(std::move(n));
  graph_.infer_node(graph_.nodes().size() - 1);
  return out;
}

GraphBuilder::T GraphBuilder::relu(const T& x) { return node("relu", {x}); }
GraphBuilder::T GraphBuilder::leaky_relu(const T& x, double alpha) {
  return node("leaky_relu", {x}, {{"alpha", alpha}});
}
GraphBuilder::T GraphBuilder::clamp(const T& x, double lo, double hi) {
  return node("clamp", {x}, {{"min", lo}, {"max", hi}});
}
GraphBuilder::T GraphBuilder::relu6(const T& x) { return node("relu6", {x}); }
GraphBuilder::T GraphBuilder::hard_sigmoid(const T& x, double alpha, double beta) {
  return node("hard_sigmoid", {x}, {{"alpha", alpha}, {"beta", beta}});
}
GraphBuilder::T GraphBuilder::hard_swish(const T& x) { return node("hard_swish", {x}); }
GraphBuilder::T GraphBuilder::sigmoid(const T& x) { return node("sigmoid", {x}); }
GraphBuilder::T GraphBuilder::tanh(const T& x) { return node("tanh", {x}); }
GraphBuilder::T GraphBuilder::gelu(const T& x, bool tanh_approximation) {
  if (!tanh_approximation) return node("gelu", {x});
  return node("gelu", {x}, {{"approximate", std::string("tanh")}});
}
GraphBuilder::T GraphBuilder::exp(const T& x) { return node("exp", {x}); }
GraphBuilder::T GraphBuilder::sqrt(const T& x) { return node("sqrt", {x}); }
GraphBuilder::T GraphBuilder::reciprocal(const T& x) { return node("reciprocal", {x}); }
GraphBuilder::T GraphBuilder::neg(const T& x) { return node("neg", {x}); }
GraphBuilder::T GraphBuilder::erf(const T& x) { return node("erf", {x}); }
GraphBuilder::T GraphBuilder::silu(const T& x) { return node("silu", {x}); }
GraphBuilder::T GraphBuilder::pow(const T& x, double exponent) {
  return node("pow", {x}, {{"exponent", exponent}});
}
GraphBuilder::T GraphBuilder::where(const T& cond, const T& a, const T& b) {
  return node("where", {cond, a, b});
}
GraphBuilder::T GraphBuilder::expand(const T& x, std::vector<int64_t> shape) {
  return node("expand", {x}, {{"shape", std::move(shape)}});
}
GraphBuilder::T GraphBuilder::reduce(const std::string& op, const T& x, std::vector<int64_t> axes,
                                     bool keepdims) {
  return node(op, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t(keepdims ? 1 : 0)}});
}
GraphBuilder::T GraphBuilder::gather(const T& x, int64_t axis, std::vector<int64_t> indices,
                                     bool scalar) {
  return node(
      "gather", {x},
      {{"axis", axis}, {"indices", std::move(indices)}, {"scalar", int64_t(scalar ? 1 : 0)}});
}

GraphBuilder::T GraphBuilder::gather(const T& x, const T& indices, int64_t axis) {
  return node("gather", {x, indices}, {{"axis", axis}});
}

GraphBuilder::T GraphBuilder::cast(const T& x) { return node("cast", {x}); }

GraphBuilder::T GraphBuilder::slice(const T& x, std::vector<int64_t> starts,
                                    std::vector<int64_t> ends, std::vector<int64_t> axes,
                                    std::vector<int64_t> steps) {
  Attrs attrs{{"starts", std::move(starts)}, {"ends", std::move(ends)}};
  if (!axes.empty()) attrs["axes"] = std::move(axes);
  if (!steps.empty()) attrs["steps"] = std::move(steps);
  return node("slice", {x}, std::move(attrs));
}

GraphBuilder::T GraphBuilder::add(const T& a, const T& b) { return node("add", {a, b}); }
GraphBuilder::T GraphBuilder::sub(const T& a, const T& b) { return node("sub", {a, b}); }
GraphBuilder::T GraphBuilder::mul(const T& a, const T& b) { return node("mul", {a, b}); }
GraphBuilder::T GraphBuilder::div(const T& a, const T& b) { return node("div", {a, b}); }
GraphBuilder::T GraphBuilder::bias_add(const T& x, const T& b, int64_t axis) {
  return node("bias_add", {x, b}, {{"axis", axis}});
}

GraphBuilder::T GraphBuilder::batch_norm(const T& x, double epsilon) {
  const Tensor& t = graph_.tensor(x);
  const int64_t c = t.shape.size() == 4  ? t.shape[t.layout == Layout::NHWC ? 3 : 1]
                    : t.shape.size() > 1 ? t.shape[1]
                                         : t.shape[0];
  const std::string base = fresh("bn");
  // Inference statistics of a trained network: scale near 1, small shift and mean, variance
  // in [0.5, 1.5] (strictly positive so that 1/sqrt(var + eps) is well conditioned).
  T gamma = param(base + "_gamma", {c}, {0.5, 1.5});
  T beta = param(base + "_beta", {c}, {-0.2, 0.2});
  T mean = param(base + "_mean", {c}, {-0.2, 0.2});
  T var = param(base + "_var", {c}, {0.5, 1.5});
  return node("batch_norm", {x, gamma, beta, mean, var}, {{"epsilon", epsilon}});
}

GraphBuilder::T GraphBuilder::layer_norm(const T& x, int64_t axis, double epsilon) {
  const Shape& s = graph_.tensor(x).shape;
  const int64_t r = int64_t(s.size());
  const int64_t a = axis < 0 ? axis + r : axis;
  Shape norm(s.begin() + std::max<int64_t>(0, std::min(a, r)), s.end());
  const std::string base = fresh("ln");
  T gamma = param(base + "_gamma", norm, {0.5, 1.5});
  T beta = param(base + "_beta", norm, {-0.2, 0.2});
  return node("layer_norm", {x, gamma, beta}, {{"axis", axis}, {"epsilon", epsilon}});
}

GraphBuilder::T GraphBuilder::softmax(const T& x, int64_t axis) {
  return node("softmax", {x}, {{"axis", axis}});
}

GraphBuilder::T GraphBuilder::conv2d(const T& x, const T& w, const Conv2dOptions& o,
                                     const T& bias) {
  Attrs a{{"strides", std::vector<int64_t>{o.strides[0], o.strides[1]}},
          {"pads", std::vector<int64_t>(o.pads.begin(), o.pads.end())},
          {"dilations", std::vector<int64_t>{o.dilations[0], o.dilations[1]}},
          {"groups", o.groups}};
  std::vector<T> ins{x, w};
  if (!bias.empty()) ins.push_back(bias);
  return node("conv2d", ins, a);
}

GraphBuilder::T GraphBuilder::matmul(const T& a, const T& b) { return node("matmul", {a, b}); }
GraphBuilder::T GraphBuilder::linear(const T& x, const T& w, const T& bias) {
  std::vector<T> ins{x, w};
  if (!bias.empty()) ins.push_back(bias);
  return node("linear", ins);
}

GraphBuilder::T GraphBuilder::max_pool(const T& x, int64_t k, int64_t s, int64_t p) {
  return node("max_pool", {x},
              {{"kernel", std::vector<int64_t>{k, k}},
               {"strides", std::vector<int64_t>{s, s}},
               {"pads", std::vector<int64_t>{p, p, p, p}}});
}
GraphBuilder::T GraphBuilder::avg_pool(const T& x, int64_t k, int64_t s, int64_t p,
                                       bool count_include_pad) {
  Attrs a{{"kernel", std::vector<int64_t>{k, k}},
          {"strides", std::vector<int64_t>{s, s}},
          {"pads", std::vector<int64_t>{p, p, p, p}}};
  if (count_include_pad) a["count_include_pad"] = int64_t{1};
  return node("avg_pool", {x}, a);
}
GraphBuilder::T GraphBuilder::global_avg_pool(const T& x) { return node("global_avg_pool", {x}); }

GraphBuilder::T GraphBuilder::transpose(const T& x, std::vector<int64_t> perm) {
  return node("transpose", {x}, {{"perm", std::move(perm)}});
}
GraphBuilder::T GraphBuilder::reshape(const T& x, std::vector<int64_t> shape) {
  return node("reshape", {x}, {{"shape", std::move(shape)}});
}
GraphBuilder::T GraphBuilder::concat(const std::vector<T>& xs, int64_t axis) {
  return node("concat", xs, {{"axis", axis}});
}

GraphBuilder::T GraphBuilder::attention(const T& q, const T& k, const T& v) {
  const Shape& ks = graph_.tensor(k).shape;
  if (ks.size() < 2) throw GraphError("attention: key '" + k + "' needs rank >= 2");
  std::vector<int64_t> perm;
  for (size_t i = 0; i < ks.size(); ++i) perm.push_back(int64_t(i));
  std::swap(perm[ks.size() - 1], perm[ks.size() - 2]);
  const double d = double(graph_.tensor(q).shape.back());
  const T scale = param(fresh("attn_scale"), {1}, {1.0 / std::sqrt(d), 1.0 / std::sqrt(d)});
  const T scores = mul(matmul(q, transpose(k, perm)), scale);
  return matmul(softmax(scores, -1), v);
}

void GraphBuilder::output(const T& t) { graph_.mark_output(t); }

Graph GraphBuilder::build() {
  graph_.validate();
  return graph_;
}

}  // namespace opfuse::graph
