// Any bytes as a user's plan for the zoo's mixed model: std::invalid_argument, or a legal plan
// and its schedule records on an AVX-512 and an AVX2 target (requests the record stage
// refuses are std::invalid_argument too).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fusion/graph/zoo.h"
#include "fusion/planner/planner.h"
#include "schedules/group_schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opfuse;
  static const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  static const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  try {
    const auto groups = fusion::user_groups_from_plan_json(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    const fusion::FusionPlan plan = fusion::plan_from_user_groups(g, model, groups);
    schedules::TargetFacts avx512 = schedules::facts_of(model.profile()), avx2 = avx512;
    avx2.lanes = 8;
    avx2.vector_registers = 16;
    for (const auto& t : {avx512, avx2}) {
      const schedules::PipelineSchedule s = schedules::schedule_plan(g, plan, t);
      schedules::plan_to_json(plan, s);
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
