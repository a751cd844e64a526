// Schedule exploration: candidates, resume, shards, Pareto front, calibration, tail bounds,
// the 7.4.3 threshold, and one real JIT exploration.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "fusion/graph/zoo.h"
#include "fusion/hardware/profile.h"
#include "schedules/group_schedule.h"
#include "fusion/planner/planner.h"
#include "tools/explore/explore.h"
#include "tools/explore/measure.h"

using namespace opfuse;
using namespace opfuse::explore;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("opfuse_test_explore_" + name);
  fs::remove_all(d);
  return d.string();
}

// A deterministic "measurement": time from the candidate's id, so runs can be compared.
Measurement fake(const Candidate& c) {
  Measurement m;
  m.ok = true;
  m.reps = 10;
  m.p50_s = 1e-3 * (1 + double(std::stoull(c.id.substr(0, 6), nullptr, 16) % 1000) / 1000);
  m.p99_s = m.p50_s * 1.1;
  m.mean_s = m.p50_s;
  m.jitter = 1.1;
  m.peak_heap_bytes = double(c.groups.size()) * 1024;
  return m;
}

std::vector<std::string> ids(const std::vector<Result>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.candidate.id);
  return out;
}

Options quick_options() {
  Options o;
  o.budget = 24;
  o.progress = false;
  o.confirm = 0;  // the tests count measurements
  o.profile = "epyc-avx512-2c";  // the tests' cost models plan for it: the same on every host
  return o;
}

}  // namespace

TEST_CASE("Pareto front (7.4.2) of a hand-made set") {
  // (latency, memory): 0 and 3 and 4 are on the front; 1 is dominated by 0, 2 by 3, 5 equals
  // 4 (the first stays).
  const std::vector<std::pair<double, double>> pts = {{1, 10}, {2, 10}, {3, 6}, {2.5, 5},
                                                      {4, 1},  {4, 1},  {5, 5}};
  CHECK(pareto_front(pts) == std::vector<size_t>{0, 3, 4});
  CHECK(pareto_front({}).empty());
  CHECK(pareto_front({{1, 1}}) == std::vector<size_t>{0});
}

TEST_CASE("statistics: percentile, Spearman, median error") {
  std::vector<double> s;
  for (int i = 1; i <= 100; ++i) s.push_back(i);
  CHECK(percentile(s, 0.5) == 50);
  CHECK(percentile(s, 0.99) == 99);
  CHECK(percentile({3, 1, 2}, 0.99) == 3);
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == doctest::Approx(-1));
  CHECK(spearman({1, 2, 3, 4}, {1, 3, 2, 4}) == doctest::Approx(0.8));
  CHECK(median_abs_pct_error({1.1, 2, 2.7}, {1, 2, 3}) == doctest::Approx(0.1));
}

TEST_CASE("calibration (7.4.1) recovers known correction factors") {
  std::vector<Result> rs;
  for (int i = 0; i < 20; ++i) {
    Result r;
    r.m.ok = true;
    r.predicted_memory_s = 1e-4 * (1 + i % 5);
    r.predicted_compute_s = 2e-4 * (1 + (i * 7) % 3);
    r.m.p50_s = r.predicted_memory_s * 1.3 + r.predicted_compute_s * 3.0;  // a 0.3, 2.0
    rs.push_back(r);
  }
  const Correction c = fit_correction(rs);
  CHECK(c.samples == 20);
  CHECK(c.alpha_cache == doctest::Approx(0.3).epsilon(1e-6));
  CHECK(c.alpha_conflict == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(corrected_prediction(rs[3], c) == doctest::Approx(rs[3].m.p50_s));
}

TEST_CASE("neighbours are legal, distinct, and cover splits, merges, tiles, widths, blocks and placements") {
  const graph::Graph g = graph::zoo_model("perception", graph::ZooSize::cpu);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const Options o = quick_options();
  const std::vector<Candidate> list = candidate_list(g, model, o, 200);
  REQUIRE(list.size() > 10);
  CHECK(list[0].origin == "planner");
  CHECK(list[1].origin == "unfused");
  std::set<std::string> seen;
  bool split = false, merge = false, tiles = false, vec = false, block = false, place = false;
  const schedules::TargetFacts facts = schedules::facts_of(model.profile());
  for (const auto& c : list) {
    CHECK(seen.insert(c.id).second);
    CHECK(c.id == candidate_id(c.groups));
    CHECK_NOTHROW(fusion::plan_from_user_groups(g, model, c.groups));
    // Its records exist, and carry what the move asked for.
    const schedules::PipelineSchedule s =
        schedules::schedule_plan(g, fusion::plan_from_user_groups(g, model, c.groups), facts);
    for (size_t i = 0; i < c.groups.size(); ++i) {
      for (const auto& [node, b] : c.groups[i].blocks) {
        const schedules::NodeSchedule* n = s.groups[i].find(node);
        REQUIRE(n != nullptr);
        REQUIRE(n->block.has_value());
        CHECK(n->block->rows == b.rows);
        CHECK(n->block->vectors == b.vectors);
      }
      for (const auto& [node, p] : c.groups[i].placements) {
        const schedules::NodeSchedule* n = s.groups[i].find(node);
        REQUIRE(n != nullptr);
        if (p == "inline") CHECK(n->placement == schedules::Placement::inlined);
      }
    }
    block = block || c.origin.find("block") != std::string::npos;
    place = place || c.origin.find("place") != std::string::npos;
    split = split || c.origin.find("split") != std::string::npos;
    merge = merge || c.origin.find("merge") != std::string::npos;
    tiles = tiles || c.origin.find("tiles") != std::string::npos;
    vec = vec || c.origin.find("vector") != std::string::npos;
  }
  CHECK(split);
  CHECK(merge);
  CHECK(tiles);
  CHECK(vec);
  CHECK(block);
  CHECK(place);
}

TEST_CASE("an interrupted exploration resumes from its results file") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  Options o = quick_options();
  o.gate = false;
  const std::string whole = fresh_dir("whole"), cut = fresh_dir("cut");
  const Exploration ref = explore::explore(g, o, whole, fake);

  int calls = 0;
  auto dies = [&](const Candidate& c) {
    if (++calls > 7) throw std::runtime_error("interrupted");
    return fake(c);
  };
  CHECK_THROWS_AS(explore::explore(g, o, cut, dies), std::runtime_error);
  // The interruption also cut the line being written.
  std::ofstream(cut + "/results.jsonl", std::ios::app) << "{\"id\": \"7a61";
  int again = 0;
  auto counting = [&](const Candidate& c) {
    ++again;
    return fake(c);
  };
  const Exploration resumed = explore::explore(g, o, cut, counting);
  CHECK(again == int(ref.results.size()) - 7);
  CHECK(ids(resumed.results) == ids(ref.results));
  for (size_t i = 0; i < ref.results.size(); ++i) {
    CHECK(resumed.results[i].m.p50_s == ref.results[i].m.p50_s);
  }
}

TEST_CASE("two shards merge to the single run") {
  const graph::Graph g = graph::zoo_model("cbr_pool", graph::ZooSize::cpu);
  Options o = quick_options();
  o.gate = false;
  const Exploration single = explore::explore(g, o, fresh_dir("single"), fake);
  std::vector<std::string> files;
  size_t measured = 0;
  for (int s = 0; s < 2; ++s) {
    Options os = o;
    os.shard = s;
    os.shards = 2;
    const std::string d = fresh_dir("shard" + std::to_string(s));
    measured += explore::explore(g, os, d, fake).results.size();
    files.push_back(d + "/results.jsonl");
  }
  CHECK(measured == single.results.size());
  std::vector<std::string> merged = ids(merge_results(files)), want = ids(single.results);
  std::sort(merged.begin(), merged.end());
  std::sort(want.begin(), want.end());
  CHECK(merged == want);
  Options bad = o;
  bad.shard = 2;
  bad.shards = 2;
  CHECK_THROWS_AS(explore::explore(g, bad, fresh_dir("bad"), fake), std::invalid_argument);
}

TEST_CASE("7.4.3 threshold: theta follows the observed benefit across rounds") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  Options o = quick_options();
  o.budget = 40;
  o.eta = 0.5;
  // Every candidate measures as fast as the planner's plan: R_observed = 1 each round, while
  // the model predicts the neighbours slower (R_model < 1): theta rises to admit them.
  auto flat = [](const Candidate& c) {
    Measurement m = fake(c);
    m.p50_s = 1e-3;
    return m;
  };
  const Exploration e = explore::explore(g, o, fresh_dir("theta"), flat);
  REQUIRE(e.threshold.size() >= 3);
  double theta = 0;
  for (const auto& s : e.threshold) {
    CHECK(s.theta == doctest::Approx(theta));
    if (s.round >= 1 && s.measured > 0) {
      CHECK(s.r_observed == doctest::Approx(1));
      CHECK(s.r_predicted <= 1 + theta + 1e-9);
      theta += o.eta * (s.r_observed - s.r_predicted);
    }
  }
  CHECK(e.threshold[2].theta > 0);
}

TEST_CASE("7.7 tail bounds: a broken p99 or jitter bound rolls back to the unfused plan") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const size_t fused_kernels = size_t(fusion::plan_fusion(g, model).kernels_fused());
  const size_t unfused_kernels = g.nodes().size();
  REQUIRE(fused_kernels < unfused_kernels);
  auto log_has = [](const fusion::FusionPlan& p, const std::string& s) {
    for (const auto& l : p.log) {
      if (l.find(s) != std::string::npos) return true;
    }
    return false;
  };
  fusion::PlannerOptions o;
  o.p99_bound_s = 1e-3;
  o.measured_tail = fusion::TailMeasurement{0.5e-3, 0.6e-3, 0.7e-3, 0.8e-3};  // both hold
  fusion::FusionPlan p = fusion::plan_fusion(g, model, o);
  CHECK(size_t(p.kernels_fused()) == fused_kernels);
  CHECK(log_has(p, "both bounds hold"));

  o.measured_tail = fusion::TailMeasurement{0.5e-3, 1.5e-3, 0.7e-3, 0.8e-3};  // p99 >= T_max
  p = fusion::plan_fusion(g, model, o);
  CHECK(size_t(p.kernels_fused()) == unfused_kernels);
  CHECK(log_has(p, "the p99 bound is broken"));

  // jitter 1.8 >= 1.2 x 1.14
  o.measured_tail = fusion::TailMeasurement{0.5e-3, 0.9e-3, 0.7e-3, 0.8e-3};
  p = fusion::plan_fusion(g, model, o);
  CHECK(size_t(p.kernels_fused()) == unfused_kernels);
  CHECK(log_has(p, "the jitter bound is broken"));

  o.measured_tail.reset();  // predicted T99 only: far below 1 ms
  p = fusion::plan_fusion(g, model, o);
  CHECK(size_t(p.kernels_fused()) == fused_kernels);
  CHECK(log_has(p, "jitter bound is not checked"));

  // The exploration's choice keeps the bounds too, or falls back to the unfused plan.
  std::vector<Result> rs(3);
  rs[0].candidate.origin = "planner";
  rs[1].candidate.origin = "unfused";
  rs[2].candidate.origin = "split";
  const double p50[] = {1e-3, 2e-3, 0.9e-3}, p99[] = {3e-3, 2.2e-3, 1.2e-3};
  for (int i = 0; i < 3; ++i) {
    rs[size_t(i)].m.ok = true;
    rs[size_t(i)].m.p50_s = p50[i];
    rs[size_t(i)].m.p99_s = p99[i];
    rs[size_t(i)].m.jitter = p99[i] / p50[i];
  }
  Options eo;
  std::string why;
  CHECK(choose_best(rs, eo, why)->candidate.origin == "split");
  eo.p99_bound_s = 2.5e-3;  // the planner's 3 ms p99 breaks it; the split's jitter 1.33 > 1.32
  CHECK(choose_best(rs, eo, why)->candidate.origin == "unfused");
  CHECK(why.find("rolled back") != std::string::npos);
  const auto tail = tail_of(rs);
  REQUIRE(tail);
  CHECK(tail->fused_p99_s == 3e-3);
  CHECK(tail->unfused_p50_s == 2e-3);
}

TEST_CASE("a real exploration through the JIT: checked, timed, and a plan the generator reads") {
  const graph::Graph g = graph::zoo_model("ew_chain_4", graph::ZooSize::cpu);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  Options o = quick_options();
  o.budget = 6;
  o.min_time_s = 0.01;
  o.min_reps = 3;
  const std::string d = fresh_dir("jit");
  const Exploration e = explore::explore(g, o, d, jit_measure(g, model, o));
  REQUIRE(e.results.size() == 6);
  for (const auto& r : e.results) {
    CAPTURE(r.candidate.origin);
    CHECK_MESSAGE(r.m.ok, r.m.error);
    CHECK(r.m.reps >= 3);
    CHECK(r.m.p50_s > 0);
    CHECK(r.m.p99_s >= r.m.p50_s);
  }
  // The unfused plan stores its three intermediates; the fused one none.
  CHECK(e.results[0].candidate.origin == "planner");
  CHECK(e.results[1].candidate.origin == "unfused");
  CHECK(e.results[0].m.peak_heap_bytes < e.results[1].m.peak_heap_bytes);
  write_outputs(g, o, e, d);
  for (const char* f : {"candidates.csv", "candidates.json", "pareto.json", "best_plan.json",
                        "calibration.json", "profile_calibrated.json", "summary.md"}) {
    CHECK_MESSAGE(fs::exists(d + "/" + f), f);
  }
  std::ifstream in(d + "/best_plan.json");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK_NOTHROW(fusion::plan_from_user_groups(
      g, model, fusion::user_groups_from_plan_json(text, "best_plan.json")));
  // The calibrated profile loads and carries the fitted factors.
  const fusion::HardwareProfile cal = fusion::load_profile(d + "/profile_calibrated.json");
  CHECK(cal.name == "epyc-avx512-2c-calibrated");
}

TEST_CASE("the winner is confirmed against the planner's plan, measured alternately") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  Options o = quick_options();
  o.gate = false;
  o.confirm = 3;
  std::vector<std::string> order;
  auto recording = [&](const Candidate& c) {
    order.push_back(c.origin);
    return fake(c);
  };
  const Exploration e = explore::explore(g, o, fresh_dir("confirm"), recording);
  REQUIRE(e.confirm_best_s > 0);
  CHECK(e.confirm_best_origin != "planner");
  // The last six measurements alternate: planner, best, planner, best, ...
  REQUIRE(order.size() == e.results.size() + 6);
  for (size_t i = e.results.size(); i < order.size(); ++i) {
    CHECK(order[i] == ((i - e.results.size()) % 2 == 0 ? "planner" : e.confirm_best_origin));
  }
  CHECK(e.confirm_planner_s == e.results[0].m.p50_s);  // fake timings repeat exactly
}
