#include "schedules/jit.h"

#include <thread>

#include "Halide.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "schedules/emitter.h"

namespace opfuse::schedules {

using namespace Halide;

graph::TensorMap realize_with_plan(const graph::Graph& g, const fusion::FusionPlan& plan,
                                   const graph::TensorMap& inputs, const graph::TensorMap& params) {
  for (const auto& name : g.tensor_names()) {
    if (g.tensor(name).kind != graph::TensorKind::intermediate &&
        g.tensor(name).dtype != graph::DType::f32) {
      throw graph::GraphError("realize_with_plan: only f32 tensors are supported, '" + name +
                              "' is f16");
    }
  }
  std::vector<Buffer<>> keep;
  const std::map<std::string, Func> sources = ops::buffer_sources(g, inputs, params, keep);
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
