// A dynamic library's dimensions (exercise 7.6), as `opfuse compile` asks the graph generator
// for them and the generator writes them into the library's entry point
// (generators/weights_entry.h). No Halide here: the command line links it too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace opfuse::generators {

// The dynamic dimensions a library's entry point serves, and the sizes it has generated
// functions for: one function per combination of the dimensions' sizes
// (dispatch_function: NAME_b<size>[x<size>...]_impl).
//   sliced  (a batch, separable: fusion/frontend/dynamic.h) every size in min..max, 1 among the
//           functions' sizes: a call at size n runs the largest function that fits on the next
//           slice of the batch until n is done; the arguments that carry it (on their first
//           axis) are sliced in place, without a copy. At most one dimension is sliced.
//   exact   (a sequence length) the functions' sizes only, each call by its own function
struct DispatchDim {
  std::string symbol;
  int64_t min = 1, max = 1;
  std::vector<int64_t> sizes;  // ascending
  bool exact = false;
};
struct Dispatch {
  std::vector<DispatchDim> dims;
  // Per argument (C name), per dimension: its row-major axes that are that dimension's
  // symbol. Filled by the generator.
  std::map<std::string, std::vector<std::vector<int>>> axes;
  // Every combination of the dimensions' sizes, the last dimension's varying fastest: the
  // order of the entry point's table of functions.
  std::vector<std::vector<int64_t>> combinations() const;
};
// "batch:1..64:1,2,4,8" or "seq:exact:32,77,128", several joined by ';'
// ("batch:1..16:1,2,4;seq:exact:32,128"); std::invalid_argument saying what is wrong.
Dispatch parse_dispatch(const std::string& text);
std::string dispatch_to_string(const Dispatch& d);
// NAME_b<s1>[x<s2>...]_impl: the generated function for one combination of sizes.
std::string dispatch_function(const std::string& name, const std::vector<int64_t>& sizes);

}  // namespace opfuse::generators
