// Runs a graph through Halide's JIT on the host with a FusionPlan's schedule: the fused (or
// unfused, or any legal) plan exactly as the AOT generator would build it, for tests and
// exploration without a build step. Do not use in a process that also loads PoCL.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/planner/plan.h"
#include "schedules/group_schedule.h"

namespace opfuse::schedules {

// A plan compiled once and run many times (exploration times it). Inputs and params are
// copied into buffers the pipeline owns; outputs are written into buffers it owns too.
// Intermediates come from a pool that reuses freed blocks (no page faults after the first
// run), emptied when the CompiledPlan is destroyed.
class CompiledPlan {
 public:
  // Params come from graph::param_values unless given. Throws graph::GraphError for graphs
  // the JIT path does not take (f16 tensors), std::runtime_error (with Halide's message) when
  // Halide refuses the schedule.
  // `timed`: every Func stored at the root is traced at its production (begin and end, no
  // per-element events); each run records how long each one's production took (root_seconds).
  CompiledPlan(const graph::Graph& g, const fusion::FusionPlan& plan,
               const graph::TensorMap& inputs, const graph::TensorMap& params = {},
               bool timed = false);
  ~CompiledPlan();
  CompiledPlan(const CompiledPlan&) = delete;
  CompiledPlan& operator=(const CompiledPlan&) = delete;

  void run();                        // std::runtime_error when the pipeline fails
  // New values for some graph inputs (same shapes), copied into the pipeline's buffers: the
  // next run() reads them. GraphError for an unknown input or another shape.
  void set_inputs(const graph::TensorMap& inputs);
  graph::TensorMap outputs() const;  // the graph outputs of the last run, by name
  // The most bytes the pipeline's heap allocations (intermediates Halide stores) held at once
  // during the last run; stack allocations of small tiles are not counted.
  size_t peak_heap_bytes() const;
  // Seconds each root Func's production took in the last run, by Func name (empty unless
  // compiled `timed`). Its sum is the run's time less the output copies and allocations.
  const std::map<std::string, double>& root_seconds() const;
  // The records the pipeline was scheduled with.
  const schedules::PipelineSchedule& schedule() const;

 private:
  void compile(const graph::Graph& g, const fusion::FusionPlan& plan,
               const graph::TensorMap& inputs, const graph::TensorMap& params, bool timed);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One group's share of a timed run: the productions of the group's root Funcs (its nodes'
// Funcs and helpers, by name), beside the cost model's prediction.
struct GroupTime {
  int group = -1;  // -1: time no group's Func took (waiting for tasks, output copies)
  double measured_s = 0;
  double predicted_s = 0;
};
// Per group, from one timed run's seconds by Func (CompiledPlan::root_seconds); the last entry
// (group -1) holds the Funcs of no group (output copies).
std::vector<GroupTime> times_by_group(const graph::Graph& g, const fusion::FusionPlan& plan,
                                      const std::map<std::string, double>& func_seconds);

// Compiles and runs once; returns the graph outputs, by name.
graph::TensorMap realize_with_plan(const graph::Graph& g, const fusion::FusionPlan& plan,
                                   const graph::TensorMap& inputs,
                                   const graph::TensorMap& params = {});

}  // namespace opfuse::schedules
