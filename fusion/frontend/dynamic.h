// Dynamic shapes (exercise 7.6): what a model's symbolic dimension does, so that one compiled
// artefact can serve every size of it.
//
// A graph is always built at one size per symbol (load_model's `dims`): its shapes are then
// constant and the planner, the cost model and the schedules see extents they can tile. How a
// symbol acts is found by building the model at two sizes and comparing the graphs, which
// also folds whatever shape arithmetic the exporter wrote (Shape -> Gather -> Concat ->
// Reshape) instead of reasoning about it symbolically:
//
//   separable  every tensor that depends on the symbol has one axis of k * symbol and no other
//              change (k = 1 at the inputs and outputs, on their first axis; a dynamo export's
//              [B*S, K] linear rows have k = S); no op reads across that axis (op_schema's
//              couples_along); a reshape keeps each sample's elements together; every output
//              carries it. Samples along it are then independent: a call at size n is a
//              sequence of calls on slices of it, at any sizes summing to n (a batch).
//   otherwise  the first tensor or node that breaks the rule is named (a sequence length,
//              which attention mixes, is not separable).
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

struct SymbolBehaviour {
  std::string symbol;
  bool separable = false;
  std::string why_not;                  // when not separable: what mixes or moves the axis
  std::vector<std::string> inputs;      // graph inputs that carry the symbol (axis 0)
  std::vector<std::string> outputs;     // graph outputs that carry it (axis 0)
  std::vector<std::string> tensors;     // every tensor that depends on it
};

// A size or sizes for a symbol, as the tools take them: "batch=8" (min = max = 8),
// "batch=1..64" (a range), or "seq=32,77,128" (those sizes, in `sizes`, ascending; min and max
// their ends). std::invalid_argument naming the text otherwise.
struct DimRange {
  std::string symbol;
  int64_t min = 1, max = 1;
  std::vector<int64_t> sizes;
};
DimRange parse_dim(const std::string& spec);
// "1,2,4" -> {"1", "2", "4"} (the comma lists --dim and its kin take; "" -> {""}).
std::vector<std::string> split_commas(const std::string& list);
// NAME=N specs as bindings, one size each; std::invalid_argument saying that `command` takes one
// size for a range or a list.
graph::DimBindings parse_bindings(const std::vector<std::string>& specs, const std::string& command);

// Builds `path` with `symbol` at sizes 2 and 3 (every other symbol from `others`) and compares.
// GraphError when the model does not build at those sizes.
SymbolBehaviour analyse_symbol(const std::string& path, const std::string& symbol,
                               const graph::DimBindings& others = {});

// The same on two graphs already built from one model with the symbol at sizes `a` < `b`.
SymbolBehaviour compare_bindings(const graph::Graph& ga, int64_t a, const graph::Graph& gb,
                                 int64_t b, const std::string& symbol);

}  // namespace opfuse::fusion
