// The operator set: for every op, its fusion kind, its arity, its attributes (parsed in one
// place, with defaults) and its shape rule. The Halide lowering (fusion/ops) and the reference
// executor (fusion/reference) read attributes through the same parsers, so the three agree.
//
// Conventions (as ONNX, row-major shapes):
//   conv2d   x: NCHW or NHWC (attr "layout", else the input's layout, else NCHW);
//            w: [C_out, C_in / groups, KH, KW] in either layout; optional bias [C_out].
//            pads = [top, left, bottom, right].
//   pools    same layouts and pads; no ceil mode. avg_pool excludes padding from the count
//            unless count_include_pad = 1.
//   matmul   a [..., M, K] x b [..., K, N], batch dims broadcast as in numpy.
//   linear   x [..., K] x w [K, N] (+ b [N]).
//   binary   add/sub/mul/div broadcast as in numpy.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

// What an op is, beyond its fusion kind: said here once, asked by legality, the patterns,
// the cost models and the schedules.
namespace OpTrait {
enum : unsigned {
  anchor = 1u << 0,          // register-blocked reduction over a weight (conv, matmul, linear)
  window = 1u << 1,          // reads a neighbourhood of its input (conv, pools): halos
  row_statistic = 1u << 2,   // normalises rows by statistics over them (softmax, layer norm)
  transcendental = 1u << 3,  // exp-based or iterative arithmetic, ~10-20 FLOP per element
  moves_layout = 1u << 4,    // the output index is a permutation, offset or broadcast of the
                             // input's (transpose, reshape, expand, gather, slice)
  channel_layout = 1u << 5,  // finds its channel axis from a layout, NCHW or NHWC (attr
                             // "layout", or batch norm's "axis"): conv, pools, batch norm
  axes_reduction = 1u << 6,  // reduces over the axes listed in attr "axes" (all when empty),
                             // keepdims: reduce_sum, reduce_mean, reduce_max
};
}  // namespace OpTrait

struct OpSchema {
  const char* name;
  FusionKind kind;
  int min_inputs;
  int max_inputs;  // -1: variadic
  const char* summary;
  unsigned traits = 0;  // OpTrait bits
};

// Does `op` have the OpTrait bit `trait`? (false for an unknown op)
bool has_trait(const std::string& op, unsigned trait);

// nullptr if `op` is not a known operator.
const OpSchema* find_op(const std::string& op);
// The schema of a node's op; GraphError naming the node if unknown.
const OpSchema& schema_of(const Node& node);
const std::vector<OpSchema>& all_ops();

// Checks the node's attributes and its inputs' shapes and dtypes; returns the output shapes.
std::vector<Shape> infer_shapes(const Node& node, const std::vector<const Tensor*>& inputs);

// --- attribute parsers --------------------------------------------------------------------
[[noreturn]] void fail(const Node& node, const std::string& what);

int64_t attr_int(const Node& n, const std::string& key, int64_t fallback);
double attr_float(const Node& n, const std::string& key, double fallback);
std::string attr_string(const Node& n, const std::string& key, const std::string& fallback);
std::vector<int64_t> attr_ints(const Node& n, const std::string& key,
                               const std::vector<int64_t>& fallback);

// Normalises a possibly negative axis for a tensor of `rank` dims; GraphError if out of range.
int normalize_axis(const Node& n, int64_t axis, size_t rank);
// The channel axis a batch_norm `n` on `x` normalises: attr "axis", else x's channel axis.
int batch_norm_axis(const Node& n, const Tensor& x);

struct Window2d {  // conv and pooling geometry
  Layout layout = Layout::NCHW;
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations{1, 1};
  int64_t groups = 1;
  bool count_include_pad = false;
  // Axis positions of N, C, H, W in the layout.
  int n_axis() const { return 0; }
  int c_axis() const { return layout == Layout::NHWC ? 3 : 1; }
  int h_axis() const { return layout == Layout::NHWC ? 1 : 2; }
  int w_axis() const { return layout == Layout::NHWC ? 2 : 3; }
};

// Conv: kernel from the weight's shape. Pools: kernel from the attribute.
Window2d conv2d_window(const Node& n, const Tensor& x, const Tensor& w);
Window2d pool_window(const Node& n, const Tensor& x);
// The layout an op on `x` works in: attr "layout", else x's layout, else NCHW.
Layout op_layout(const Node& n, const Tensor& x);
// GEMM weights as register blocks read them: in panels of kWeightPanel columns,
// [ceil(N / panel), K, panel]. A block of up to a panel's columns then reads its row of B at
// each k from one contiguous run and the K loop streams, where row-major [K, N] steps an
// N-float stride per k (3-12 KB for N = 768-3072: a new page each k, every row in the same L1
// sets). 64 columns: one AVX-512 block (2 x 32 lanes), four AVX2 blocks (2 x 8). A linear's
// [K, N] is stored so by ops::pack_weights, its last panel zero-padded where N is no multiple
// of the panel (a classifier's 1000 columns: 1024 stored); a Winograd conv's transformed
// weights are made so (conv2d_winograd_weights), whole panels only.
constexpr int64_t kWeightPanel = 64;
// The panel of a linear's weights of shape `w`; 0 where they stay row-major: N no multiple
// of a panel and under 8 of them, where the padding would add more than 1/8 (N = 96 would
// store 128).
int64_t linear_weight_panel(const Shape& w);
// Panels of `panel` columns for N columns, the last one padded: ceil(N / panel).
int64_t weight_panels(int64_t n, int64_t panel);
// Whether a linear's weights of shape `w` end inside their last panel: its register blocks
// then start at multiples of their width and the last computes into the padding (its
// stores guarded), where a block moved back onto the columns before would read vectors
// across two panels.
bool padded_weight_panel(const Shape& w);
// A conv2d_winograd's transformed weights u: [4, 4, Cin, Cout], or where Cout is a multiple of
// kWeightPanel, [4, 4, Cout / panel, Cin, panel] (each of the 16 GEMMs' [Cin, Cout] in panels).
struct WinogradWeights {
  int64_t cin = 0, cout = 0;
  int64_t panel = 0;  // 0: [4, 4, Cin, Cout]
  // The flat index of U[m][k][ci][co] in the weights' data.
  int64_t index(int64_t m, int64_t k, int64_t ci, int64_t co) const {
    const int64_t e = m * 4 + k;
    return panel == 0 ? (e * cin + ci) * cout + co
                      : ((e * (cout / panel) + co / panel) * cin + ci) * panel + co % panel;
  }
};
// The layout of u of shape `u` (rank 4 or 5 as above; anything else is cin = cout = 0).
WinogradWeights conv2d_winograd_weights(const Shape& u);
// The shape to store U for cin -> cout channels in.
Shape conv2d_winograd_weights_shape(int64_t cin, int64_t cout);

struct UnaryParams {  // leaky_relu alpha, clamp bounds, gelu variant, pow exponent
  double alpha = 0.01;  // hard_sigmoid: 0.2 (ONNX's default), with beta
  double beta = 0.5;
  double lo = 0, hi = 6;
  bool gelu_tanh = false;
  double exponent = 1;
};
UnaryParams unary_params(const Node& n);

// reduce_*: which of the input's `rank` axes are reduced ("axes", default all).
std::vector<bool> reduced_axes(const Node& n, size_t rank);
// Does one output element of `n` read its input number `input` (`x`) at more than its own index
// along `axis` (a reduction, a normalisation, a window, a gather, a shifted slice or a matmul's
// K along it)? Asked where that input and the output share the axis, e.g. whether samples along
// a batch axis stay independent (fusion/frontend/dynamic.h). Ops that move axes (reshape,
// transpose, concat) answer false: where the axis goes is their shapes' business.
bool couples_along(const Node& n, const Tensor& x, size_t input, int axis);

// gather: the constant indices along "axis", negative ones made positive, range-checked.
std::vector<int64_t> gather_indices(const Node& n, const Shape& x);

// slice: per axis of x, the first index read, the step and the output extent (ONNX Slice's
// clamping; every axis, the unsliced ones as {0, 1, dim}). GraphError for an empty result.
struct SliceDim {
  int64_t start = 0, step = 1, extent = 1;
};
std::vector<SliceDim> slice_dims(const Node& n, const Shape& x);

// Numpy broadcasting of two shapes; GraphError naming the node if incompatible.
Shape broadcast_shapes(const Node& n, const Shape& a, const Shape& b);
// Resolves a reshape target (one -1 inferred, 0 copies the input's dim).
Shape reshape_target(const Node& n, const Shape& in);

}  // namespace opfuse::graph
