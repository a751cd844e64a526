// A model's weights in a file beside its library (the graph generator's `weights_out`): the
// weights file (runtime/weights_file.h) and the library's entry point, a C++ source that maps
// and checks that file on first use and calls the generated function with the weights, so the
// entry takes the model's inputs and outputs only, as an embedded library's does.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "generators/dispatch.h"

namespace opfuse::generators {

// One argument of the generated function (the Halide pipeline), in its order.
struct PipelineArg {
  std::string tensor;  // the graph tensor
  std::string c_name;  // the buffer's name in the generated function
  enum Kind { input, weight, output } kind;
  Halide::Type type;
};

// Writes PREFIX.weights (every weight argument's values), PREFIX_entry.cpp and PREFIX.h. The
// entry point is named after PREFIX's file name, NAME; it calls NAME_impl, the generated
// function (with `dispatch`, NAME_b<size>_impl per size). `gpu`: calls are serialised, as the
// weights' buffers then hold device state.
// Weights in `packed` are stored as ops::pack_weights lays them out for `lanes` f32 lanes
// (weights::kCoutBlocked, kCoutInnermost or kColumnPanels; the generated function's buffer
// for each has that layout).
void write_weights_entry(const std::string& prefix, const graph::Graph& g,
                         const std::vector<PipelineArg>& args, bool gpu,
                         const Dispatch* dispatch = nullptr,
                         const std::set<std::string>& packed = {}, int lanes = 1);

}  // namespace opfuse::generators
