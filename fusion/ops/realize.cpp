#include "fusion/ops/realize.h"

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

Buffer<> cout_innermost(const Buffer<>& weights) {
  if (weights.dimensions() != 4) return weights;
  std::vector<int> sizes;
  for (int d = 0; d < 4; ++d) sizes.push_back(weights.dim(d).extent());
  // Halide's dims are kw, kh, ci, co: co first in storage, then kw, kh, ci.
  Buffer<> packed(weights.type(), sizes, std::vector<int>{3, 0, 1, 2});
  packed.copy_from(weights);
  return packed;
}

std::map<std::string, Func> buffer_sources(const graph::Graph& g, const graph::TensorMap& inputs,
                                           const graph::TensorMap& params,
                                           std::vector<Buffer<>>& buffers,
                                           const std::set<std::string>& pack) {
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
    if (pack.count(name)) b = cout_innermost(b);
    buffers.push_back(b);
    Func f(halide_safe_name(name) + "_src");
    const std::vector<Var> args = halide_args(make_vars(t.shape.size()));
    f(args) = b(std::vector<Expr>(args.begin(), args.end()));
    sources[name] = f;
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
