// Runs a graph through Halide's JIT on the host with a FusionPlan's schedule: the fused (or
// unfused, or any legal) plan exactly as the AOT generator would build it, for tests and
// exploration without a build step. Do not use in a process that also loads PoCL.
#pragma once

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/planner/plan.h"

namespace opfuse::schedules {

// Returns the graph outputs, by name. Params come from graph::param_values unless given.
graph::TensorMap realize_with_plan(const graph::Graph& g, const fusion::FusionPlan& plan,
                                   const graph::TensorMap& inputs,
                                   const graph::TensorMap& params = {});

}  // namespace opfuse::schedules
