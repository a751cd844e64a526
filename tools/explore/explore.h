// Schedule exploration: measured search around the planner's choice.
//
//   candidates   the planner's plan, the unfused plan, and rounds of neighbours (beam search
//                by predicted time): split or unfuse a group, merge a producer/consumer or
//                sibling pair, scale tile fractions, halve or double the vector width. Each
//                is checked like a user plan (legal, convex, acyclic) before it is kept.
//   measurement  JIT-compiled through the schedule emitter, checked once against the
//                reference executor, then timed: warm-up, repetitions, p50, p99, jitter =
//                p99 / p50, peak heap bytes of the intermediates.
//   rounds       7.4.3 adaptive threshold: a candidate of round t >= 2 is measured only when
//                its predicted benefit over the planner's plan, corrected by theta, passes
//                the gate: R_model + theta >= gate, with
//                theta_{t+1} = theta_t + eta (R_observed - R_predicted) over round t's
//                measurements (R_predicted = R_model + theta_t). Round 1 probes every
//                neighbour. Shards and MPI ranks take a fixed list (no gate).
//   outputs      results.jsonl (one line per measured candidate: the run resumes from it),
//                candidates.csv/.json, pareto.json (7.4.2 front over latency and peak
//                memory), best_plan.json (a plan the generator accepts), summary.md.
//
// The candidate list depends only on the graph, the profile and the options, so a run that
// was interrupted regenerates it and measures only what results.jsonl lacks.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/graph.h"
#include "fusion/hardware/profile.h"
#include "fusion/planner/planner.h"

namespace opfuse::explore {

struct Candidate {
  std::string id;      // stable: a hash of the partition and its knobs
  std::string origin;  // how it was made: "planner", "unfused", "split g2 after conv1", ...
  int round = 0;
  std::vector<fusion::UserGroup> groups;
};

// The partition and knobs of a plan, as user groups (what a plan JSON carries).
std::vector<fusion::UserGroup> groups_of(const fusion::FusionPlan& p);
std::string candidate_id(const std::vector<fusion::UserGroup>& groups);
// A stable 64-bit hash (FNV-1a) of `text`: ids and splits that never change between runs.
uint64_t stable_hash(const std::string& text);

// The legal neighbours of `base` (see the header comment), each tagged with `round`.
std::vector<Candidate> neighbours(const graph::Graph& g, const fusion::CostModel& model,
                                  const Candidate& base, int natural_lanes, int round);

struct Measurement {
  bool ok = false;    // compiled, ran and matched the reference
  std::string error;  // why not
  int reps = 0;
  double p50_s = 0, p99_s = 0, mean_s = 0;
  double jitter = 0;  // p99 / p50
  double peak_heap_bytes = 0;
  double compile_s = 0;
};

struct Result {
  Candidate candidate;
  int kernels = 0;
  double predicted_s = 0;          // the plan's sum over groups (7.1.3 objective)
  double predicted_memory_s = 0;   // the part in memory-bound groups (uncorrected)
  double predicted_compute_s = 0;  // the part in compute-bound groups (uncorrected)
  double predicted_bytes = 0;      // boundary bytes
  double predicted_unfused_s = 0;  // the same graph unfused, for R_model
  Measurement m;
};

std::string result_to_json_line(const Result& r);
Result result_from_json(const std::string& line);

struct Options {
  std::string graph_path;  // recorded in meta.json (for `explore learn`)
  std::string profile = "host";
  int budget = 50;           // candidates measured at most
  double time_budget_s = 0;  // wall time at most (0: none)
  int rounds = 3;
  int beam = 3;                       // candidates of a round whose neighbours form the next
  bool gate = true;                   // 7.4.3 threshold gate (off for shards and MPI ranks)
  double gate_min = 0.8;              // R_model + theta must reach this
  double eta = 0.5;                   // threshold learning rate
  double min_time_s = 0.1;            // timing per candidate: at least this long ...
  int min_reps = 10, max_reps = 200;  // ... and this many repetitions, at most max_reps
  int shard = 0, shards = 1;          // this process measures candidates i with i % shards == shard
  bool progress = true;               // progress bar and ETA on stderr
  uint64_t seed = 1;                  // inputs
  int confirm = 3;         // re-measurements of the planner's plan and the best, after the search
  double p99_bound_s = 0;  // 7.7 T_max for the chosen plan (0: none)
  double jitter_bound = 1.2;  // 7.7 jitter_fused < jitter_bound * jitter_unfused
};

struct ThresholdStep {
  int round = 0;
  double theta = 0, r_observed = 0, r_predicted = 0;
  int measured = 0, gated = 0;
};

struct Exploration {
  std::string graph;
  std::vector<Result> results;  // in candidate order
  std::vector<ThresholdStep> threshold;
  std::vector<std::string> log;
  // The planner's plan and the fastest candidate measured again, alternately, after the
  // search (o.confirm times each; medians of their p50s): a speed-up reported from one noisy
  // sample of each would flatter the search. 0 when not done (shards, or the planner won).
  double confirm_planner_s = 0, confirm_best_s = 0;
  std::string confirm_best_origin;
};

// The fixed candidate list (the planner's plan, unfused, then `rounds` of beam neighbours by
// predicted time), at most `limit` long.
std::vector<Candidate> candidate_list(const graph::Graph& g, const fusion::CostModel& model,
                                      const Options& o, size_t limit);

// Predicts a candidate's plan: its time, split by bound, bytes and kernels.
Result predict(const graph::Graph& g, const fusion::CostModel& model, const Candidate& c);

// Runs the exploration into `out_dir` (created; resumed from its results.jsonl), measuring
// each candidate with `measure_fn` (tools/explore/measure.h: the JIT; tests pass their own).
using MeasureFn = std::function<Measurement(const Candidate&)>;
Exploration explore(const graph::Graph& g, const Options& o, const std::string& out_dir,
                    const MeasureFn& measure_fn);

// Reads results.jsonl files (shards, ranks) and merges them: one result per candidate id, in
// the order of the first file that has it.
std::vector<Result> merge_results(const std::vector<std::string>& results_files);

// --- analysis ----------------------------------------------------------------------------
// The q-quantile (0 < q <= 1) of samples: the smallest sample with at least q of them at or
// below it (p99 of fewer than 100 samples is their maximum).
double percentile(std::vector<double> samples, double q);
// 7.4.2 Pareto front over (latency, peak memory), both minimised: indices of the points no
// other point is at least as good on both and better on one. Ties on both keep the first.
std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& points);
double spearman(const std::vector<double>& a, const std::vector<double>& b);
double median_abs_pct_error(const std::vector<double>& predicted,
                            const std::vector<double>& measured);

// 7.4.1 calibration: least-squares fit of a_cache (memory-bound groups) and a_conflict
// (compute-bound groups) to T_measured = M (1 + a_cache) + C (1 + a_conflict), relative
// errors weighted equally; a_divergence applies to GPUs and is left as it is.
struct Correction {
  double alpha_cache = 0, alpha_conflict = 0;
  int samples = 0;
};
Correction fit_correction(const std::vector<Result>& results);
// The calibrated prediction of a result (the same split, corrected).
double corrected_prediction(const Result& r, const Correction& c);
// `p` with the fitted factors, named "<name>-calibrated".
fusion::HardwareProfile calibrated_profile(fusion::HardwareProfile p, const Correction& c);

// The cost model's error over the measured candidates, before and after a correction.
struct ModelError {
  int samples = 0;
  double mdape_before = 0, mdape_after = 0;        // median |predicted - p50| / p50
  double spearman_before = 0, spearman_after = 0;  // rank correlation with p50
};
ModelError model_error(const std::vector<Result>& results, const Correction& c);

// The measured distributions of the planner's and the unfused plan (for the planner's 7.7
// tail bounds), when both were measured.
std::optional<fusion::TailMeasurement> tail_of(const std::vector<Result>& results);

// The plan to ship: the fastest measured candidate that keeps the 7.7 tail bounds (T99 <
// o.p99_bound_s when set, jitter < o.jitter_bound x the unfused plan's); the unfused plan when
// none does. `why` says which bound decided.
const Result* choose_best(const std::vector<Result>& results, const Options& o, std::string& why);

// Writes candidates.csv/.json, pareto.json, best_plan.json, threshold.csv and summary.md.
void write_outputs(const graph::Graph& g, const Options& o, const Exploration& e,
                   const std::string& out_dir);

}  // namespace opfuse::explore
