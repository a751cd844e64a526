#include "fusion/ops/realize.h"

#include <cstring>

#include "fusion/graph/op_schema.h"
#include "fusion/ops/lower.h"

namespace opfuse::ops {

using namespace Halide;

namespace {

graph::HostTensor from_buffer(const graph::Shape& shape, const Buffer<>& b) {
  graph::HostTensor t(shape);
  if (b.type() == Float(16)) {
    const float16_t* p = static_cast<const float16_t*>(b.data());
    for (size_t i = 0; i < t.size(); ++i) t.data[i] = float(p[i]);
  } else {
    const float* p = static_cast<const float*>(b.data());
    std::copy(p, p + t.size(), t.data.begin());
  }
  return t;
}

}  // namespace

int weight_block(const graph::Shape& weights, int lanes) {
  if (weights.size() == 2) return int(graph::linear_weight_panel(weights));
  return weights.size() == 4 && lanes > 1 && weights[0] % lanes == 0 ? lanes : 0;
}

int conv_weight_chunk(int64_t cin) { return cin > 32 && cin % 32 == 0 ? 32 : int(cin); }

std::vector<int> packed_weight_extents(const graph::Shape& w, int block) {
  if (block == 0) return halide_extents(w);
  if (w.size() == 2) return {block, int(w[0]), int(graph::weight_panels(w[1], block))};
  const int c = conv_weight_chunk(w[1]);
  return {block, c, int(w[3]), int(w[2]), int(w[1] / c), int(w[0] / block)};
}

Buffer<> pack_weights(const Buffer<>& weights, int block) {
  if (weights.dimensions() == 2 && block > 0) {
    // A linear's [K, N] (Halide dims n, k) seen as (lane, k, panel), copied dense; the whole
    // panels through one view, a last partial panel through a view of its columns, the rest
    // of it zeros.
    const int n = weights.dim(0).extent(), k = weights.dim(1).extent();
    const int panels = int(graph::weight_panels(n, block)), whole = n / block;
    Buffer<> packed(weights.type(), {block, k, panels});
    std::memset(packed.data(), 0, packed.size_in_bytes());
    auto copy_panels = [&](int first, int count, int lanes) {
      // A buffer's host pointer is its box's first element: column first * block.
      const int64_t column = int64_t(first) * block * weights.dim(0).stride();
      const halide_dimension_t view[3] = {{0, lanes, weights.dim(0).stride(), 0},
                                          {0, k, weights.dim(1).stride(), 0},
                                          {first, count, weights.dim(0).stride() * block, 0}};
      auto* host = static_cast<const uint8_t*>(weights.data()) + column * weights.type().bytes();
      Buffer<> seen(weights.type(), const_cast<uint8_t*>(host), 3, view);
      packed.copy_from(seen);  // the view's box: its lanes of its panels
    };
    if (whole > 0) copy_panels(0, whole, block);
    if (panels > whole) copy_panels(whole, 1, n - whole * block);
    return packed;
  }
  if (weights.dimensions() != 4) return weights;
  const int kw = weights.dim(0).extent(), kh = weights.dim(1).extent(),
            ci = weights.dim(2).extent(), co = weights.dim(3).extent();
  if (block == 0) {
    // Halide's dims are kw, kh, ci, co: co first in storage, then kw, kh, ci.
    Buffer<> packed(weights.type(), {kw, kh, ci, co}, std::vector<int>{3, 0, 1, 2});
    packed.copy_from(weights);
    return packed;
  }
  // The weights seen through the packed buffer's dims (lane, ci in its chunk, kw, kh, chunk,
  // block): a view with the same elements, copied into a dense buffer of those dims.
  const int c = conv_weight_chunk(ci);
  const int s[4] = {weights.dim(0).stride(), weights.dim(1).stride(), weights.dim(2).stride(),
                    weights.dim(3).stride()};
  halide_dimension_t view[6] = {{0, block, s[3], 0},      {0, c, s[2], 0},
                                {0, kw, s[0], 0},         {0, kh, s[1], 0},
                                {0, ci / c, s[2] * c, 0}, {0, co / block, s[3] * block, 0}};
  Buffer<> seen(weights.type(), const_cast<void*>(static_cast<const void*>(weights.data())), 6,
                view);
  Buffer<> packed(weights.type(), {block, c, kw, kh, ci / c, co / block});
  packed.copy_from(seen);
  return packed;
}

std::vector<Expr> packed_weight_index(const std::vector<Var>& a, int block, int64_t cin) {
  if (block == 0) return std::vector<Expr>(a.begin(), a.end());
  if (a.size() == 2) return {a[0] % block, a[1], a[0] / block};
  const int c = conv_weight_chunk(cin);
  return {a[3] % block, a[2] % c, a[0], a[1], a[2] / c, a[3] / block};
}

Func buffer_source(const std::string& name, Buffer<>& b, const graph::Shape& shape, bool pack,
                   int lanes) {
  Func f(name);
  const std::vector<Var> args = halide_args(make_vars(shape.size()));
  if (pack && (shape.size() == 4 || weight_block(shape, lanes) > 0)) {
    const int block = weight_block(shape, lanes);
    b = pack_weights(b, block);
    f(args) = b(packed_weight_index(args, block, shape[1]));
  } else {
    f(args) = b(std::vector<Expr>(args.begin(), args.end()));
  }
  return f;
}

std::map<std::string, Func> buffer_sources(const graph::Graph& g, const graph::TensorMap& inputs,
                                           const graph::TensorMap& params,
                                           std::vector<Buffer<>>& buffers,
                                           const std::set<std::string>& pack, int lanes) {
  std::map<std::string, Func> sources;
  for (const auto& name : g.tensor_names()) {
    const graph::Tensor& t = g.tensor(name);
    if (t.kind == graph::TensorKind::intermediate) continue;
    graph::HostTensor value;
    if (t.kind == graph::TensorKind::input) {
      auto it = inputs.find(name);
      if (it == inputs.end()) throw graph::GraphError("missing graph input '" + name + "'");
      value = it->second;
    } else {
      auto it = params.find(name);
      value = it != params.end() ? it->second : graph::param_values(t);
    }
    Buffer<> b = tensor_buffer(t, value);
    sources[name] =
        buffer_source(halide_safe_name(name) + "_src", b, t.shape, pack.count(name) > 0, lanes);
    buffers.push_back(b);
  }
  return sources;
}

graph::TensorMap realize_root(const graph::Graph& g, const graph::TensorMap& inputs,
                              const graph::TensorMap& params) {
  std::vector<Buffer<>> keep_alive;
  const std::map<std::string, Func> sources = buffer_sources(g, inputs, params, keep_alive);
  LoweredGraph lowered = lower(g, sources);
  for (const LoweredNode& n : lowered.nodes) {
    for (Func f : n.funcs) f.compute_root();
  }
  std::vector<Func> outs;
  std::vector<Buffer<>> bufs;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const graph::Tensor& t = g.tensor(g.outputs()[i]);
    Func out = lowered.outputs[i];
    if (t.dtype == graph::DType::f16) {
      Func narrow(halide_safe_name(t.name) + "_f16");
      std::vector<Var> v = make_vars(t.shape.size());
      narrow(halide_args(v)) = cast(Float(16), out(halide_args(v)));
      out = narrow;
      bufs.push_back(Buffer<float16_t>(halide_extents(t.shape)));
    } else {
      // An output Func is also an intermediate of other nodes; wrap it so the pipeline's
      // outputs are distinct Funcs.
      Func wrap(halide_safe_name(t.name) + "_out");
      std::vector<Var> v = make_vars(t.shape.size());
      wrap(halide_args(v)) = out(halide_args(v));
      out = wrap;
      bufs.push_back(Buffer<float>(halide_extents(t.shape)));
    }
    outs.push_back(out);
  }
  Pipeline p(outs);
  p.realize(Realization(bufs), get_jit_target_from_environment());

  graph::TensorMap result;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    result[g.outputs()[i]] = from_buffer(g.tensor(g.outputs()[i]).shape, bufs[i]);
  }
  return result;
}

}  // namespace opfuse::ops
