// Every zoo model: its graph file is current, it loads, validates, runs through the Halide
// lowering (root schedule) and matches the reference executor end to end.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "fusion/graph/json_io.h"
#include "fusion/graph/zoo.h"
#include "tests/testing.h"

using namespace opfuse::graph;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("models/ holds the zoo as the builder defines it (run `opfuse zoo` after a change)") {
  for (ZooSize size : {ZooSize::cpu, ZooSize::gpu}) {
    for (const auto& name : zoo_names()) {
      const std::string path =
          std::string(OPFUSE_MODELS_DIR) + "/" + to_string(size) + "/" + name + ".json";
      CAPTURE(path);
      const Graph built = zoo_model(name, size);
      CHECK(read_file(path) == graph_to_json_string(built));
      CHECK(load_graph_json(path) == built);
    }
  }
}

TEST_CASE("every zoo model (cpu size) matches the reference end to end") {
  // Tolerance: reference::kGraphTolerance (chains of up to ~17 ops, f32 reductions of at most
  // 1024 terms).
  for (const auto& name : zoo_names()) {
    CAPTURE(name);
    const Graph g = load_graph_json(std::string(OPFUSE_MODELS_DIR) + "/cpu/" + name + ".json");
    opfuse::testing::check_root_matches_reference(g, opfuse::reference::kGraphTolerance);
  }
}

TEST_CASE("gpu-size models validate, and are larger than their cpu versions") {
  for (const auto& name : zoo_names()) {
    CAPTURE(name);
    const Graph cpu = zoo_model(name, ZooSize::cpu), gpu = zoo_model(name, ZooSize::gpu);
    const Shape& a = cpu.tensor(cpu.inputs()[0]).shape;
    const Shape& b = gpu.tensor(gpu.inputs()[0]).shape;
    CHECK(num_elements(b) > num_elements(a));
    CHECK(num_elements(b) <= kMaxElements);
  }
}
