// Any bytes as a user's plan for the zoo's mixed model: std::invalid_argument or a legal plan.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fusion/graph/zoo.h"
#include "fusion/planner/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opfuse;
  static const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  static const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  try {
    const auto groups = fusion::user_groups_from_plan_json(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    fusion::plan_from_user_groups(g, model, groups);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
