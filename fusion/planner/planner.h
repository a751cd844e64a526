// The fusion planner: graph + cost model -> FusionPlan.
//
//   Step 1  unfused baseline     every op its own group; its time and bytes
//   Step 2  pattern matching     the rule library's matches (7.2.2)
//   Step 3  conflict resolution  greedy by score = benefit / cost * priority (7.2.3):
//                                overlap, resource and dependence conflicts are refused
//   Step 4  local search         merge (producer -> consumer, siblings sharing an input) and
//                                split moves while sum_P C(P) + sum T(P_i, P_j) decreases
//                                (7.1.3); each group's C + T is its estimate
//                                max(T_compute, T_memory) + T_overhead (7.4.1), where T_memory
//                                charges the bytes crossing its cut edges
//   Step 5  the plan             kinds, tiling requests, critical path against L_max (7.1.4)
//
// Each step only replaces groups by cheaper ones, so the plan never costs more than the
// unfused one under the model.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/graph.h"
#include "fusion/pattern/pattern.h"
#include "fusion/planner/legality.h"
#include "fusion/planner/plan.h"

namespace opfuse::fusion {

// Measured latency distributions of the fused and the unfused plan (from `opfuse explore`).
struct TailMeasurement {
  double fused_p50_s = 0, fused_p99_s = 0;
  double unfused_p50_s = 0, unfused_p99_s = 0;
};

struct PlannerOptions {
  bool enable_fusion = true;             // false: the unfused plan, with reasons
  std::set<std::string> disabled_rules;  // switches per rule
  std::vector<Rule> rules = builtin_rules();
  bool local_search = true;
  size_t max_group_ops = kDefaultMaxGroupOps;
  size_t max_local_search_rounds = 8;
  // Wall-time budget for conflict resolution and local search, seconds (0: none). When it
  // runs out the planner keeps the plan it has (every step only lowers the cost, so that plan
  // is legal and no worse than unfused) and says so in the log.
  double time_limit_s = 0;
  double latency_bound_s = 0;                 // L_max over the critical paths; 0: none
  std::vector<std::string> critical_outputs;  // outputs whose paths are critical; empty: all
  // Exercise 7.7 tail latency: fuse only if T99_fused < T_max and jitter_fused <
  // jitter_bound * jitter_unfused (jitter = p99 / p50); otherwise roll back to the
  // conservative (unfused) plan. Measured distributions decide when given; without them the
  // predicted time stands for T99 and jitter cannot be checked (the log says so).
  double p99_bound_s = 0;  // T_max; 0: no tail bound
  double jitter_bound = 1.2;
  std::optional<TailMeasurement> measured_tail;
};

FusionPlan plan_fusion(const graph::Graph& g, const CostModel& model,
                       const PlannerOptions& options = {});

// A user's partition: groups of node names, optionally with a tile fraction, a vector width,
// placements and register blocks each (unset: the cost model's / the schedule stage's). Read
// from a plan JSON ("groups": [{"nodes": [...], "schedule": {"tile_fraction": f,
// "vector_lanes": n, "placements": {...}, "blocks": {...}}}, ...]); a plan written by opfuse
// is a valid input, edited or not, and gives the same schedule records.
struct UserGroup {
  std::vector<std::string> nodes;
  double tile_fraction = 0;
  int vector_lanes = 0;
  int gpu_threads = 0;
  std::map<std::string, std::string> placements;  // "schedule": {"placements": {node: ...}}
  std::map<std::string, BlockRequest> blocks;     // "schedule": {"blocks": {node: {rows, vectors}}}
};
std::vector<UserGroup> user_groups_from_plan_json(const std::string& text,
                                                  const std::string& source);
// The same, read from a plan JSON file; std::invalid_argument names the file.
std::vector<UserGroup> user_groups_from_plan_file(const std::string& path);

// The plan for a user's partition, checked like the planner's own groups (every node once,
// convex, acyclic between groups, no side effects, resources); std::invalid_argument names
// the group and the reason when it is not legal. Estimates come from the model.
FusionPlan plan_from_user_groups(const graph::Graph& g, const CostModel& model,
                                 const std::vector<UserGroup>& groups,
                                 const PlannerOptions& options = {});

}  // namespace opfuse::fusion
