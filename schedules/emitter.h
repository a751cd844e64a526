// The schedule emitter: the schedule stage's records (schedules/group_schedule.h)
// applied to the lowered Funcs, mechanically. For each fused group, on the CPU:
//
//   for tile in parallel over the root's outer dims        <- root: a stored node (or the
//     [compute_at members: anchors' accumulators, row         pipeline Output it feeds)
//      reductions, producers of windows, per tile]
//     for ... vectorized by the record's width:
//       root = f(inlined members ...)                      <- elementwise members inline
//
// and on a GPU target the root is one kernel (gpu_blocks x gpu_threads over its fused dims),
// accumulators of anchors live in registers of each thread, and row reductions (softmax,
// layer norm statistics) and per-channel factors are their own small kernels.
//
// Anchors (conv, matmul, linear) get the record's register block: output channels (or
// columns) vectorised, several rows unrolled, reduction loops inside, and conv weights
// repacked once so the vector loads are contiguous.
//
// The unfused strategy is the same emitter on the unfused plan's records (every op its own
// group), so fused and unfused differ only in fusion.
#pragma once

#include <set>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "fusion/hardware/profile.h"
#include "fusion/ops/lower.h"
#include "fusion/planner/plan.h"
#include "schedules/group_schedule.h"

namespace opfuse::schedules {

struct Pipeline {
  const graph::Graph* graph;
  const ops::LoweredGraph* lowered;
  std::vector<Halide::Func> outputs;  // outputs[i](args) = lowered->outputs[i](args)
  // Weights whose sources are already stored packed (ops::pack_weights, for
  // schedules::weights_to_pack or a weights file): their blocks read them as they are, with
  // no repack; a linear's blocks over padded panels guard their last columns.
  std::set<std::string> packed_weights = {};
};

// What the schedule stage knows of `target`: its vector width and registers, `cores` CPU
// threads for the parallel tiles, a GPU's threads per block from `hw`.
schedules::TargetFacts target_facts(const Halide::Target& target, const fusion::HardwareProfile& hw,
                                 int cores);

// Applies the records (schedules::schedule_plan of the pipeline's graph) to the lowered Funcs.
void apply_schedule(const Pipeline& p, const schedules::PipelineSchedule& s);

// The vector ISA of a CPU target (width, vector registers): what the register blocks are
// sized from, and what the host profile is measured for.
fusion::Isa isa_of(const Halide::Target& target);
// The hardware profile to plan `target` with: "host" is this machine measured for the
// target's ISA (fusion/hardware/host.h), anything else fusion::load_profile's.
fusion::HardwareProfile profile_for(const std::string& name, const Halide::Target& target);

// Sets bounds estimates on every output from the graph's shapes (the autoschedulers need them).
void set_output_estimates(const Pipeline& p);

// Declares every output's extents as the graph's static shapes. Halide then infers exact,
// constant regions instead of over-approximating through fused, guarded loops (which can
// claim reads before an input's start), and drops the checks that constant shapes make moot.
void bound_outputs(const Pipeline& p);

}  // namespace opfuse::schedules
