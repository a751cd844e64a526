// A FusionPlan: the partition of a graph into fused groups, and why.
//
// Every node is in exactly one group. Per group: its kind (single, vertical, horizontal,
// mixed), members, the cost model's prediction, what it asks of the schedule stage, and
// the reasons that decided it (rule, score, constraints). It serialises to JSON (the decision
// log) and renders to DOT (groups as clusters, coloured by kind).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/graph.h"

namespace opfuse::fusion {

enum class GroupKind { single, vertical, horizontal, mixed };
const char* to_string(GroupKind k);

// What the plan asks of the schedule stage (schedules/group_schedule.h): the cost
// model's tiling and prefetch figures, and a user's or explore's requests. Unset requests
// (0, empty) leave the choice to the stage.
struct BlockRequest {
  int rows = 0, vectors = 0;  // an anchor's register block; 0: the stage's
  int reduction_chunk = 0;     // an NHWC conv's input channels (a linear's K) per pass
};
struct ScheduleRequest {
  double tile_fraction = 1;  // share of the root's outer loop one tile covers
  int prefetch_distance = 1;  // 7.3.4, vector-loop iterations ahead
  int vector_lanes = 0;       // CPU f32 lanes of the inner loops
  int gpu_threads = 0;        // threads per GPU block of each root's kernel
  std::map<std::string, std::string> placements;  // node -> "inline", "at_tile", "per_row",
                                                  // "materialized" (stored nodes stay roots)
  std::map<std::string, BlockRequest> blocks;     // anchor -> its register block
};

struct FusedGroup {
  int id = 0;
  GroupKind kind = GroupKind::single;
  std::vector<std::string> nodes;  // topological order
  std::string rule;                // the rule that formed it, "local_search" or "" (unfused)
  double score = 0;
  GroupEstimate estimate;
  double unfused_time_s = 0;  // the same nodes, one kernel each
  ScheduleRequest request;
  bool on_critical_path = false;
  std::vector<std::string> reasons;
};

struct FusionPlan {
  std::string graph;
  std::string profile;
  std::string cost_model;
  std::vector<FusedGroup> groups;  // topological order
  double unfused_time_s = 0;       // sum over ops run one kernel each
  double fused_time_s = 0;         // sum over groups (the 7.1.3 objective)
  double unfused_bytes = 0;        // M_total: every op reads its inputs and writes its output
  double fused_bytes = 0;          // M_boundary: only group boundaries touch memory
  double bandwidth_saving = 0;     // 7.3.2 eta = 1 - M_boundary / M_total
  double critical_path_s = 0;      // longest group path to the critical outputs (7.1.4)
  double latency_bound_s = 0;      // L_max, 0 when none
  bool latency_bound_met = true;
  std::vector<std::string> log;  // every decision, in order

  int kernels_fused() const { return int(groups.size()); }
  const FusedGroup* group_of(const std::string& node) const;
};

std::string plan_to_json(const FusionPlan& p);
// `notes`: a line under each node's name (the schedule stage's placement and tiling).
std::string plan_to_dot(const FusionPlan& p, const graph::Graph& g,
                        const std::map<std::string, std::string>& notes = {});
// A readable table for the command line.
std::string plan_to_table(const FusionPlan& p);

}  // namespace opfuse::fusion
