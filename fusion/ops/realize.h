// Runs a graph through Halide's JIT with every Func computed at root: each op its own loop
// nest over its whole output, nothing fused. It checks the operator library against the
// reference executor, independent of any fusion decision.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/ops/host_buffer.h"

namespace opfuse::ops {

// A Func over a Halide buffer for every graph input (from `inputs`, shapes checked) and param
// (from `params`, else graph::param_values), ready for lower(). `buffers` keeps the data
// alive. f16 tensors are stored as Halide float16.
// Params in `cout_innermost` (a conv's [Cout, Cin, KH, KW] weights) are stored with Cout
// innermost (cout_innermost()).
std::map<std::string, Halide::Func> buffer_sources(const graph::Graph& g,
                                                   const graph::TensorMap& inputs,
                                                   const graph::TensorMap& params,
                                                   std::vector<Halide::Buffer<>>& buffers,
                                                   const std::set<std::string>& cout_innermost = {});

// A copy of a conv's weights [Cout, Cin, KH, KW] stored with Cout innermost, as an NHWC
// convolution's register block reads them (one vector load per ci, kh, kw): built once from
// known values, it replaces the repack of every call. Halide compiles for the buffer's strides.
Halide::Buffer<> cout_innermost(const Halide::Buffer<>& weights);

// Returns the graph outputs, by name. f16 inputs and outputs are stored as Halide float16.
graph::TensorMap realize_root(const graph::Graph& g, const graph::TensorMap& inputs,
                              const graph::TensorMap& params = {});

}  // namespace opfuse::ops
