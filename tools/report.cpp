#include "tools/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/vendor.h"
#include "bench/zoo_model.h"
#include "fusion/hardware/calibrate.h"
#include "fusion/hardware/host.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "runtime/pool_allocator.h"
#include "schedules/group_schedule.h"

namespace opfuse::tools {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr reference::Tolerance kTolerance = reference::kGraphTolerance;

struct Timing {
  double median_s = 0, p99_s = 0;
};

Timing time_call(const std::function<void()>& call, double budget_s) {
  for (int i = 0; i < 2; ++i) call();  // warm-up: pool, caches, thread pool
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (
      t.size() < 5 ||
      (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget_s &&
       t.size() < 2000)) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[std::min(t.size() - 1, size_t(double(t.size()) * 0.99))]};
}

// unfused first: the others are reported as speed-ups over it.
const std::vector<std::string> kStrategies = {"unfused", "fused", "Mullapudi2016", "Adams2019",
                                              "Li2018"};

const json* find_result(const json& results, const std::string& model,
                        const std::string& strategy) {
  for (const auto& r : results) {
    if (r["model"] == model && r["strategy"] == strategy) return &r;
  }
  return nullptr;
}

std::string fmt(double v, int precision = 3) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*g", precision, v);
  return b;
}

// The goals of the benchmark (issue: benchmarks and the main job), each with its measured
// ratio and MET or MISSED. PyTorch's goals where bench/torch_zoo.py ran.
std::vector<std::string> performance_goals(const json& results, double peak_flops) {
  std::vector<std::string> out;
  auto verdict = [](bool met) { return met ? std::string("MET") : std::string("MISSED"); };
  if (const json* f = find_result(results, "ew_chain_8", "fused")) {
    // Bytes in + out over the time, against the bandwidth of the level holding them.
    const double frac = (*f)["gbps"].get<double>() * 1e9 / (*f)["roof_bandwidth_Bps"].get<double>();
    out.push_back("fused ew_chain_8 at >= 85% of the copy bandwidth: " + fmt(100 * frac) + "% " +
                  verdict(frac >= 0.85));
  }
  for (int n : {2, 4, 8}) {
    const std::string m = "ew_chain_" + std::to_string(n);
    const json* f = find_result(results, m, "fused");
    if (!f || !f->contains("speedup_vs_unfused")) continue;
    const double sp = (*f)["speedup_vs_unfused"].get<double>();
    out.push_back("fused/unfused for " + m + " >= 0.8 N = " + fmt(0.8 * n) + ": x" + fmt(sp) + " " +
                  verdict(sp >= 0.8 * n));
  }
  std::vector<std::string> models;
  for (const auto& r : results) {
    const std::string m = r["model"];
    if (std::find(models.begin(), models.end(), m) == models.end()) models.push_back(m);
  }
  for (const auto& m : models) {
    const json* f = find_result(results, m, "fused");
    if (!f) continue;
    double best = 0;
    std::string who;
    for (const char* a : {"Mullapudi2016", "Adams2019", "Li2018"}) {
      const json* r = find_result(results, m, a);
      if (r && (best == 0 || (*r)["median_s"].get<double>() < best)) {
        best = (*r)["median_s"].get<double>();
        who = a;
      }
    }
    if (best > 0) {
      const double ratio = best / (*f)["median_s"].get<double>();
      out.push_back(m + ": fused vs the best autoscheduler (" + who + "): x" + fmt(ratio) + " " +
                    verdict(ratio >= 1.0) + (ratio >= 1.25 ? " (target 1.25 met)" : ""));
    }
    if (const json* v = find_result(results, m, "oneDNN")) {
      if (v->value("reference_code", false)) {
        out.push_back(m + ": fused vs oneDNN conv+post-op+pool: not measured (oneDNN ran its "
                      "reference code, which is no baseline: " +
                      v->value("implementation", std::string("?")) + ")");
      } else {
        const double ratio = (*v)["median_s"].get<double>() / (*f)["median_s"].get<double>();
        out.push_back(m + ": fused vs oneDNN conv+post-op+pool: x" + fmt(ratio) + " " +
                      verdict(ratio >= 1.0));
      }
    }
  }
  bool torch_measured = false;
  for (const auto& m : models) {
    const json* f = find_result(results, m, "fused");
    if (!f) continue;
    // Memory-bound: the roofline's byte time exceeds its FLOP time at the measured peak.
    const double bytes_s = (*f)["bytes"].get<double>() / (*f)["roof_bandwidth_Bps"].get<double>();
    const bool memory_bound = bytes_s > (*f)["flops"].get<double>() / peak_flops;
    for (const char* peer : {"pytorch_eager", "torch_compile"}) {
      const json* r = find_result(results, m, peer);
      if (!r) continue;
      torch_measured = true;
      const double ratio = (*r)["median_s"].get<double>() / (*f)["median_s"].get<double>();
      const bool goal = std::string(peer) == "pytorch_eager" || memory_bound;
      out.push_back(m + ": fused vs " + peer + ": x" + fmt(ratio) + " " +
                    (goal ? verdict(ratio >= 1.0)
                          : std::string("(compute-bound: the goal is for memory-bound models)")));
    }
  }
  if (!torch_measured) {
    out.push_back(
        "fused vs PyTorch eager / torch.compile: not measured (PyTorch is not installed: "
        "OPFUSE_WITH_TORCH=1 tools/setup.sh adds it to the venv)");
  }
  return out;
}

// PyTorch eager and torch.compile on the zoo at CPU size (bench/torch_zoo.py), where
// `python` imports torch; their rows, in the results' format, or none.
json pytorch_rows(const ReportOptions& o, double seconds) {
  if (o.python.empty() || std::system(("'" + o.python + "' -c 'import torch' 2>/dev/null").c_str()))
    return json::array();
  const std::string out = (fs::path(o.out_dir) / "torch_cpu.json").string();
  std::printf("\nPyTorch eager and torch.compile (bench/torch_zoo.py) ...\n");
  std::fflush(stdout);
  const std::string cmd = "'" + o.python + "' '" + std::string(OPFUSE_SOURCE_DIR) +
                          "/bench/torch_zoo.py' --models '" + o.models_dir + "/cpu' --device cpu" +
                          " --seconds " + fmt(seconds) + " --out '" + out + "'" +
                          (o.only.empty() ? "" : " --model '" + o.only + "'");
  if (std::system(cmd.c_str()) != 0) {
    std::printf("(bench/torch_zoo.py failed: no PyTorch rows)\n");
    return json::array();
  }
  std::ifstream in(out);
  return json::parse(in)["results"];
}

// The whole networks: per model, `opfuse plan --no-fusion` for the unfused plan, then one
// opfuse-run with the planner's plan, checked against the reference, and the unfused one
// compiled beside it (--compare-plan): the two alternated in fives, `network_reps` runs each,
// so that their ratio holds on a machine whose speed drifts within minutes (the JIT compiles
// each network in 15-35 s). Rows: model, kernels and median time per plan, unfused/fused, the
// check; bench/networks/run.sh times the AOT libraries against ONNX Runtime and OpenVINO.
json network_rows(const ReportOptions& o, bool& all_ok) {
  json rows = json::array();
  if (o.networks.empty() || !o.only.empty()) return rows;  // --model: that zoo model only
  const fs::path dir = fs::path(o.out_dir) / "networks";
  fs::create_directories(dir);
  std::printf(
      "\nwhole networks (opfuse run: the JIT, fused and unfused alternated, %d runs each; fused "
      "checked against the reference executor) ...\n%-28s %13s %10s %13s %10s %9s  %s\n",
      o.network_reps, "network", "fused kernels", "fused ms", "unfused kern.", "unfused ms",
      "unf/fused", "check");
  // `cmd`'s output in LOG; its exit status.
  auto run = [](const std::string& cmd, const fs::path& log) {
    return std::system((cmd + " > '" + log.string() + "' 2>&1").c_str());
  };
  // From opfuse-run's log: "plan: K kernels for N ops", "compare plan: K kernels ...",
  // "time: median T ms", "time, --compare-plan: median T ms", "reference: match".
  auto parse = [](const fs::path& log, int& kf, double& tf, int& ku, double& tu, bool& match) {
    std::ifstream in(log);
    std::string l;
    kf = ku = 0, tf = tu = 0, match = true;
    while (std::getline(in, l)) {
      std::sscanf(l.c_str(), "plan: %d kernels", &kf);
      std::sscanf(l.c_str(), "compare plan: %d kernels", &ku);
      std::sscanf(l.c_str(), "time: median %lf ms", &tf);
      std::sscanf(l.c_str(), "time, --compare-plan: median %lf ms", &tu);
      const auto r = l.find("reference: ");
      if (r != std::string::npos && l.compare(r + 11, 5, "match") != 0) match = false;
    }
  };
  const std::string self = (fs::path(o.run_tool).parent_path() / "opfuse").string();
  for (const std::string& m : o.networks) {
    const std::string name = fs::path(m).stem().string();
    const fs::path unf_plan = dir / (name + ".unfused.plan.json");
    const std::string reps = " --reps " + std::to_string(o.network_reps);
    int kf = 0, ku = 0;
    double tf = 0, tu = 0;
    bool match = false;
    // A previous demo's files in the same folder must not stand in for this run's.
    for (const char* f : {".plan.log", ".run.log", ".unfused.plan.json"})
      fs::remove(dir / (name + f));
    const int plan_rc =
        run("'" + self + "' plan '" + m + "' --no-fusion --json '" + unf_plan.string() + "'",
            dir / (name + ".plan.log"));
    const int run_rc = plan_rc ? plan_rc
                               : run("'" + o.run_tool + "' '" + m + "' --check --compare-plan '" +
                                         unf_plan.string() + "'" + reps,
                                     dir / (name + ".run.log"));
    parse(dir / (name + ".run.log"), kf, tf, ku, tu, match);
    const bool ok = run_rc == 0 && match && tf > 0 && tu > 0;
    all_ok = all_ok && ok;
    const std::string check = ok ? "match" : "FAILED (see " + (dir / name).string() + ".*.log)";
    std::printf("%-28s %13d %10.3f %13d %10.3f %9s  %s\n", name.c_str(), kf, tf, ku, tu,
                tf > 0 && tu > 0 ? ("x" + fmt(tu / tf)).c_str() : "-", check.c_str());
    std::fflush(stdout);
    rows.push_back({{"model", name},
                    {"path", m},
                    {"fused_kernels", kf},
                    {"fused_s", tf * 1e-3},
                    {"unfused_kernels", ku},
                    {"unfused_s", tu * 1e-3},
                    {"unfused_over_fused", tf > 0 ? tu / tf : 0.0},
                    {"check_passed", ok}});
  }
  return rows;
}

}  // namespace

int run_report(const ReportOptions& o) {
  runtime::use_pooled_allocator();
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  const fusion::Isa isa = o.target == "host"         ? fusion::host_isa()
                          : o.target == "x86-avx2"   ? fusion::isa_named("avx2")
                          : o.target == "x86-avx512" ? fusion::isa_named("avx512")
                                                     : fusion::Isa{};
  if (isa.name.empty() || !fusion::host_runs(isa)) {
    std::fprintf(stderr, "opfuse demo: target '%s' %s\n", o.target.c_str(),
                 isa.name.empty() ? "is not one of host, x86-avx2, x86-avx512"
                                  : "needs an ISA this CPU does not run");
    return 1;
  }
  if (o.target != "host") {
    // oneDNN's kernels limited to the same ISA (read at its first primitive); a user's own
    // setting stands. OpenBLAS picks its core when loaded: its row names the core it ran.
    setenv("ONEDNN_MAX_CPU_ISA", isa.name == "avx2" ? "AVX2" : "AVX512_CORE", 0);
  }
  std::printf("opfuse: fused vs unfused vs Halide's autoschedulers on the model zoo (%s, %s)\n",
              o.target.c_str(), isa.name.c_str());
  std::printf("measuring this machine's roofline ...\n");
  const double peak = fusion::measure_fma_peak_flops(threads, 0.3, isa);
  const double bw = fusion::measure_bandwidth_Bps(size_t(256) << 20, threads, 0.3);
  // The zoo's CPU-size models mostly fit the last-level cache: their roofline uses the
  // bandwidth of the level that holds their traffic, measured here too (half the LLC).
  const fusion::HardwareProfile profile = fusion::host_profile(isa);
  const double llc_bytes = profile.level("LLC") ? profile.level("LLC")->size_bytes : 0;
  const double bw_llc =
      llc_bytes > 0 ? fusion::measure_bandwidth_Bps(size_t(llc_bytes / 2), threads, 0.3) : bw;
  std::printf(
      "  FMA peak %.0f GFLOP/s, LLC bandwidth %.1f GB/s, DRAM bandwidth %.1f GB/s (%d cores)\n\n",
      peak / 1e9, bw_llc / 1e9, bw / 1e9, threads);

  fs::create_directories(fs::path(o.out_dir) / "plans");
  std::vector<std::string> models;
  for (const runtime::Kernel* k : runtime::Registry::global().all()) {
    if (k->target() == o.target &&
        std::find(models.begin(), models.end(), k->model()) == models.end() &&
        (o.only.empty() || o.only == k->model())) {
      models.push_back(k->model());
    }
  }
  if (models.empty()) {
    std::fprintf(stderr, "opfuse: no zoo kernel named '%s' is built in\n", o.only.c_str());
    return 1;
  }

  json results = json::array();
  bool all_ok = true;
  std::string table;
  char line[512];
  std::snprintf(line, sizeof line, "%-12s %-14s %10s %8s %8s %9s %8s %11s  %s\n", "model",
                "strategy", "time us", "vs unf.", "GB/s", "GFLOP/s", "%roof", "predicted", "check");
  table += line;
  std::printf("%s", line);
  for (const std::string& model : models) {
    bench::ZooCase c(o.models_dir, model, profile);
    // The plan, with its reasons, beside the results.
    const fusion::RooflineCostModel cost(profile);
    const fusion::FusionPlan plan = fusion::plan_fusion(c.graph, cost);
    // The records the generator emitted for this profile's target.
    const schedules::PipelineSchedule records =
        schedules::schedule_plan(c.graph, plan, schedules::facts_of(profile));
    std::ofstream(fs::path(o.out_dir) / "plans" / (model + ".plan.json"))
        << schedules::plan_to_json(plan, records);
    const fs::path dot = fs::path(o.out_dir) / "plans" / (model + ".dot");
    std::ofstream(dot) << fusion::plan_to_dot(plan, c.graph, schedules::schedule_notes(records));
    // The drawing, where Graphviz is installed (tools/setup.sh installs it); without it the
    // .dot file stays for the user to render.
    const std::string svg = fs::path(dot).replace_extension(".svg").string();
    const std::string render =
        "command -v dot >/dev/null 2>&1 && dot -Tsvg '" + dot.string() + "' -o '" + svg + "'";
    if (std::system(render.c_str()) != 0) std::remove(svg.c_str());
    std::ofstream(fs::path(o.out_dir) / "plans" / (model + ".txt"))
        << fusion::plan_to_table(plan) << "schedule records:\n"
        << schedules::schedule_to_table(records);
    const graph::TensorMap want = reference::run(c.graph, c.inputs, c.params);

    // Every strategy built for this model, then the vendor baseline where one applies.
    struct Candidate {
      std::string strategy;
      std::function<void()> run;
      std::string implementation;  // vendors: what ran (oneDNN's primitives, OpenBLAS's core)
      bool reference_code = false;  // a vendor's unoptimised reference path: no baseline
    };
    std::vector<Candidate> candidates;
    for (const std::string& strategy : kStrategies) {
      try {
        const runtime::Kernel* k = &runtime::Registry::global().find(model, strategy, o.target);
        candidates.push_back({strategy, [k, &c] { k->run(c.ins, c.outs); }});
      } catch (const std::out_of_range&) {
      }
    }
    if (auto v = bench::vendor_baseline(model, c)) {
      candidates.push_back({v->name, v->run, v->implementation, v->reference_code});
    }

    double unfused_s = 0;
    for (const Candidate& cand : candidates) {
      const std::string& strategy = cand.strategy;
      for (auto& [name, t] : c.outputs) std::fill(t.data.begin(), t.data.end(), 0.0f);
      const Timing t = time_call(cand.run, o.seconds_per_kernel);
      // Correctness of the last call's outputs against the reference executor.
      bool ok = true;
      std::string worst;
      for (const auto& out : c.graph.outputs()) {
        const reference::Comparison cmp =
            reference::compare(c.outputs[out].data, want.at(out).data, kTolerance);
        ok = ok && cmp.ok();
        if (!cmp.ok()) worst = cmp.summary();
      }
      all_ok = all_ok && ok;
      if (strategy == "unfused") unfused_s = t.median_s;
      const double predicted = strategy == "fused"     ? c.predicted_fused_s
                               : strategy == "unfused" ? c.predicted_unfused_s
                                                       : 0;
      json r{{"model", model},
             {"strategy", strategy},
             {"median_s", t.median_s},
             {"p99_s", t.p99_s},
             {"gflops", c.flops / t.median_s / 1e9},
             {"gbps", c.compulsory_bytes / t.median_s / 1e9},
             {"flops", c.flops},
             {"bytes", c.compulsory_bytes},
             {"roof_bandwidth_Bps", c.compulsory_bytes <= llc_bytes / 2 ? bw_llc : bw},
             {"roofline_fraction",
              c.roofline_s(peak, c.compulsory_bytes <= llc_bytes / 2 ? bw_llc : bw) / t.median_s},
             {"predicted_s", predicted},
             {"kernels", strategy == "fused"     ? c.kernels_fused
                         : strategy == "unfused" ? c.kernels_unfused
                                                 : 0},
             {"matches_reference", ok}};
      if (!cand.implementation.empty()) {
        r["implementation"] = cand.implementation;
        r["reference_code"] = cand.reference_code;
      }
      results.push_back(r);
      char pred[32] = "-";
      if (predicted > 0) std::snprintf(pred, sizeof pred, "%.0f us", predicted * 1e6);
      char speedup[16];
      std::snprintf(speedup, sizeof speedup, "x%.2f", unfused_s > 0 ? unfused_s / t.median_s : 0.0);
      std::snprintf(
          line, sizeof line, "%-12s %-14s %10.1f %8s %8.2f %9.1f %7.1f%% %11s  %s\n", model.c_str(),
          strategy.c_str(), t.median_s * 1e6, speedup, c.compulsory_bytes / t.median_s / 1e9,
          c.flops / t.median_s / 1e9,
          100 * c.roofline_s(peak, c.compulsory_bytes <= llc_bytes / 2 ? bw_llc : bw) / t.median_s,
          pred, ok ? "ok" : ("MISMATCH " + worst).c_str());
      table += line;
      std::printf("%s", line);
      if (!cand.implementation.empty()) {
        std::printf("%-12s   %s%s\n", "", cand.implementation.c_str(),
                    cand.reference_code ? "  [REFERENCE CODE: not a baseline]" : "");
      }
      std::fflush(stdout);
    }
    // Speed-ups vs unfused, now that unfused is known.
    for (auto& r : results) {
      if (r["model"] == model && unfused_s > 0)
        r["speedup_vs_unfused"] = unfused_s / r["median_s"].get<double>();
    }
  }

  // PyTorch's rows, beside the fused kernel of the same model (its FLOPs and bytes).
  for (const json& t : pytorch_rows(o, std::min(o.seconds_per_kernel, 0.5))) {
    const json* f = find_result(results, t["model"], "fused");
    if (!f || !t.contains("median_s")) continue;
    const double s = t["median_s"].get<double>();
    json r = *f;
    r["strategy"] = t["strategy"];
    r["median_s"] = s;
    r["p99_s"] = t["p99_s"];
    r["gflops"] = r["flops"].get<double>() / s / 1e9;
    r["gbps"] = r["bytes"].get<double>() / s / 1e9;
    r["roofline_fraction"] = (*f)["roofline_fraction"].get<double>() * (*f)["median_s"].get<double>() / s;
    r["predicted_s"] = 0.0;
    r["kernels"] = 0;
    r["matches_reference"] = nullptr;  // not compared: its params are drawn by torch
    if (const json* u = find_result(results, t["model"], "unfused"))
      r["speedup_vs_unfused"] = (*u)["median_s"].get<double>() / s;
    std::printf("%-12s %-14s %10.1f %8s\n", r["model"].get<std::string>().c_str(),
                r["strategy"].get<std::string>().c_str(), s * 1e6,
                ("x" + fmt(r.value("speedup_vs_unfused", 0.0))).c_str());
    results.push_back(r);
  }

  const json networks = network_rows(o, all_ok);
  double log_ratio = 0;
  int timed = 0;
  bool fused_never_slower = true;
  for (const auto& n : networks) {
    const double r = n["unfused_over_fused"].get<double>();
    if (!n["check_passed"].get<bool>() || r <= 0) continue;  // failed: not a ratio
    log_ratio += std::log(r);
    ++timed;
    fused_never_slower = fused_never_slower && r >= 1;
  }
  std::string networks_line;
  if (timed > 0) {
    networks_line = "whole networks: unfused/fused geometric mean x" +
                    fmt(std::exp(log_ratio / timed)) + " over " + std::to_string(timed) +
                    ", fused " +
                    (fused_never_slower ? "at or under unfused on every network"
                                        : "slower than unfused on some network") +
                    " (the JIT, the two alternated in one process)";
    std::printf("%s\n", networks_line.c_str());
  }

  // Summary: speed-up table and the plans' explanations.
  std::ofstream md(fs::path(o.out_dir) / "summary.md");
  md << "# opfuse report\n\nTarget " << o.target << " (" << isa.name
     << "). Roofline measured in this run: FMA peak " << int(peak / 1e9)
     << " GFLOP/s, DRAM " << bw / 1e9 << " GB/s, " << threads << " cores.\n\n"
     << "| model | strategy | median us | speed-up vs unfused | GB/s | GFLOP/s | % of roofline | "
        "predicted us | "
        "matches reference |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const double sp = r.value("speedup_vs_unfused", 0.0);
    md << "| " << r["model"].get<std::string>() << " | " << r["strategy"].get<std::string>()
       << " | " << r["median_s"].get<double>() * 1e6 << " | " << sp << " | "
       << r["gbps"].get<double>() << " | " << r["gflops"].get<double>() << " | "
       << 100 * r["roofline_fraction"].get<double>() << " | "
       << r["predicted_s"].get<double>() * 1e6 << " | "
       << (r["matches_reference"].is_null() ? "-" : r["matches_reference"].get<bool>() ? "yes" : "NO")
       << " |\n";
  }
  md << "\nVendor implementations (what ran):\n\n";
  for (const auto& r : results) {
    if (!r.contains("implementation")) continue;
    md << "- " << r["model"].get<std::string>() << " / " << r["strategy"].get<std::string>()
       << ": " << r["implementation"].get<std::string>()
       << (r["reference_code"].get<bool>() ? " (reference code: not a baseline)" : "") << "\n";
  }
  md << "\nPlans (`plans/<model>.txt`, `.plan.json`, `.dot`) explain every fused group.\n";
  const std::vector<std::string> goals = performance_goals(results, peak);
  md << "\n## Performance goals\n\n";
  std::printf("\nperformance goals (measured in this run):\n");
  for (const auto& g : goals) {
    md << "- " << g << "\n";
    std::printf("  %s\n", g.c_str());
  }
  if (!networks.empty()) {
    md << "\n## Whole networks\n\nThrough `opfuse run` (the JIT), the fused and unfused plans "
          "alternated in fives, "
       << o.network_reps
       << " runs each, the fused plan checked against the reference executor; logs in "
          "`networks/`.\n\n| network | fused kernels | fused ms | unfused kernels | unfused ms | "
          "unfused/fused | check |\n|---|---|---|---|---|---|---|\n";
    for (const auto& n : networks) {
      md << "| " << n["model"].get<std::string>() << " | " << n["fused_kernels"].get<int>() << " | "
         << fmt(n["fused_s"].get<double>() * 1e3) << " | " << n["unfused_kernels"].get<int>()
         << " | " << fmt(n["unfused_s"].get<double>() * 1e3) << " | "
         << fmt(n["unfused_over_fused"].get<double>()) << " | "
         << (n["check_passed"].get<bool>() ? "match" : "FAILED") << " |\n";
    }
    md << "\n" << networks_line << "\n";
  }
  md << "\n![roofline](roofline.png)\n";
  std::ofstream(fs::path(o.out_dir) / "results.json")
      << json{{"target", o.target},          {"isa", isa.name},
              {"peak_flops", peak},          {"dram_bandwidth_Bps", bw},
              {"llc_bandwidth_Bps", bw_llc}, {"cores", threads},
              {"results", results},          {"networks", networks}}
             .dump(2)
      << "\n";
  // The roofline plot, every kernel on it (Debian's python3-matplotlib).
  const std::string plot = "/usr/bin/python3 '" + std::string(OPFUSE_SOURCE_DIR) +
                           "/tools/roofline_plot.py' '" + o.out_dir + "' 2>&1";
  if (std::system(plot.c_str()) != 0)
    std::printf("(no roofline.png: python3-matplotlib missing)\n");
  std::printf("\nwrote %s/results.json, %s/summary.md, %s/roofline.png, %s/plans/\n",
              o.out_dir.c_str(), o.out_dir.c_str(), o.out_dir.c_str(), o.out_dir.c_str());
  std::printf("%s\n", all_ok
                          ? "every kernel matches the reference executor"
                          : "SOME KERNELS OR NETWORKS FAILED THEIR CHECK (see the check columns)");
  return all_ok ? 0 : 1;
}

}  // namespace opfuse::tools
