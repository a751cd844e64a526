#include "schedules/jit.h"

#include <thread>

#include "Halide.h"
#include "fusion/ops/lower.h"
#include "schedules/emitter.h"

namespace opfuse::schedules {

using namespace Halide;

graph::TensorMap realize_with_plan(const graph::Graph& g, const fusion::FusionPlan& plan,
                                   const graph::TensorMap& inputs, const graph::TensorMap& params) {
  std::map<std::string, Func> sources;
  std::vector<Buffer<float>> keep;
  for (const auto& name : g.tensor_names()) {
    const graph::Tensor& t = g.tensor(name);
    if (t.kind == graph::TensorKind::intermediate) continue;
    if (t.dtype != graph::DType::f32) {
      throw graph::GraphError("realize_with_plan: only f32 tensors are supported, '" + name +
                              "' is f16");
    }
    const graph::TensorMap& from = t.kind == graph::TensorKind::input ? inputs : params;
    auto it = from.find(name);
    graph::HostTensor value;
    if (it != from.end()) {
      value = it->second;
    } else if (t.kind == graph::TensorKind::param) {
      value = graph::param_values(t);
    } else {
      throw graph::GraphError("realize_with_plan: missing graph input '" + name + "'");
    }
    Buffer<float> b(std::vector<int>(t.shape.rbegin(), t.shape.rend()));
    std::copy(value.data.begin(), value.data.end(), b.data());
    keep.push_back(b);
    // A named wrapper, as a Generator Input would be.
    Func f(ops::halide_safe_name(name) + "_in");
    const std::vector<Var> v = ops::halide_args(ops::make_vars(t.shape.size()));
    f(v) = b(std::vector<Expr>(v.begin(), v.end()));
    sources[name] = f;
  }
  ops::LoweredGraph lowered = ops::lower(g, sources);
  Pipeline pipe{&g, &lowered, {}};
  std::vector<Buffer<float>> outs;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const graph::Tensor& t = g.tensor(g.outputs()[i]);
    Func out(ops::halide_safe_name(t.name) + "_out");
    const std::vector<Var> v = ops::halide_args(ops::make_vars(t.shape.size()));
    out(v) = lowered.outputs[i](std::vector<Expr>(v.begin(), v.end()));
    pipe.outputs.push_back(out);
    outs.emplace_back(std::vector<int>(t.shape.rbegin(), t.shape.rend()));
  }
  const Target target = get_jit_target_from_environment();
  bound_outputs(pipe);
  apply_plan(pipe, plan, target, int(std::max(1u, std::thread::hardware_concurrency())));
  Halide::Pipeline p(pipe.outputs);
  std::vector<Buffer<>> bufs(outs.begin(), outs.end());
  p.realize(Realization(bufs), target);
  graph::TensorMap result;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    graph::HostTensor h(g.tensor(g.outputs()[i]).shape);
    std::copy(outs[i].data(), outs[i].data() + h.size(), h.data.begin());
    result[g.outputs()[i]] = std::move(h);
  }
  return result;
}

}  // namespace opfuse::schedules
