// The reference executor: the oracle for every test and the demo. Plain C++ loops, no Halide,
// one function per op, every intermediate materialised, accumulation in double where an op
// reduces (so the reference is at least as accurate as any schedule of the f32 kernels).
#pragma once

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"

namespace opfuse::reference {

// Runs a validated graph. `inputs` holds every graph input; params come from
// graph::param_values unless `params` overrides them. Returns every tensor (inputs, params,
// intermediates and outputs), by name. f16 tensors are rounded to f16 after each op.
graph::TensorMap run(const graph::Graph& g, const graph::TensorMap& inputs,
                     const graph::TensorMap& params = {});

// Runs one node on its inputs (in the node's input order); the output's shape is the graph's.
graph::HostTensor run_node(const graph::Graph& g, const graph::Node& n,
                           const std::vector<const graph::HostTensor*>& inputs);

}  // namespace opfuse::reference
