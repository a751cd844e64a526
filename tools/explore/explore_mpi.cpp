#include "tools/explore/explore_mpi.h"

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "fusion/hardware/profile.h"
#include "tools/explore/measure.h"

namespace opfuse::explore {

int run_mpi(const graph::Graph& g, Options o, const std::string& out_dir, int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  o.shard = rank;
  o.shards = size;
  o.progress = o.progress && rank == 0;
  int status = 0;
  std::string lines;
  try {
    const fusion::RooflineCostModel model(fusion::load_profile(o.profile));
    const std::string mine = out_dir + "/rank" + std::to_string(rank);
    const Exploration e = explore(g, o, mine, jit_measure(g, model, o));
    for (const auto& r : e.results) lines += result_to_json_line(r) + "\n";
  } catch (const std::exception& e) {
    std::cerr << "opfuse explore (rank " << rank << "): " << e.what() << "\n";
    status = 1;
  }
  // Rank 0 gathers every rank's result lines.
  int len = int(lines.size());
  std::vector<int> lens(static_cast<size_t>(size)), offs(static_cast<size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) offs[size_t(r)] = total, total += lens[size_t(r)];
    all.resize(size_t(total));
  }
  MPI_Gatherv(lines.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  int failed = 0;
  MPI_Reduce(&status, &failed, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0 && !failed) {
    std::filesystem::create_directories(out_dir);
    const std::string merged = out_dir + "/gathered.jsonl";
    std::ofstream(merged) << all;
    Exploration e;
    e.graph = g.name;
    e.results = merge_results({merged});
    std::filesystem::remove(merged);
    std::ofstream res(out_dir + "/results.jsonl");
    for (const auto& r : e.results) res << result_to_json_line(r) << "\n";
    res.close();
    e.log.push_back(std::to_string(e.results.size()) + " candidates measured by " +
                    std::to_string(size) + " MPI ranks, merged by rank 0");
    write_outputs(g, o, e, out_dir);
    std::printf("%s\n", e.log.back().c_str());
  }
  MPI_Finalize();
  return failed;
}

}  // namespace opfuse::explore
