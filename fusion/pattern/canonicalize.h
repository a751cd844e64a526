// Canonicalisation before planning: decomposed forms, as PyTorch's ONNX exporter writes
// them, are rewritten into the library's operators so that fusion rules see the real ops.
//
//   layer_norm  reduce_mean -> sub -> pow -> reduce_mean -> add -> sqrt -> div (-> mul -> add)
//   gelu        div -> erf -> add -> mul -> mul      x * 0.5 * (1 + erf(x / sqrt 2))
//               (mul by 1/sqrt 2 in place of the div too)
//   silu        sigmoid -> mul                       x * sigmoid(x)
//   relu6       clamp                                Clip(0, 6)
//   linear      matmul -> add                        x W + b, W [K, N] and b [N] constants
//               matmul                               x W, no bias (linear_no_bias)
//
// Each rewrite is a rule of the pattern language (7.2.1) that finds candidates with the
// matcher, and a check of what the pattern cannot say (the same x feeding both ends,
// constants such as the exponent 2 or the 0.5, axes that LayerNorm can express). A match
// is rewritten only if its inner values are used nowhere else.
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"
#include "fusion/pattern/pattern.h"

namespace opfuse::fusion {

// The rewrite rules, in the order they are tried.
const std::vector<Rule>& canonical_rules();

// Rewrites `g` in place until no rule applies; returns one line per rewrite that fired
// ("canonicalize: gelu_erf: div_0 erf_0 add_1 mul_2 mul_3 -> gelu 'mul_3'").
std::vector<std::string> canonicalize(graph::Graph& g);

}  // namespace opfuse::fusion
