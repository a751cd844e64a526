// Runs a graph through Halide's JIT with every Func computed at root: each op its own loop
// nest over its whole output, nothing fused. It checks the operator library against the
// reference executor, independent of any fusion decision.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"

namespace opfuse::ops {

// A Func over a Halide buffer for every graph input (from `inputs`, shapes checked) and param
// (from `params`, else graph::param_values), ready for lower(). `buffers` keeps the data
// alive. f16 tensors are stored as Halide float16.
std::map<std::string, Halide::Func> buffer_sources(const graph::Graph& g,
                                                   const graph::TensorMap& inputs,
                                                   const graph::TensorMap& params,
                                                   std::vector<Halide::Buffer<>>& buffers);

// A Halide buffer holding `value` in tensor `t`'s storage dtype (f16 as float16, integers as
// int64/int32); GraphError when the shapes differ.
Halide::Buffer<> tensor_buffer(const graph::Tensor& t, const graph::HostTensor& value);

// Returns the graph outputs, by name. f16 inputs and outputs are stored as Halide float16.
graph::TensorMap realize_root(const graph::Graph& g, const graph::TensorMap& inputs,
                              const graph::TensorMap& params = {});

}  // namespace opfuse::ops
