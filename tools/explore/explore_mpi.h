// `opfuse explore GRAPH --mpi`, under mpirun: rank r of n measures the candidates i with
// i % n == r of the fixed candidate list (no threshold gate: a rank sees only part of each
// round), into OUT/rank<r>/; rank 0 gathers every rank's results over MPI (no shared file
// system needed) and writes the merged folder OUT/, as `opfuse explore merge` would.
// Ranks on one machine share its cores and disturb each other's timings: run one rank per
// node (e.g. mpirun --map-by ppr:1:node).
#pragma once

#include <string>

#include "fusion/graph/graph.h"
#include "tools/explore/explore.h"

namespace opfuse::explore {

int run_mpi(const graph::Graph& g, Options o, const std::string& out_dir, int argc, char** argv);

}  // namespace opfuse::explore
