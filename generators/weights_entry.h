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

namespace opfuse::generators {

// One argument of the generated function (the Halide pipeline), in its order.
struct PipelineArg {
  std::string tensor;  // the graph tensor
  std::string c_name;  // the buffer's name in the generated function
  enum Kind { input, weight, output } kind;
  Halide::Type type;
};

// A dynamic dimension's entry point: the symbol, the sizes it serves, and the sizes it has a
// generated function for (NAME_b<size>_impl each).
//   sliced  (a batch, separable: fusion/frontend/dynamic.h) every size in min..max, 1 among the
//           functions' sizes: a call at size n runs the largest function that fits on the next
//           slice of the batch until n is done; the arguments that carry it (on their first
//           axis) are sliced in place, without a copy
//   exact   (a sequence length) the functions' sizes only, each call by its own function
struct Dispatch {
  std::string symbol;
  int64_t min = 1, max = 1;
  std::vector<int64_t> buckets;  // ascending
  bool exact = false;
  // Per argument (C name): its row-major axes that are the symbol. Filled by the generator.
  std::map<std::string, std::vector<int>> axes;
};
// "batch:1..64:1,2,4,8" or "seq:exact:32,77,128"; std::invalid_argument saying what is wrong.
Dispatch parse_dispatch(const std::string& text);
std::string dispatch_to_string(const Dispatch& d);

// Writes PREFIX.weights (every weight argument's values), PREFIX_entry.cpp and PREFIX.h. The
// entry point is named after PREFIX's file name, NAME; it calls NAME_impl, the generated
// function (with `dispatch`, NAME_b<size>_impl per size). `gpu`: calls are serialised, as the
// weights' buffers then hold device state.
// Weights in `packed` are stored as ops::pack_conv_weights lays them out for `lanes` f32
// lanes (weights::kCoutBlocked or kCoutInnermost; the generated function's buffer for each
// has that layout).
void write_weights_entry(const std::string& prefix, const graph::Graph& g,
                         const std::vector<PipelineArg>& args, bool gpu,
                         const Dispatch* dispatch = nullptr,
                         const std::set<std::string>& packed = {}, int lanes = 1);

}  // namespace opfuse::generators
