// A linear under reshapes, as transformers export it: x [1, 64, 32] -> reshape [64, 32] ->
// linear [64, 48] -> reshape [1, 64, 48] -> relu (Conv1D: the reshapes keep the last two
// axes), or x -> linear [1, 64, H * D] -> reshape [1, 64, H, D] -> transpose (a head split
// into H = `heads` heads of D = `head` columns).
// Shared by the record-stage test (no Halide) and the differential test.
#pragma once

#include "fusion/graph/builder.h"

namespace opfuse::testing {

inline graph::Graph reshaped_anchor_graph(bool head_split, int64_t head = 16, int64_t heads = 3) {
  graph::GraphBuilder b(head_split ? "head_split" : "conv1d");
  auto x = b.input("x", {1, 64, 32});
  if (head_split) {
    auto w = b.param("w", {32, heads * head});
    b.output(b.transpose(b.reshape(b.linear(x, w), {1, 64, heads, head}), {0, 2, 1, 3}));
  } else {
    auto w = b.param("w", {32, 48});
    b.output(b.relu(b.reshape(b.linear(b.reshape(x, {64, 32}), w), {1, 64, 48})));
  }
  return b.build();
}

}  // namespace opfuse::testing
