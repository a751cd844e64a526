// A FusionPlan: the partition of a graph into fused groups, and why.
//
// Every node is in exactly one group. Per group: its kind (single, vertical, horizontal,
// mixed), members, the cost model's prediction, the schedule intent the emitter follows, and
// the reasons that decided it (rule, score, constraints). It serialises to JSON (the decision
// log) and renders to DOT (groups as clusters, coloured by kind).
#pragma once

#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/graph.h"

namespace opfuse::fusion {

enum class GroupKind { single, vertical, horizontal, mixed };
const char* to_string(GroupKind k);

// Where each member's values live in the fused loop nest (schedules/ turns this into Halide).
struct ScheduleIntent {
  std::string anchor;                     // the node whose loop nest the group shares
  std::vector<std::string> inlined;       // compute_inline: values exist only in registers
  std::vector<std::string> compute_at;    // computed per tile of the anchor (stencils, reductions)
  std::vector<std::string> materialized;  // computed once for the group, before its tiles (a
                                          // transpose an anchor reads whole)
  std::vector<std::string> stored;        // outputs of the group, written to memory
  double tile_fraction = 1;               // share of the anchor's outer loop one tile covers
  int prefetch_distance = 1;              // 7.3.4, vector-loop iterations ahead
  int gpu_threads = 256;                  // threads per GPU block
  int vector_lanes = 0;                   // CPU f32 lanes of the inner loops; 0: the emitter's
                                          // default (exploration varies it)
};

struct FusedGroup {
  int id = 0;
  GroupKind kind = GroupKind::single;
  std::vector<std::string> nodes;  // topological order
  std::string rule;                // the rule that formed it, "local_search" or "" (unfused)
  double score = 0;
  GroupEstimate estimate;
  double unfused_time_s = 0;  // the same nodes, one kernel each
  ScheduleIntent intent;
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
std::string plan_to_dot(const FusionPlan& p, const graph::Graph& g);
// A readable table for the command line.
std::string plan_to_table(const FusionPlan& p);

}  // namespace opfuse::fusion
