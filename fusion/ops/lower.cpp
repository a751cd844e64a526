#include "fusion/ops/lower.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "fusion/graph/op_schema.h"

namespace opfuse::ops {

using namespace Halide;
using graph::Graph;
using graph::Node;
using graph::Shape;

Expr at(const Func& f, const std::vector<Expr>& idx) {
  std::vector<Expr> args(idx.rbegin(), idx.rend());
  return f(args);
}

std::vector<Var> make_vars(size_t rank, const std::string& prefix) {
  std::vector<Var> v;
  for (size_t i = 0; i < rank; ++i) v.emplace_back(prefix + std::to_string(i));
  return v;
}

Halide::Type halide_type(graph::DType d) {
  switch (d) {
    case graph::DType::f16:
      return Float(16);
    case graph::DType::i64:
      return Int(64);
    case graph::DType::i32:
      return Int(32);
    default:
      return Float(32);
  }
}

std::vector<Var> halide_args(const std::vector<Var>& row_major) {
  return {row_major.rbegin(), row_major.rend()};
}

namespace {

std::vector<Expr> exprs(const std::vector<Var>& vs) { return {vs.begin(), vs.end()}; }

// Index into an operand of shape `s` broadcast (numpy rules) to the output index `out`.
std::vector<Expr> broadcast_index(const Shape& s, const std::vector<Var>& out) {
  std::vector<Expr> idx;
  const size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) idx.push_back(s[i] == 1 ? Expr(0) : Expr(out[lead + i]));
  return idx;
}

// The region of a tensor in Halide argument order, for boundary conditions.
Region region_of(const Shape& s) {
  Region r;
  for (auto it = s.rbegin(); it != s.rend(); ++it) r.emplace_back(Expr(0), Expr(int(*it)));
  return r;
}

class Lowerer {
 public:
  // The pipeline's own names are taken first: Halide keys bounds by name, so a node Func named
  // as an argument buffer (the dynamo exporter's node 'linear_11_bias' beside its weight
  // 'linear_11.bias') mixes their boxes and fails inside bounds inference.
  Lowerer(const Graph& g, LoweredGraph& out) : g_(g), out_(out) {
    for (const auto& name : g.tensor_names()) {
      if (g.tensor(name).kind == graph::TensorKind::intermediate) continue;
      used_.insert(halide_safe_name(name));
      used_.insert(out.tensors.at(name).name());
    }
    for (const auto& name : g.outputs()) used_.insert(halide_safe_name(name) + "_out");
  }

  void lower_node(const Node& n) {
    funcs_.clear();
    roles_.clear();
    const graph::Tensor& y = g_.tensor(n.outputs[0]);
    vars_ = make_vars(y.shape.size());
    Func result = dispatch(n);
    funcs_.push_back(result);
    roles_.push_back("output");
    out_.tensors[n.outputs[0]] = result;
    out_.nodes.push_back({n.name, funcs_, roles_});
  }

 private:
  Func in(const Node& n, size_t i) const { return out_.tensors.at(n.inputs[i]); }
  const Shape& shape(const Node& n, size_t i) const { return g_.tensor(n.inputs[i]).shape; }

  // A new Func named after the node, remembered as one of the node's Funcs.
  Func helper(const Node& n, const std::string& what) {
    Func f(unique(n.name + "_" + what));
    funcs_.push_back(f);
    roles_.push_back(what);
    return f;
  }

  Func define(const Node& n, Expr e) {
    Func f(unique(n.name));
    f(halide_args(vars_)) = e;
    return f;
  }

  Func dispatch(const Node& n) {
    const std::string& op = n.op;
    const graph::FusionKind kind = graph::schema_of(n).kind;
    if (kind == graph::FusionKind::elementwise) return unary(n);
    if (op == "add" || op == "sub" || op == "mul" || op == "div") return binary(n);
    if (op == "bias_add") return bias_add(n);
    if (op == "batch_norm") return batch_norm(n);
    if (op == "layer_norm") return layer_norm(n);
    if (op == "softmax") return softmax(n);
    if (op == "conv2d") return conv2d(n);
    if (op == "conv2d_winograd") return conv2d_winograd(n);
    if (op == "matmul") return matmul(n);
    if (op == "linear") return linear(n);
    if (op == "max_pool" || op == "avg_pool") return pool(n);
    if (op == "global_avg_pool") return global_avg_pool(n);
    if (op == "transpose") return transpose(n);
    if (op == "reshape") return reshape(n);
    if (op == "concat") return concat(n);
    if (op == "where") return where(n);
    if (op == "expand") return define(n, at(in(n, 0), broadcast_index(shape(n, 0), vars_)));
    if (graph::has_trait(op, graph::OpTrait::axes_reduction)) return reduce(n);
    if (op == "gather") return gather(n);
    if (op == "slice") return slice(n);
    graph::fail(n, "has no Halide lowering (internal error)");
  }

  // exp(x) = 2^k e^r, k = round(x log2 e), r = x - k ln 2 (|r| <= ln 2 / 2), e^r by its
  // Taylor series to r^6: truncation <= 0.3466^7 / 7! = 1.3e-7 relative, 4.4e-7 evaluated in
  // f32 (every 8.7e-5 over [-86.4, 88.7]). Adding 1.5 * 2^23 + 126 rounds x log2 e to an
  // integer held in the low mantissa bits, already biased, so those bits shifted left 23 are
  // 2^(k - 1) (the series is doubled): no round, convert or range selects. Halide's exp splits
  // its floor into two 256-bit halves and selects at both ends; SiLU after a 1x1 convolution of
  // 16 channels took more time than the convolution (EfficientNet-B0's expand 16 -> 96 at
  // 112 x 112: 182 us alone, 340 with SiLU, 299 with this exp). x is clamped to [-86.5, 89],
  // where 2^(k - 1) is a normal f32: past 88.72 the product overflows to inf as exp does, and
  // exp(-86.5) = 2.9e-38 stands for anything smaller, an absolute error below 3e-38. A NaN
  // comes out inf (Halide's exp gave 0 for NaN and for inf).
  static Expr vector_exp(const Expr& x_in) {
    const Expr x = clamp(x_in, -86.5f, 89.0f);
    constexpr float kShift = 12582912.0f + 126.0f;  // 1.5 * 2^23, and the exponent's bias - 1
    const Expr biased = x * float(M_LOG2E) + kShift;
    // k from the integer bits, which the simplifier cannot fold back into x log2 e.
    const Expr k = cast<float>(reinterpret<int32_t>(biased) - reinterpret<int32_t>(Expr(kShift)));
    // ln 2 in two parts, the first exact in 15 bits: k ln2_hi is exact for |k| <= 256.
    const Expr r = (x - k * 0.693145751953125f) - k * 1.428606765330187e-6f;
    Expr p = 2.0f / 720.0f;
    for (float c : {2.0f / 120.0f, 2.0f / 24.0f, 2.0f / 6.0f, 1.0f, 2.0f, 2.0f}) p = p * r + c;
    return p * reinterpret<float>(reinterpret<uint32_t>(biased) << 23);
  }

  // tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|): an exp vectorises, Halide's tanh
  // calls libm once per element (GPT-2's tanh GELU fused after c_fc: 5.6 ms with it,
  // against 2.3 for the linear alone). Absolute error ~1e-7 near 0.
  static Expr vector_tanh(const Expr& x) {
    Expr em = vector_exp(-2.0f * abs(x));
    return select(x < 0.0f, -1.0f, 1.0f) * (1.0f - em) / (1.0f + em);
  }

  // erf(x) ~ x P(x^2) / Q(x^2), |x| clamped to 4 (erf(4) = 1 - 1.5e-8), coefficients fitted by
  // tools/fit_erf.py: |error| <= 5.5e-8 in exact arithmetic, 3.9e-7 evaluated in f32. Halide's
  // erf costs ~1.5x as much: 1.2M GELUs 276 -> 188 us, and a linear with a short reduction
  // (Swin-T's stage-1 and -2 fc1, K = 96 and 192) cannot hide it under its FMAs: those four
  // linear + GELU groups 6.04 -> 5.49 ms (medians of 5 alternated runs).
  static Expr vector_erf(const Expr& x_in) {
    const Expr x = clamp(x_in, -4.0f, 4.0f), t = x * x;
    Expr p = 1.921745045e-08f, q = 0.001097838624f;
    for (float c : {-1.99022072e-06f, 0.0001555157007f, 0.004292278158f, 0.05243131623f,
                    0.213927131f, 1.128378678f})
      p = p * t + c;
    for (float c : {0.01554963266f, 0.1207924922f, 0.522915652f, 1.0f}) q = q * t + c;
    return x * p / q;
  }

  Func unary(const Node& n) {
    const graph::UnaryParams p = graph::unary_params(n);
    Expr x = at(in(n, 0), exprs(vars_));
    const std::string& op = n.op;
    Expr e;
    if (op == "relu")
      e = max(x, 0.0f);
    else if (op == "leaky_relu")
      e = select(x > 0.0f, x, float(p.alpha) * x);
    else if (op == "clamp")
      e = clamp(x, float(p.lo), float(p.hi));
    else if (op == "relu6")
      e = clamp(x, 0.0f, 6.0f);
    else if (op == "hard_sigmoid")
      e = clamp(float(p.alpha) * x + float(p.beta), 0.0f, 1.0f);
    else if (op == "hard_swish")
      e = x * clamp(x * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f);
    else if (op == "sigmoid")
      e = 1.0f / (1.0f + vector_exp(-x));
    else if (op == "tanh") {
      e = vector_tanh(x);
    } else if (op == "exp")
      e = vector_exp(x);
    else if (op == "gelu" && p.gelu_tanh) {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const float k = float(std::sqrt(2.0 / M_PI));
      e = 0.5f * x * (1.0f + vector_tanh(k * (x + 0.044715f * x * x * x)));
    } else if (op == "gelu") {
      e = 0.5f * x * (1.0f + vector_erf(x * float(M_SQRT1_2)));  // x * Phi(x)
    } else if (op == "sqrt") {
      e = Halide::sqrt(x);
    } else if (op == "reciprocal") {
      e = 1.0f / x;
    } else if (op == "neg") {
      e = -x;
    } else if (op == "cast" && graph::attr_string(n, "to", "float") == "bool") {
      e = select(x != 0, 1.0f, 0.0f);
    } else if (op == "cast" && graph::attr_string(n, "to", "float") == "i64") {
      e = cast<int>(Halide::round(x));  // an integer computed in f32; 32-bit, as sources are
    } else if (op == "cast") {
      e = cast<float>(x);
    } else if (op == "erf") {
      e = vector_erf(x);
    } else if (op == "silu") {
      e = x / (1.0f + vector_exp(-x));
    } else if (op == "pow") {
      // Small integer and half exponents as multiplies or a square root: exact where the
      // general pow (exp(e log x)) is not, and defined for negative x.
      const double k = p.exponent;
      e = k == 1     ? x
          : k == 2   ? x * x
          : k == 3   ? x * x * x
          : k == 0.5 ? Halide::sqrt(x)
          : k == -1  ? 1.0f / x
                     : Halide::pow(x, float(k));
    } else {
      graph::fail(n, "unknown elementwise op (internal error)");
    }
    return define(n, e);
  }

  Func binary(const Node& n) {
    Expr a = at(in(n, 0), broadcast_index(shape(n, 0), vars_));
    Expr b = at(in(n, 1), broadcast_index(shape(n, 1), vars_));
    const std::string& op = n.op;
    return define(n, op == "add" ? a + b : op == "sub" ? a - b : op == "mul" ? a * b : a / b);
  }

  Func where(const Node& n) {
    Expr c = at(in(n, 0), broadcast_index(shape(n, 0), vars_));
    Expr a = at(in(n, 1), broadcast_index(shape(n, 1), vars_));
    Expr b = at(in(n, 2), broadcast_index(shape(n, 2), vars_));
    return define(n, select(c != 0.0f, a, b));
  }

  // reduce_sum / reduce_mean / reduce_max over the reduced axes, as global_avg_pool: a helper
  // ("sum" or "max") that a schedule computes per tile, then the output.
  Func reduce(const Node& n) {
    const Shape& s = shape(n, 0);
    const std::vector<bool> red = graph::reduced_axes(n, s.size());
    const bool keep = graph::attr_int(n, "keepdims", 1) != 0;
    Region dom;
    float count = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (red[i]) dom.emplace_back(0, int(s[i])), count *= float(s[i]);
    }
    RDom r(dom, unique(n.name + "_r"));
    std::vector<Expr> xi;
    int k = 0;
    size_t j = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (red[i]) {
        xi.push_back(r[k++]);
        if (keep) ++j;
      } else {
        xi.push_back(vars_[j++]);
      }
    }
    const std::vector<Var> args = halide_args(vars_);
    if (n.op == "reduce_max") {
      Func mx = helper(n, "max");
      mx(args) = Float(32).min();
      mx(args) = max(mx(args), at(in(n, 0), xi));
      return define(n, mx(args));
    }
    Func sum = helper(n, "sum");
    sum(args) = 0.0f;
    sum(args) += at(in(n, 0), xi);
    return define(n, n.op == "reduce_mean" ? sum(args) / count : sum(args));
  }

  // gather with constant indices: the index along the axis is a select over the positions;
  // with an integer tensor of indices (ONNX Gather, an embedding lookup), the axis's index is
  // that tensor's value: negative ones count from the end, and any beyond the extent are
  // clamped into it (the reference executor refuses them; a kernel cannot throw).
  Func gather(const Node& n) {
    const Shape& s = shape(n, 0);
    if (n.inputs.size() == 2) {
      const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), s.size());
      const size_t r = shape(n, 1).size();
      // Row-major output axes: [0, axis) of x, then r of the indices, then the rest of x.
      auto var_of_axis = [&](size_t k) { return Expr(vars_[k]); };
      std::vector<Expr> ii, xi;
      for (size_t k = 0; k < r; ++k) ii.push_back(var_of_axis(size_t(axis) + k));
      Expr v = at(in(n, 1), ii);
      const int extent = int(s[size_t(axis)]);
      v = clamp(select(v < 0, v + extent, v), 0, extent - 1);
      for (size_t k = 0; k < size_t(axis); ++k) xi.push_back(var_of_axis(k));
      xi.push_back(v);
      for (size_t k = size_t(axis) + 1; k < s.size(); ++k) xi.push_back(var_of_axis(k - 1 + r));
      return define(n, at(in(n, 0), xi));
    }
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), s.size());
    const std::vector<int64_t> idx = graph::gather_indices(n, s);
    const bool scalar = graph::attr_int(n, "scalar", 0) != 0;
    std::vector<Expr> xi;
    size_t j = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (int(i) != axis) {
        xi.push_back(vars_[j++]);
      } else if (scalar) {
        xi.push_back(int(idx[0]));
      } else {
        Expr v = vars_[j++];
        Expr e = int(idx.back());
        for (size_t q = idx.size() - 1; q-- > 0;) e = select(v == int(q), int(idx[q]), e);
        xi.push_back(e);
      }
    }
    return define(n, at(in(n, 0), xi));
  }

  Func slice(const Node& n) {
    const std::vector<graph::SliceDim> d = graph::slice_dims(n, shape(n, 0));
    std::vector<Expr> xi;
    for (size_t i = 0; i < d.size(); ++i) {
      xi.push_back(d[i].step == 1 && d[i].start == 0 ? Expr(vars_[i])
                                                     : int(d[i].start) + vars_[i] * int(d[i].step));
    }
    return define(n, at(in(n, 0), xi));
  }

  Func bias_add(const Node& n) {
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 1), vars_.size());
    return define(n, at(in(n, 0), exprs(vars_)) + in(n, 1)(vars_[axis]));
  }

  Func batch_norm(const Node& n) {
    const graph::Tensor& x = g_.tensor(n.inputs[0]);
    const int axis = graph::batch_norm_axis(n, x);
    const float eps = float(graph::attr_float(n, "epsilon", 1e-5));
    // y = (x - mean) * gamma / sqrt(var + eps) + beta; the per-channel factor is its own Func
    // so that a schedule can compute it once.
    Var c("c");
    Func factor = helper(n, "factor");
    factor(c) = in(n, 1)(c) / Halide::sqrt(in(n, 4)(c) + eps);
    Expr ch = vars_[axis];
    return define(n, (at(in(n, 0), exprs(vars_)) - in(n, 3)(ch)) * factor(ch) + in(n, 2)(ch));
  }

  // Normalises over the trailing axes from `axis`; mean and variance are two passes.
  Func layer_norm(const Node& n) {
    const Shape& s = shape(n, 0);
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", -1), s.size());
    const float eps = float(graph::attr_float(n, "epsilon", 1e-5));
    Region dom;
    float count = 1;
    for (size_t i = axis; i < s.size(); ++i) dom.emplace_back(0, int(s[i])), count *= float(s[i]);
    RDom r(dom);
    std::vector<Var> outer(vars_.begin(), vars_.begin() + axis);
    std::vector<Expr> xi = exprs(outer);
    for (int i = 0; i < r.dimensions(); ++i) xi.push_back(r[i]);
    Func x = in(n, 0);
    Func mean = helper(n, "mean"), var = helper(n, "var");
    mean(halide_args(outer)) = 0.0f;
    mean(halide_args(outer)) += at(x, xi) / count;
    Expr centered = at(x, xi) - mean(halide_args(outer));
    var(halide_args(outer)) = 0.0f;
    var(halide_args(outer)) += centered * centered / count;
    std::vector<Expr> norm_idx(vars_.begin() + axis, vars_.end());
    Expr y = (at(x, exprs(vars_)) - mean(halide_args(outer))) /
             Halide::sqrt(var(halide_args(outer)) + eps);
    return define(n, y * at(in(n, 1), norm_idx) + at(in(n, 2), norm_idx));
  }

  Func softmax(const Node& n) {
    const Shape& s = shape(n, 0);
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", -1), s.size());
    RDom r(0, int(s[axis]));
    std::vector<Var> rest;
    for (size_t i = 0; i < vars_.size(); ++i) {
      if (int(i) != axis) rest.push_back(vars_[i]);
    }
    std::vector<Expr> along = exprs(vars_);
    along[axis] = r;
    Func x = in(n, 0);
    // Numerically stable: exp(x - max) never overflows, and the sum is >= 1.
    Func mx = helper(n, "max"), e = helper(n, "exp"), sum = helper(n, "sum");
    // An explicit update (not an inline maximum()) so that a schedule can vectorise the
    // reduction along the row, as it does the sum.
    mx(halide_args(rest)) = Float(32).min();
    mx(halide_args(rest)) = max(mx(halide_args(rest)), at(x, along));
    e(halide_args(vars_)) = vector_exp(at(x, exprs(vars_)) - mx(halide_args(rest)));
    sum(halide_args(rest)) = 0.0f;
    sum(halide_args(rest)) += at(e, along);
    return define(n, e(halide_args(vars_)) / sum(halide_args(rest)));
  }

  Func conv2d(const Node& n) {
    const graph::Tensor& xt = g_.tensor(n.inputs[0]);
    const graph::Tensor& wt = g_.tensor(n.inputs[1]);
    const graph::Window2d win = graph::conv2d_window(n, xt, wt);
    const int cin_g = int(wt.shape[1]), cout_g = int(wt.shape[0] / win.groups);
    Func padded = BoundaryConditions::constant_exterior(in(n, 0), 0.0f, region_of(xt.shape));
    funcs_.push_back(padded);
    roles_.push_back("padded");
    RDom r(0, cin_g, 0, int(win.kernel[0]), 0, int(win.kernel[1]), unique(n.name + "_r"));
    Expr co = vars_[win.c_axis()];
    // Input channel within the output's group; without groups it does not depend on the
    // output channel, so a schedule vectorised over output channels reads one input value.
    Expr ci = win.groups == 1 ? Expr(r.x) : (co / cout_g) * cin_g + r.x;
    std::vector<Expr> xi(4);
    xi[win.n_axis()] = vars_[win.n_axis()];
    xi[win.c_axis()] = ci;
    xi[win.h_axis()] =
        vars_[win.h_axis()] * int(win.strides[0]) - int(win.pads[0]) + r.y * int(win.dilations[0]);
    xi[win.w_axis()] =
        vars_[win.w_axis()] * int(win.strides[1]) - int(win.pads[1]) + r.z * int(win.dilations[1]);
    Func acc = helper(n, "acc");
    acc(halide_args(vars_)) = n.inputs.size() == 3 ? in(n, 2)(co) : Expr(0.0f);
    acc(halide_args(vars_)) += at(padded, xi) * at(in(n, 1), {co, r.x, r.y, r.z});
    return define(n, acc(halide_args(vars_)));
  }

  // F(2x2, 3x3) over NHWC (fusion/frontend/winograd.h). Halide order: x (c, w, h, n), u (co,
  // ci, k, m) or in panels (lane, ci, panel, k, m), with k along W and m along H; tile (tx, ty)
  // covers outputs (2 tx + 0..1, 2 ty + 0..1) and reads the 4x4 input at (2 tx - 1, 2 ty - 1). The
  // Funcs, in the emitter's order:
  //   winograd_input_rows  d B      (c, k, j, tx, ty, n): each input row's 4 columns
  //   winograd_input       B^T d B  (c, k, m, tx, ty, n)
  //   acc                  16 GEMMs (co, k, m, tx, ty, n) += u(co, ci, k, m) V(ci, k, m, ..)
  //   winograd_gemm        the GEMMs' result, a tile's worth (acc is a register block)
  //   winograd_output_rows M A      (co, b, m, tx, ty, n)
  //   winograd_output      A^T M A  (co, b, a, tx, ty, n), plus the bias
  // and the output (co, x, y, n) the tile's (x % 2, y % 2) element.
  Func conv2d_winograd(const Node& n) {
    const graph::Tensor& xt = g_.tensor(n.inputs[0]);
    const int cin = int(xt.shape[3]);
    Func padded = BoundaryConditions::constant_exterior(in(n, 0), 0.0f, region_of(xt.shape));
    funcs_.push_back(padded);
    roles_.push_back("padded");
    Var c("c"), co("co"), k("k"), m("m"), j("j"), a("a"), b("b"), tx("tx"), ty("ty"), bn("bn");
    // B^T applied to 4 values along one axis: rows of [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]].
    auto bt = [](const Expr& i, const Expr& s0, const Expr& s1, const Expr& s2, const Expr& s3) {
      return select(i == 0, s0 - s2, i == 1, s1 + s2, i == 2, s2 - s1, s1 - s3);
    };
    // A^T applied to 4 values: rows of [[1,1,1,0],[0,1,-1,-1]].
    auto at2 = [](const Expr& i, const Expr& s0, const Expr& s1, const Expr& s2, const Expr& s3) {
      return select(i == 0, s0 + s1 + s2, s1 - s2 - s3);
    };
    auto d = [&](int col, const Expr& row) {
      return padded(c, 2 * tx - 1 + col, 2 * ty - 1 + row, bn);
    };
    Func rows = helper(n, "winograd_input_rows");
    rows(c, k, j, tx, ty, bn) = bt(k, d(0, j), d(1, j), d(2, j), d(3, j));
    Func v = helper(n, "winograd_input");
    v(c, k, m, tx, ty, bn) = bt(m, rows(c, k, 0, tx, ty, bn), rows(c, k, 1, tx, ty, bn),
                                rows(c, k, 2, tx, ty, bn), rows(c, k, 3, tx, ty, bn));
    RDom r(0, cin, unique(n.name + "_r"));
    Func acc = helper(n, "acc");
    acc(co, k, m, tx, ty, bn) = 0.0f;
    // u in panels of output channels (graph::conv2d_winograd_weights): Halide dims (lane, ci,
    // panel, k, m). A block's channels lie within a panel (its width divides kWeightPanel).
    const int64_t panel = graph::conv2d_winograd_weights(shape(n, 1)).panel;
    Expr w =
        panel > 0 ? in(n, 1)(co % int(panel), r, co / int(panel), k, m) : in(n, 1)(co, r, k, m);
    acc(co, k, m, tx, ty, bn) += w * v(r, k, m, tx, ty, bn);
    Func gemm = helper(n, "winograd_gemm");
    gemm(co, k, m, tx, ty, bn) = acc(co, k, m, tx, ty, bn);
    Func ma = helper(n, "winograd_output_rows");
    ma(co, b, m, tx, ty, bn) = at2(b, gemm(co, 0, m, tx, ty, bn), gemm(co, 1, m, tx, ty, bn),
                                   gemm(co, 2, m, tx, ty, bn), gemm(co, 3, m, tx, ty, bn));
    Func y = helper(n, "winograd_output");
    Expr e = at2(a, ma(co, b, 0, tx, ty, bn), ma(co, b, 1, tx, ty, bn), ma(co, b, 2, tx, ty, bn),
                 ma(co, b, 3, tx, ty, bn));
    y(co, b, a, tx, ty, bn) = n.inputs.size() == 3 ? e + in(n, 2)(co) : e;
    // Row-major vars: (n, h, w, c).
    const Var &on = vars_[0], &oh = vars_[1], &ow = vars_[2], &oc = vars_[3];
    return define(n, y(oc, ow % 2, oh % 2, ow / 2, oh / 2, on));
  }

  Func matmul(const Node& n) {
    const Shape& a = shape(n, 0);
    const Shape& b = shape(n, 1);
    const size_t rank = vars_.size();
    RDom k(0, int(a.back()), unique(n.name + "_k"));
    std::vector<Var> batch(vars_.begin(), vars_.end() - 2);
    std::vector<Expr> ai = broadcast_index(Shape(a.begin(), a.end() - 2), batch);
    std::vector<Expr> bi = broadcast_index(Shape(b.begin(), b.end() - 2), batch);
    ai.push_back(vars_[rank - 2]);
    ai.push_back(k);
    bi.push_back(k);
    bi.push_back(vars_[rank - 1]);
    Func acc = helper(n, "acc");
    acc(halide_args(vars_)) = 0.0f;
    acc(halide_args(vars_)) += at(in(n, 0), ai) * at(in(n, 1), bi);
    return define(n, acc(halide_args(vars_)));
  }

  Func linear(const Node& n) {
    const Shape& x = shape(n, 0);
    RDom k(0, int(x.back()), unique(n.name + "_k"));
    std::vector<Expr> xi = exprs(vars_);
    xi.back() = k;
    Expr col = vars_.back();
    Func acc = helper(n, "acc");
    // Blocks over padded panels compute past N (graph::padded_weight_panel): the bias read
    // there is clamped to its last column, not past its buffer.
    Expr bias_col =
        graph::padded_weight_panel(shape(n, 1)) ? min(col, int(shape(n, 1)[1]) - 1) : col;
    acc(halide_args(vars_)) = n.inputs.size() == 3 ? in(n, 2)(bias_col) : Expr(0.0f);
    acc(halide_args(vars_)) += at(in(n, 0), xi) * in(n, 1)(col, k);
    return define(n, acc(halide_args(vars_)));
  }

  Func pool(const Node& n) {
    const graph::Tensor& xt = g_.tensor(n.inputs[0]);
    const graph::Window2d win = graph::pool_window(n, xt);
    const bool is_max = n.op == "max_pool";
    Func padded = BoundaryConditions::constant_exterior(
        in(n, 0), is_max ? Expr(-std::numeric_limits<float>::infinity()) : Expr(0.0f),
        region_of(xt.shape));
    funcs_.push_back(padded);
    roles_.push_back("padded");
    RDom r(0, int(win.kernel[0]), 0, int(win.kernel[1]), unique(n.name + "_r"));
    Expr h0 = vars_[win.h_axis()] * int(win.strides[0]) - int(win.pads[0]);
    Expr w0 = vars_[win.w_axis()] * int(win.strides[1]) - int(win.pads[1]);
    std::vector<Expr> xi = exprs(vars_);
    xi[win.h_axis()] = h0 + r.x;
    xi[win.w_axis()] = w0 + r.y;
    if (is_max) return define(n, maximum(at(padded, xi)));
    Func sum = helper(n, "sum");
    sum(halide_args(vars_)) = 0.0f;
    sum(halide_args(vars_)) += at(padded, xi);
    Expr count;
    if (win.count_include_pad) {
      count = float(win.kernel[0] * win.kernel[1]);
    } else {  // window positions that fall inside the input
      const int H = int(xt.shape[win.h_axis()]), W = int(xt.shape[win.w_axis()]);
      Expr hs = min(h0 + int(win.kernel[0]), H) - max(h0, 0);
      Expr ws = min(w0 + int(win.kernel[1]), W) - max(w0, 0);
      count = cast<float>(hs * ws);
    }
    return define(n, sum(halide_args(vars_)) / count);
  }

  Func global_avg_pool(const Node& n) {
    const graph::Tensor& xt = g_.tensor(n.inputs[0]);
    const graph::Window2d win = graph::pool_window(n, xt);
    const int H = int(xt.shape[win.h_axis()]), W = int(xt.shape[win.w_axis()]);
    RDom r(0, H, 0, W, unique(n.name + "_r"));
    std::vector<Expr> xi = exprs(vars_);
    xi[win.h_axis()] = r.x;
    xi[win.w_axis()] = r.y;
    Func sum = helper(n, "sum");
    sum(halide_args(vars_)) = 0.0f;
    sum(halide_args(vars_)) += at(in(n, 0), xi);
    return define(n, sum(halide_args(vars_)) / float(H * W));
  }

  Func transpose(const Node& n) {
    std::vector<int64_t> perm = graph::attr_ints(n, "perm", {});
    if (perm.empty()) {
      for (int64_t i = int64_t(vars_.size()) - 1; i >= 0; --i) perm.push_back(i);
    }
    std::vector<Expr> xi(vars_.size());
    for (size_t i = 0; i < perm.size(); ++i)
      xi[perm[i]] = vars_[i];  // out axis i = in axis perm[i]
    return define(n, at(in(n, 0), xi));
  }

  Func reshape(const Node& n) {
    const Shape& s = shape(n, 0);
    const Shape& o = g_.tensor(n.outputs[0]).shape;
    // Leading and trailing dims that both shapes share map one to one; only the dims between
    // go through the linear row-major offset, unflattened into the input's middle dims. The
    // direct map keeps bounds exact: Halide bounds `flat % extent` over a tile by the whole
    // extent, so a tile of [1, 32] read from a [1, 1, 1, 32] pool through the offset computed
    // all 32 channels of the pool in each of its 4 tiles.
    const auto [lead, trail] = graph::reshape_kept_dims(s, o);
    std::vector<Expr> xi(s.size());
    for (size_t i = 0; i < lead; ++i) xi[i] = vars_[i];
    for (size_t i = 0; i < trail; ++i) xi[s.size() - 1 - i] = vars_[o.size() - 1 - i];
    Expr flat = 0;
    for (size_t i = lead; i + trail < o.size(); ++i) flat = flat * int(o[i]) + vars_[i];
    for (size_t i = s.size() - trail; i-- > lead;) {
      xi[i] = i == lead ? flat : flat % int(s[i]);
      if (i > lead) flat = flat / int(s[i]);
    }
    return define(n, at(in(n, 0), xi));
  }

  Func concat(const Node& n) {
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), vars_.size());
    if (axis + 1 == int(vars_.size()) && n.inputs.size() > 1) return concat_innermost(n, axis);
    Expr e;
    int offset = 0;
    std::vector<std::pair<Expr, Expr>> parts;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int len = int(shape(n, i)[axis]);
      std::vector<Expr> xi = exprs(vars_);
      // Clamped so that bounds inference keeps each input's reads within its extent.
      xi[axis] = clamp(vars_[axis] - offset, 0, len - 1);
      parts.emplace_back(vars_[axis] < offset + len, at(in(n, i), xi));
      offset += len;
    }
    e = parts.back().second;
    for (int i = int(parts.size()) - 2; i >= 0; --i) e = select(parts[i].first, parts[i].second, e);
    return define(n, e);
  }

  // A concat along the innermost axis (NHWC channels, a row's columns): a consumer's vectors
  // cross its parts, where the select below clamps a ramp of indices into a gather from every
  // part (Swin-T's patch merging, a layer norm over 4 slices joined along C: 782 us a call
  // against 17 us predicted, 2 Zen 4 cores). The parts are copied into a helper instead, one
  // update each over its own columns (dense loads and stores), computed where the schedule
  // computes the node's tile; the output reads the helper.
  Func concat_innermost(const Node& n, int axis) {
    Func parts = helper(n, "parts");
    parts(halide_args(vars_)) = undef(in(n, 0).type());
    int offset = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int len = int(shape(n, i)[axis]);
      RDom r(0, len, unique(n.name + "_part" + std::to_string(i)));
      std::vector<Expr> src = exprs(vars_), dst = exprs(vars_);
      src[size_t(axis)] = r.x;
      dst[size_t(axis)] = r.x + offset;
      parts(std::vector<Expr>(dst.rbegin(), dst.rend())) = at(in(n, i), src);
      offset += len;
    }
    return define(n, parts(halide_args(vars_)));
  }

  // Distinct sanitised names: two graph names may sanitise to the same string.
  std::string unique(const std::string& name) {
    std::string base = halide_safe_name(name), out = base;
    for (int i = 1; !used_.insert(out).second; ++i) out = base + "_" + std::to_string(i);
    return out;
  }

  const Graph& g_;
  LoweredGraph& out_;
  std::set<std::string> used_;
  std::vector<Var> vars_;
  std::vector<Func> funcs_;
  std::vector<std::string> roles_;
};

}  // namespace

LoweredGraph lower(const Graph& g, const std::map<std::string, Func>& sources) {
  LoweredGraph out;
  for (const auto& name : g.tensor_names()) {
    const graph::Tensor& t = g.tensor(name);
    if (t.kind == graph::TensorKind::intermediate) continue;
    auto it = sources.find(name);
    if (it == sources.end()) {
      throw graph::GraphError("lowering graph '" + g.name + "': no source Func for " +
                              graph::to_string(t.kind) + " '" + name + "'");
    }
    Func src = it->second;
    if (src.dimensions() != int(t.shape.size())) {
      throw graph::GraphError("lowering graph '" + g.name + "': source for '" + name + "' has " +
                              std::to_string(src.dimensions()) + " dimensions, the tensor " +
                              std::to_string(t.shape.size()));
    }
    if (t.dtype == graph::DType::f16) {  // computed in f32
      Func wide(halide_safe_name(name) + "_f32");
      std::vector<Var> v = make_vars(t.shape.size());
      wide(halide_args(v)) = cast<float>(src(halide_args(v)));
      src = wide;
    } else if (graph::is_integer(t.dtype)) {  // indices: 32-bit, as Halide indexes
      Func narrow(halide_safe_name(name) + "_i32");
      std::vector<Var> v = make_vars(t.shape.size());
      narrow(halide_args(v)) = cast<int>(src(halide_args(v)));
      src = narrow;
    }
    out.tensors[name] = src;
  }
  Lowerer lowerer(g, out);
  for (size_t i : g.topo_order()) lowerer.lower_node(g.nodes()[i]);
  for (const auto& name : g.outputs()) out.outputs.push_back(out.tensors.at(name));
  return out;
}

}  // namespace opfuse::ops
