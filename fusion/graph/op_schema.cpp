#include "fusion/graph/op_schema.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace opfuse::graph {
namespace {

using FK = FusionKind;

const std::vector<OpSchema> kOps = {
    // name, fusion kind, inputs min..max, summary, traits (OpTrait)
    {"relu", FK::elementwise, 1, 1, "max(x, 0)"},
    {"leaky_relu", FK::elementwise, 1, 1, "x > 0 ? x : alpha * x (alpha = 0.01)"},
    {"clamp", FK::elementwise, 1, 1, "min(max(x, min), max) (min = 0, max = 6)"},
    {"relu6", FK::elementwise, 1, 1, "min(max(x, 0), 6)"},
    {"hard_sigmoid", FK::elementwise, 1, 1,
     "clamp(alpha * x + beta, 0, 1) (alpha = 0.2, beta = 0.5)"},
    {"hard_swish", FK::elementwise, 1, 1, "x * clamp(x / 6 + 1/2, 0, 1)"},
    {"sigmoid", FK::elementwise, 1, 1, "1 / (1 + exp(-x))", OpTrait::transcendental},
    {"tanh", FK::elementwise, 1, 1, "tanh(x)", OpTrait::transcendental},
    {"gelu", FK::elementwise, 1, 1, "x * Phi(x); approximate = \"tanh\" for the tanh form",
     OpTrait::transcendental},
    {"exp", FK::elementwise, 1, 1, "exp(x)", OpTrait::transcendental},
    {"sqrt", FK::elementwise, 1, 1, "sqrt(x)"},
    {"reciprocal", FK::elementwise, 1, 1, "1 / x"},
    {"neg", FK::elementwise, 1, 1, "-x"},
    {"erf", FK::elementwise, 1, 1, "erf(x)", OpTrait::transcendental},
    {"silu", FK::elementwise, 1, 1, "x * sigmoid(x)", OpTrait::transcendental},
    {"pow", FK::elementwise, 1, 1, "x ^ exponent (a constant)", OpTrait::transcendental},
    {"add", FK::broadcast, 2, 2, "a + b, numpy broadcasting"},
    {"sub", FK::broadcast, 2, 2, "a - b, numpy broadcasting"},
    {"mul", FK::broadcast, 2, 2, "a * b, numpy broadcasting"},
    {"div", FK::broadcast, 2, 2, "a / b, numpy broadcasting"},
    {"bias_add", FK::broadcast, 2, 2, "x + b along axis (default 1)"},
    {"where", FK::broadcast, 3, 3, "cond != 0 ? a : b (cond, a, b), numpy broadcasting"},
    {"expand", FK::broadcast, 1, 1, "x broadcast to shape (numpy rules, both ways)",
     OpTrait::moves_layout},
    {"batch_norm", FK::broadcast, 5, 5,
     "inference batch norm (x, gamma, beta, mean, var) along axis (default: channel), epsilon",
     OpTrait::channel_layout},
    {"layer_norm", FK::reduction, 3, 3, "normalise over x.shape[axis:] (x, gamma, beta), epsilon",
     OpTrait::row_statistic},
    {"softmax", FK::reduction, 1, 1, "exp(x - max) / sum, along axis (default -1)",
     OpTrait::row_statistic},
    {"global_avg_pool", FK::reduction, 1, 1, "mean over H and W, keeps them as size 1",
     OpTrait::channel_layout},
    {"reduce_sum", FK::reduction, 1, 1, "sum over axes (default all), keepdims (default 1)",
     OpTrait::axes_reduction},
    {"reduce_mean", FK::reduction, 1, 1, "mean over axes (default all), keepdims (default 1)",
     OpTrait::axes_reduction},
    {"reduce_max", FK::reduction, 1, 1, "max over axes (default all), keepdims (default 1)",
     OpTrait::axes_reduction},
    {"conv2d", FK::out_elementwise_fusable, 2, 3,
     "2-D convolution (x, w[, b]); strides, pads, dilations, groups, layout",
     OpTrait::anchor | OpTrait::window | OpTrait::channel_layout},
    {"conv2d_winograd", FK::out_elementwise_fusable, 2, 3,
     "3x3 stride-1 NHWC convolution, pads 1, as Winograd F(2x2, 3x3): x [N, H, W, Cin], "
     "u = G w G^T [4, 4, Cin, Cout] or in panels (conv2d_winograd_weights)[, b [Cout]] (made "
     "from conv2d by fusion::to_winograd)",
     OpTrait::anchor},
    {"matmul", FK::out_elementwise_fusable, 2, 2, "a [..., M, K] x b [..., K, N]", OpTrait::anchor},
    {"linear", FK::out_elementwise_fusable, 2, 3, "x [..., K] x w [K, N] (+ b [N])",
     OpTrait::anchor},
    {"max_pool", FK::out_elementwise_fusable, 1, 1, "max over a window; kernel, strides, pads",
     OpTrait::window | OpTrait::channel_layout},
    {"avg_pool", FK::out_elementwise_fusable, 1, 1,
     "mean over a window; kernel, strides, pads, count_include_pad",
     OpTrait::window | OpTrait::channel_layout},
    {"transpose", FK::injective, 1, 1, "permute axes (perm)", OpTrait::moves_layout},
    {"reshape", FK::injective, 1, 1, "new shape (one -1 inferred, 0 copies)",
     OpTrait::moves_layout},
    {"concat", FK::injective, 1, -1, "join along axis"},
    {"slice", FK::injective, 1, 1,
     "x[starts:ends:steps] along axes (ONNX Slice with constant bounds; default all, step 1)",
     OpTrait::moves_layout},
    {"gather", FK::injective, 1, 2,
     "x[..., indices, ...] along axis: constant indices (scalar = 1 drops the axis), or an "
     "integer tensor of them (ONNX Gather: the axis becomes the indices' shape; an embedding "
     "lookup)",
     OpTrait::moves_layout},
    {"cast", FK::elementwise, 1, 1,
     "an integer tensor's values as f32 (ONNX Cast to FLOAT); to = \"bool\": x != 0 as 0/1; "
     "to = \"i64\": an integer computed in f32 as an i64 tensor (indices)"},
};

std::string ints_to_string(const std::vector<int64_t>& v) { return shape_to_string(v); }

const char* attr_type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "string";
    case 3:
      return "int list";
    default:
      return "float list";
  }
}

const AttrValue* find_attr(const Node& n, const std::string& key) {
  auto it = n.attrs.find(key);
  return it == n.attrs.end() ? nullptr : &it->second;
}

void require_rank(const Node& n, const Tensor& t, size_t rank, const char* role) {
  if (t.shape.size() != rank) {
    fail(n, std::string(role) + " '" + t.name + "' must have rank " + std::to_string(rank) +
                ", got shape " + shape_to_string(t.shape));
  }
}

void require_vector(const Node& n, const Tensor& t, int64_t len, const char* role) {
  if (t.shape != Shape{len}) {
    fail(n, std::string(role) + " '" + t.name + "' must have shape [" + std::to_string(len) +
                "], got " + shape_to_string(t.shape));
  }
}

std::array<int64_t, 2> pair_attr(const Node& n, const std::string& key,
                                 std::array<int64_t, 2> fallback, int64_t min_value) {
  auto v = attr_ints(n, key, {fallback[0], fallback[1]});
  if (v.size() != 2) fail(n, "attribute '" + key + "' needs 2 values, got " + ints_to_string(v));
  for (int64_t x : v) {
    if (x < min_value) {
      fail(n, "attribute '" + key + "' must be >= " + std::to_string(min_value) + ", got " +
                  ints_to_string(v));
    }
  }
  return {v[0], v[1]};
}

void read_window_common(const Node& n, Window2d& w) {
  w.strides = pair_attr(n, "strides", w.strides, 1);
  auto pads = attr_ints(n, "pads", {0, 0, 0, 0});
  if (pads.size() == 2) pads = {pads[0], pads[1], pads[0], pads[1]};
  if (pads.size() != 4) {
    fail(n, "attribute 'pads' needs 4 values [top, left, bottom, right] (or 2), got " +
                ints_to_string(pads));
  }
  for (int64_t p : pads) {
    if (p < 0) fail(n, "attribute 'pads' must not be negative, got " + ints_to_string(pads));
  }
  std::copy(pads.begin(), pads.end(), w.pads.begin());
}

// Output extent of a sliding window; GraphError if the window does not fit.
int64_t window_out(const Node& n, const char* dim, int64_t in, int64_t pad_lo, int64_t pad_hi,
                   int64_t kernel, int64_t stride, int64_t dilation) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t padded = in + pad_lo + pad_hi;
  if (span > padded) {
    fail(n, std::string("kernel spans ") + std::to_string(span) + " along " + dim +
                " but the padded input is only " + std::to_string(padded));
  }
  return (padded - span) / stride + 1;
}

void check_window_pads(const Node& n, const Window2d& w) {
  // A pad as large as the window would make outputs that see only padding.
  const int64_t kh = w.dilations[0] * (w.kernel[0] - 1) + 1;
  const int64_t kw = w.dilations[1] * (w.kernel[1] - 1) + 1;
  if (w.pads[0] >= kh || w.pads[2] >= kh || w.pads[1] >= kw || w.pads[3] >= kw) {
    fail(n, "pads " + ints_to_string({w.pads.begin(), w.pads.end()}) +
                " must be smaller than the kernel's extent");
  }
}

Shape window_output_shape(const Node& n, const Tensor& x, const Window2d& w, int64_t channels) {
  Shape out(4);
  out[w.n_axis()] = x.shape[w.n_axis()];
  out[w.c_axis()] = channels;
  out[w.h_axis()] = window_out(n, "H", x.shape[w.h_axis()], w.pads[0], w.pads[2], w.kernel[0],
                               w.strides[0], w.dilations[0]);
  out[w.w_axis()] = window_out(n, "W", x.shape[w.w_axis()], w.pads[1], w.pads[3], w.kernel[1],
                               w.strides[1], w.dilations[1]);
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------------------

const std::vector<OpSchema>& all_ops() { return kOps; }

bool has_trait(const std::string& op, unsigned trait) {
  const OpSchema* s = find_op(op);
  return s && (s->traits & trait) != 0;
}

const OpSchema* find_op(const std::string& op) {
  for (const auto& s : kOps) {
    if (op == s.name) return &s;
  }
  return nullptr;
}

const OpSchema& schema_of(const Node& node) {
  if (const OpSchema* s = find_op(node.op)) return *s;
  std::string known;
  for (const auto& s : kOps) known += std::string(known.empty() ? "" : ", ") + s.name;
  throw GraphError("node '" + node.name + "': unknown op '" + node.op + "' (known ops: " + known +
                   ")");
}

void fail(const Node& node, const std::string& what) {
  throw GraphError("node '" + node.name + "' (" + node.op + "): " + what);
}

int64_t attr_int(const Node& n, const std::string& key, int64_t fallback) {
  const AttrValue* v = find_attr(n, key);
  if (!v) return fallback;
  if (auto p = std::get_if<int64_t>(v)) return *p;
  fail(n, "attribute '" + key + "' must be an int, got a " + attr_type_name(*v));
}

double attr_float(const Node& n, const std::string& key, double fallback) {
  const AttrValue* v = find_attr(n, key);
  if (!v) return fallback;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return double(*p);
  fail(n, "attribute '" + key + "' must be a number, got a " + attr_type_name(*v));
}

std::string attr_string(const Node& n, const std::string& key, const std::string& fallback) {
  const AttrValue* v = find_attr(n, key);
  if (!v) return fallback;
  if (auto p = std::get_if<std::string>(v)) return *p;
  fail(n, "attribute '" + key + "' must be a string, got a " + attr_type_name(*v));
}

std::vector<int64_t> attr_ints(const Node& n, const std::string& key,
                               const std::vector<int64_t>& fallback) {
  const AttrValue* v = find_attr(n, key);
  if (!v) return fallback;
  if (auto p = std::get_if<std::vector<int64_t>>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return {*p};
  fail(n, "attribute '" + key + "' must be a list of ints, got a " + attr_type_name(*v));
}

int normalize_axis(const Node& n, int64_t axis, size_t rank) {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) {
    fail(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  }
  return int(axis < 0 ? axis + r : axis);
}

int batch_norm_axis(const Node& n, const Tensor& x) {
  return normalize_axis(n, attr_int(n, "axis", x.layout == Layout::NHWC ? 3 : 1), x.shape.size());
}

Layout op_layout(const Node& n, const Tensor& x) {
  const std::string s = attr_string(n, "layout", "");
  if (!s.empty()) {
    Layout l = layout_from_string(s);
    if (l == Layout::none) fail(n, "attribute 'layout' must be NCHW or NHWC, got '" + s + "'");
    return l;
  }
  return x.layout == Layout::none ? Layout::NCHW : x.layout;
}

int64_t weight_panels(int64_t n, int64_t panel) { return (n + panel - 1) / panel; }

int64_t linear_weight_panel(const Shape& w) {
  // Whole panels, or at least 8 of them: the last one's padding (under a panel) is then
  // under 1/8 of the weights.
  if (w.size() != 2) return 0;
  return w[1] % kWeightPanel == 0 || w[1] >= 8 * kWeightPanel ? kWeightPanel : 0;
}

bool padded_weight_panel(const Shape& w) {
  const int64_t panel = linear_weight_panel(w);
  return panel > 0 && w[1] % panel != 0;
}

WinogradWeights conv2d_winograd_weights(const Shape& u) {
  WinogradWeights l;
  if (u.size() == 4) {
    l.cin = u[2];
    l.cout = u[3];
  } else if (u.size() == 5) {
    l.cin = u[3];
    l.cout = u[2] * u[4];
    l.panel = u[4];
  }
  return l;
}

Shape conv2d_winograd_weights_shape(int64_t cin, int64_t cout) {
  if (cout % kWeightPanel == 0) return {4, 4, cout / kWeightPanel, cin, kWeightPanel};
  return {4, 4, cin, cout};
}

Window2d conv2d_window(const Node& n, const Tensor& x, const Tensor& w) {
  Window2d win;
  win.layout = op_layout(n, x);
  read_window_common(n, win);
  win.dilations = pair_attr(n, "dilations", win.dilations, 1);
  win.groups = attr_int(n, "groups", 1);
  if (win.groups < 1) fail(n, "attribute 'groups' must be >= 1, got " + std::to_string(win.groups));
  if (w.shape.size() == 4) win.kernel = {w.shape[2], w.shape[3]};
  return win;
}

Window2d pool_window(const Node& n, const Tensor& x) {
  Window2d win;
  win.layout = op_layout(n, x);
  if (n.op == "global_avg_pool") return win;
  if (!find_attr(n, "kernel")) fail(n, "missing attribute 'kernel' (window size [KH, KW])");
  win.kernel = pair_attr(n, "kernel", win.kernel, 1);
  win.strides = win.kernel;  // default stride = window, as in PyTorch
  read_window_common(n, win);
  win.count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
  return win;
}

UnaryParams unary_params(const Node& n) {
  UnaryParams p;
  p.alpha = attr_float(n, "alpha", n.op == "hard_sigmoid" ? 0.2 : 0.01);
  p.beta = attr_float(n, "beta", 0.5);
  if (n.op == "clamp") {
    p.lo = attr_float(n, "min", 0.0);
    p.hi = attr_float(n, "max", 6.0);
    if (!(p.lo <= p.hi)) {
      fail(n, "clamp needs min <= max, got min " + std::to_string(p.lo) + " max " +
                  std::to_string(p.hi));
    }
  }
  if (n.op == "pow") p.exponent = attr_float(n, "exponent", 1.0);
  if (n.op == "gelu") {
    const std::string a = attr_string(n, "approximate", "none");
    if (a != "none" && a != "tanh") {
      fail(n, "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + a + "\"");
    }
    p.gelu_tanh = a == "tanh";
  }
  return p;
}

Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(n, "shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                  " do not broadcast (axis " + std::to_string(i) + ": " + std::to_string(da) +
                  " vs " + std::to_string(db) + ")");
    }
    out[i] = std::max(da, db);
  }
  return out;
}

Shape reshape_target(const Node& n, const Shape& in) {
  const std::vector<int64_t> want = attr_ints(n, "shape", {});
  if (want.empty()) fail(n, "missing attribute 'shape'");
  Shape out(want.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1) {
      if (infer_at >= 0) fail(n, "shape " + ints_to_string(want) + " has more than one -1");
      infer_at = int(i);
      continue;
    }
    if (want[i] == 0) {
      if (i >= in.size())
        fail(n, "shape " + ints_to_string(want) + ": 0 at an axis the input lacks");
      out[i] = in[i];
    } else if (want[i] < 0) {
      fail(n, "shape " + ints_to_string(want) + " has a negative extent");
    } else {
      out[i] = want[i];
    }
    known *= out[i];
  }
  const int64_t total = num_elements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      fail(n, "cannot reshape " + shape_to_string(in) + " to " + ints_to_string(want));
    }
    out[infer_at] = total / known;
  }
  if (num_elements(out) != total) {
    fail(n, "cannot reshape " + shape_to_string(in) + " (" + std::to_string(total) +
                " elements) to " + shape_to_string(out));
  }
  return out;
}

std::vector<bool> reduced_axes(const Node& n, size_t rank) {
  std::vector<bool> reduced(rank, false);
  const std::vector<int64_t> axes = attr_ints(n, "axes", {});
  if (axes.empty()) reduced.assign(rank, true);
  for (int64_t a : axes) {
    const int i = normalize_axis(n, a, rank);
    if (reduced[size_t(i)]) fail(n, "axis " + std::to_string(a) + " is listed twice");
    reduced[size_t(i)] = true;
  }
  return reduced;
}

bool couples_along(const Node& n, const Tensor& x, size_t input, int axis) {
  const std::string& op = n.op;
  const size_t rank = x.shape.size();
  if (input > 0) {  // the weight, a broadcast operand, indices: only matmul's b has a K
    return op == "matmul" && input == 1 && rank >= 2 && axis == int(rank) - 2;
  }
  if (has_trait(op, OpTrait::axes_reduction)) {
    return reduced_axes(n, rank)[size_t(axis)];
  }
  if (op == "softmax") return normalize_axis(n, attr_int(n, "axis", -1), rank) == axis;
  if (op == "layer_norm") return axis >= normalize_axis(n, attr_int(n, "axis", -1), rank);
  if (op == "gather" || op == "concat") {
    return normalize_axis(n, attr_int(n, "axis", 0), rank) == axis;
  }
  if (op == "slice") {
    const SliceDim d = slice_dims(n, x.shape)[size_t(axis)];
    return d.start != 0 || d.step != 1;
  }
  if (op == "linear" || op == "matmul") return axis == int(rank) - 1;  // the K axis
  if (op == "conv2d_winograd") return axis >= 1;                       // H, W (window), C
  if (op == "global_avg_pool" || has_trait(op, OpTrait::window)) {
    if (rank != 4) return true;
    const Layout l = op_layout(n, x);
    const int h = l == Layout::NHWC ? 1 : 2, c = l == Layout::NHWC ? 3 : 1;
    return axis == h || axis == h + 1 || (op == "conv2d" && axis == c);
  }
  return false;
}

std::vector<int64_t> gather_indices(const Node& n, const Shape& x) {
  const int axis = normalize_axis(n, attr_int(n, "axis", 0), x.size());
  std::vector<int64_t> idx = attr_ints(n, "indices", {});
  if (idx.empty()) fail(n, "attribute 'indices' is empty");
  if (attr_int(n, "scalar", 0) != 0 && idx.size() != 1) {
    fail(n, "scalar = 1 needs exactly one index, got " + std::to_string(idx.size()));
  }
  for (auto& i : idx) {
    if (i < -x[size_t(axis)] || i >= x[size_t(axis)]) {
      fail(n, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) +
                  " of extent " + std::to_string(x[size_t(axis)]));
    }
    if (i < 0) i += x[size_t(axis)];
  }
  return idx;
}

std::vector<SliceDim> slice_dims(const Node& n, const Shape& x) {
  const std::vector<int64_t> starts = attr_ints(n, "starts", {}), ends = attr_ints(n, "ends", {});
  std::vector<int64_t> axes = attr_ints(n, "axes", {}), steps = attr_ints(n, "steps", {});
  if (starts.empty() || starts.size() != ends.size()) {
    fail(n, "attributes 'starts' and 'ends' must be non-empty and of one length, got " +
                std::to_string(starts.size()) + " and " + std::to_string(ends.size()));
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    fail(n, "attributes 'axes' and 'steps' must have as many entries as 'starts'");
  }
  std::vector<SliceDim> out;
  for (int64_t d : x) out.push_back({0, 1, d});
  std::vector<bool> seen(x.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int a = normalize_axis(n, axes[i], x.size());
    if (seen[size_t(a)]) fail(n, "axis " + std::to_string(a) + " is sliced twice");
    seen[size_t(a)] = true;
    const int64_t dim = x[size_t(a)], step = steps[i];
    if (step == 0) fail(n, "a step of 0 (axis " + std::to_string(a) + ")");
    // ONNX's clamping: negative indices count from the end, then clamp to the axis (to
    // [0, dim] going forward, [-1, dim - 1] going backward).
    auto wrap = [&](int64_t v) { return v < 0 ? v + dim : v; };
    int64_t s = wrap(starts[i]), e = wrap(ends[i]);
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    const int64_t extent = step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step;
    if (extent <= 0) {
      fail(n, "the slice of axis " + std::to_string(a) + " [" + std::to_string(starts[i]) + ":" +
                  std::to_string(ends[i]) + ":" + std::to_string(step) +
                  "] is empty: empty tensors are not supported");
    }
    out[size_t(a)] = {s, step, extent};
  }
  return out;
}

std::vector<Shape> infer_shapes(const Node& n, const std::vector<const Tensor*>& in) {
  const OpSchema& s = schema_of(n);
  const int count = int(in.size());
  if (count < s.min_inputs || (s.max_inputs >= 0 && count > s.max_inputs)) {
    std::string want = std::to_string(s.min_inputs);
    if (s.max_inputs != s.min_inputs) {
      want += s.max_inputs < 0 ? " or more" : " to " + std::to_string(s.max_inputs);
    }
    fail(n, "takes " + want + " inputs, got " + std::to_string(count));
  }
  if (n.outputs.size() != 1) {
    fail(n, "has 1 output, got " + std::to_string(n.outputs.size()));
  }
  // Activations must agree in dtype; params are f32 and are read in f32 by every dtype. A
  // gather's indices are integers whatever its data is.
  for (const Tensor* t : in) {
    if (n.op == "gather" && t == in.back() && in.size() == 2) continue;
    if (t->kind != TensorKind::param && t->dtype != in[0]->dtype) {
      fail(n, "input '" + t->name + "' is " + to_string(t->dtype) + " but input '" + in[0]->name +
                  "' is " + to_string(in[0]->dtype) + "; mixed dtypes are not supported");
    }
  }
  const Tensor& x = *in[0];
  const std::string& op = n.op;

  if (s.kind == FK::elementwise) {
    unary_params(n);
    return {x.shape};
  }
  if (op == "add" || op == "sub" || op == "mul" || op == "div") {
    return {broadcast_shapes(n, x.shape, in[1]->shape)};
  }
  if (op == "where") {
    return {broadcast_shapes(n, broadcast_shapes(n, x.shape, in[1]->shape), in[2]->shape)};
  }
  if (op == "expand") {
    const std::vector<int64_t> target = attr_ints(n, "shape", {});
    if (target.empty()) fail(n, "attribute 'shape' is missing");
    return {broadcast_shapes(n, x.shape, target)};
  }
  if (has_trait(op, OpTrait::axes_reduction)) {
    const std::vector<bool> r = reduced_axes(n, x.shape.size());
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    Shape out;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      if (!r[i])
        out.push_back(x.shape[i]);
      else if (keep)
        out.push_back(1);
    }
    if (out.empty()) fail(n, "reduces every axis with keepdims = 0: scalars are not supported");
    return {out};
  }
  if (op == "slice") {
    Shape out;
    for (const SliceDim& d : slice_dims(n, x.shape)) out.push_back(d.extent);
    return {out};
  }
  if (op == "gather" && in.size() == 2) {
    const int axis = normalize_axis(n, attr_int(n, "axis", 0), x.shape.size());
    if (n.attrs.count("indices")) fail(n, "has both an indices input and an indices attribute");
    Shape out(x.shape.begin(), x.shape.begin() + axis);
    out.insert(out.end(), in[1]->shape.begin(), in[1]->shape.end());
    out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
    return {out};
  }
  if (op == "gather") {
    const int axis = normalize_axis(n, attr_int(n, "axis", 0), x.shape.size());
    const std::vector<int64_t> idx = gather_indices(n, x.shape);
    Shape out = x.shape;
    if (attr_int(n, "scalar", 0) != 0) {
      out.erase(out.begin() + axis);
    } else {
      out[size_t(axis)] = int64_t(idx.size());
    }
    return {out};
  }
  if (op == "bias_add") {
    const int axis = normalize_axis(n, attr_int(n, "axis", 1), x.shape.size());
    require_vector(n, *in[1], x.shape[axis], "bias");
    return {x.shape};
  }
  if (op == "batch_norm") {
    const int axis = batch_norm_axis(n, x);
    const char* roles[] = {"gamma", "beta", "mean", "var"};
    for (int i = 1; i < 5; ++i) require_vector(n, *in[i], x.shape[axis], roles[i - 1]);
    if (attr_float(n, "epsilon", 1e-5) < 0) fail(n, "attribute 'epsilon' must be >= 0");
    return {x.shape};
  }
  if (op == "layer_norm") {
    const int axis = normalize_axis(n, attr_int(n, "axis", -1), x.shape.size());
    const Shape norm(x.shape.begin() + axis, x.shape.end());
    for (int i = 1; i < 3; ++i) {
      if (in[i]->shape != norm) {
        fail(n, std::string(i == 1 ? "gamma" : "beta") + " '" + in[i]->name + "' must have shape " +
                    shape_to_string(norm) + ", got " + shape_to_string(in[i]->shape));
      }
    }
    if (attr_float(n, "epsilon", 1e-5) < 0) fail(n, "attribute 'epsilon' must be >= 0");
    return {x.shape};
  }
  if (op == "softmax") {
    normalize_axis(n, attr_int(n, "axis", -1), x.shape.size());
    return {x.shape};
  }
  if (op == "conv2d") {
    require_rank(n, x, 4, "input");
    const Tensor& w = *in[1];
    require_rank(n, w, 4, "weight");
    Window2d win = conv2d_window(n, x, w);
    const int64_t cin = x.shape[win.c_axis()], cout = w.shape[0];
    if (cin % win.groups != 0 || cout % win.groups != 0) {
      fail(n, "groups " + std::to_string(win.groups) + " must divide input channels " +
                  std::to_string(cin) + " and output channels " + std::to_string(cout));
    }
    if (w.shape[1] != cin / win.groups) {
      fail(n, "weight '" + w.name + "' " + shape_to_string(w.shape) + " expects " +
                  std::to_string(w.shape[1] * win.groups) + " input channels, input '" + x.name +
                  "' " + shape_to_string(x.shape) + " (" + to_string(win.layout) + ") has " +
                  std::to_string(cin));
    }
    if (count == 3) require_vector(n, *in[2], cout, "bias");
    check_window_pads(n, win);
    return {window_output_shape(n, x, win, cout)};
  }
  if (op == "conv2d_winograd") {
    require_rank(n, x, 4, "input");
    const Tensor& u = *in[1];
    const WinogradWeights l = conv2d_winograd_weights(u.shape);
    if (l.cin != x.shape[3] || u.shape[0] != 4 || u.shape[1] != 4 ||
        (l.panel != 0 && l.panel != kWeightPanel)) {
      fail(n, "transformed weight '" + u.name + "' " + shape_to_string(u.shape) +
                  " must be [4, 4, " + std::to_string(x.shape[3]) + ", Cout] or [4, 4, Cout / " +
                  std::to_string(kWeightPanel) + ", " + std::to_string(x.shape[3]) + ", " +
                  std::to_string(kWeightPanel) + "] for input '" + x.name + "' " +
                  shape_to_string(x.shape) + " (NHWC)");
    }
    if (count == 3) require_vector(n, *in[2], l.cout, "bias");
    return {Shape{x.shape[0], x.shape[1], x.shape[2], l.cout}};
  }
  if (op == "max_pool" || op == "avg_pool") {
    require_rank(n, x, 4, "input");
    Window2d win = pool_window(n, x);
    check_window_pads(n, win);
    return {window_output_shape(n, x, win, x.shape[win.c_axis()])};
  }
  if (op == "global_avg_pool") {
    require_rank(n, x, 4, "input");
    Window2d win = pool_window(n, x);
    Shape out = x.shape;
    out[win.h_axis()] = out[win.w_axis()] = 1;
    return {out};
  }
  if (op == "matmul") {
    const Tensor& b = *in[1];
    if (x.shape.size() < 2 || b.shape.size() < 2) {
      fail(n, "matmul needs rank >= 2 on both sides, got " + shape_to_string(x.shape) + " and " +
                  shape_to_string(b.shape));
    }
    const int64_t k = x.shape.back(), kb = b.shape[b.shape.size() - 2];
    if (k != kb) {
      fail(n, "inner dimensions differ: '" + x.name + "' " + shape_to_string(x.shape) + " and '" +
                  b.name + "' " + shape_to_string(b.shape));
    }
    Shape out = broadcast_shapes(n, Shape(x.shape.begin(), x.shape.end() - 2),
                                 Shape(b.shape.begin(), b.shape.end() - 2));
    out.push_back(x.shape[x.shape.size() - 2]);
    out.push_back(b.shape.back());
    return {out};
  }
  if (op == "linear") {
    const Tensor& w = *in[1];
    require_rank(n, w, 2, "weight");
    if (x.shape.empty() || x.shape.back() != w.shape[0]) {
      fail(n, "input '" + x.name + "' " + shape_to_string(x.shape) + " does not match weight '" +
                  w.name + "' " + shape_to_string(w.shape) + " (expected [..., K] x [K, N])");
    }
    if (count == 3) require_vector(n, *in[2], w.shape[1], "bias");
    Shape out = x.shape;
    out.back() = w.shape[1];
    return {out};
  }
  if (op == "transpose") {
    std::vector<int64_t> perm = attr_ints(n, "perm", {});
    if (perm.empty()) {  // default: reverse the axes, as ONNX
      for (int64_t i = int64_t(x.shape.size()) - 1; i >= 0; --i) perm.push_back(i);
    }
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted.size() != x.shape.size() || sorted[i] != int64_t(i)) {
        fail(n, "perm " + ints_to_string(perm) + " is not a permutation of " +
                    std::to_string(x.shape.size()) + " axes");
      }
    }
    Shape out;
    for (int64_t p : perm) out.push_back(x.shape[p]);
    return {out};
  }
  if (op == "reshape") return {reshape_target(n, x.shape)};
  if (op == "concat") {
    const int axis = normalize_axis(n, attr_int(n, "axis", 0), x.shape.size());
    Shape out = x.shape;
    out[axis] = 0;
    for (const Tensor* t : in) {
      bool ok = t->shape.size() == x.shape.size();
      for (size_t i = 0; ok && i < x.shape.size(); ++i) {
        ok = int(i) == axis || t->shape[i] == x.shape[i];
      }
      if (!ok) {
        fail(n, "input '" + t->name + "' " + shape_to_string(t->shape) + " does not match '" +
                    x.name + "' " + shape_to_string(x.shape) + " outside axis " +
                    std::to_string(axis));
      }
      out[axis] += t->shape[axis];
    }
    return {out};
  }
  fail(n, "no shape rule (internal error)");
}

}  // namespace opfuse::graph
