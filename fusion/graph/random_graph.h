// Random, valid operator graphs for property tests, differential tests and planner benchmarks.
//
// Graphs look like CNN blocks: 4-D NCHW activations; each new node reads one or two tensors
// chosen among the last `window` produced (so, as in real networks, edges are mostly local),
// making chains, diamonds (two consumers of one tensor, then an add) and siblings. Ops:
// unary activations, add/mul, batch norm, 3x3 and 1x1 convs, shape-preserving pools.
#pragma once

#include <cstdint>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

struct RandomGraphOptions {
  size_t nodes = 20;
  size_t window = 6;             // how far back a node may read
  int64_t spatial = 8;           // H = W
  int64_t channels = 4;          // C of the input; convs produce 4 or 8 (or `channels`)
  double stateful_fraction = 0;  // share of nodes marked "stateful" (never fused)
};

// Deterministic for a seed; the graph is validated.
Graph random_graph(uint64_t seed, const RandomGraphOptions& options = {});

}  // namespace opfuse::graph
