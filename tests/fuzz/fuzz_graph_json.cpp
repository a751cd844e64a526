// Any bytes as a graph file: a GraphError or a valid graph that the planner then plans.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusion/graph/json_io.h"
#include "fusion/planner/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opfuse;
  static const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  try {
    const graph::Graph g =
        graph::graph_from_json_string(std::string(reinterpret_cast<const char*>(data), size));
    if (g.nodes().size() <= 64) fusion::plan_fusion(g, model);
  } catch (const graph::GraphError&) {
  }
  return 0;
}
