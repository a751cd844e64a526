// opfuse-run (also run as `opfuse run`): runs a model's fused plan once through Halide's JIT on
// this CPU, for a quick check of a model before an AOT build.
//
//   opfuse run MODEL [--input NAME=FILE.npy|FILE.bin ...] [--outputs DIR] [--plan PLAN.json]
//              [--library LIB.so] [--check] [--reps N [--compare-spin | --compare-plan P.json]]
//              [--dim NAME=N ...]
//
// A model with symbolic dimensions (a dynamic batch) runs at the sizes --dim gives, else at
// those of the --input .npy files.
// Inputs not given are random (seeded). `--check` compares every output with the reference
// executor; `--reps` times the compiled plan (median). `--library` runs a library `opfuse
// compile --shared` built from MODEL (runtime::Model) instead of the JIT, to check and time the
// artefact itself. `--compare-plan` compiles a second plan (the unfused one from `opfuse plan
// --no-fusion --json`) into the same process and alternates the two in fives: on a machine
// whose speed drifts, their ratio. Never loads PoCL (JIT process).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "fusion/cost/cost_model.h"
#include "fusion/frontend/dynamic.h"
#include "fusion/frontend/load_model.h"
#include "fusion/hardware/profile.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "runtime/model.h"
#include "runtime/thread_pool.h"
#include "schedules/emitter.h"
#include "schedules/jit.h"
#include "schedules/shape_cache.h"
#include "tools/library_run.h"
#include "tools/npy.h"

using namespace opfuse;
namespace fs = std::filesystem;

namespace {

graph::HostTensor checked_input(graph::HostTensor h, const std::string& file,
                                const graph::Tensor& t) {
  if (h.shape != t.shape) {
    throw std::runtime_error(file + ": shape " + graph::shape_to_string(h.shape) +
                             " but input '" + t.name + "' is " + graph::shape_to_string(t.shape));
  }
  return h;
}

graph::HostTensor read_input(const std::string& file, const graph::Tensor& t) {
  if (fs::path(file).extension() == ".npy") return checked_input(tools::read_npy(file), file, t);
  graph::HostTensor h(t.shape);  // raw float32
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(file + ": cannot open");
  const auto bytes = size_t(in.tellg());
  if (bytes != h.size() * 4) {
    throw std::runtime_error(file + ": " + std::to_string(bytes) + " bytes, input '" + t.name +
                             "' " + graph::shape_to_string(t.shape) + " needs " +
                             std::to_string(h.size() * 4) + " (raw float32)");
  }
  in.seekg(0);
  in.read(reinterpret_cast<char*>(h.data.data()), std::streamsize(bytes));
  return h;
}

// --serve NAME=N1,N2,...: the calls, in order, through a ShapeCache; random inputs (seeded by
// the call's index) at each size, checked against the reference with --check.
int serve_sizes(const std::string& model_path, const std::string& spec,
                const graph::DimBindings& fixed, size_t cache_size, bool predict, double gap_ms,
                bool check, const std::string& profile) {
  // NAME=N1,N2,...: in the order given, repeats kept; each size checked as --dim NAME=N.
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) throw std::runtime_error("--serve wants NAME=N1,N2,..., got " + spec);
  fusion::DimRange r;
  r.symbol = spec.substr(0, eq);
  std::vector<int64_t> sizes;
  for (const auto& item : fusion::split_commas(spec.substr(eq + 1))) {
    sizes.push_back(fusion::parse_dim(r.symbol + "=" + item).min);
  }
  schedules::ShapeCache::Options o;
  o.capacity = cache_size;
  o.predict = predict;
  o.profile = profile;
  schedules::ShapeCache cache(model_path, r.symbol, fixed, o);
  std::map<int64_t, graph::Graph> graphs;  // the model at each size: inputs and the reference
  int bad = 0;
  std::printf("%-5s %6s %7s %12s  %s\n", "call", r.symbol.c_str(), "bucket", "latency ms", "cache");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    if (!graphs.count(n)) {
      graph::DimBindings at = fixed;
      at[r.symbol] = n;
      graphs.emplace(n, fusion::load_model(model_path, at));
    }
    const graph::Graph& g = graphs.at(n);
    const graph::TensorMap in = graph::random_inputs(g, i + 1);
    const auto before = cache.stats();
    const auto t0 = std::chrono::steady_clock::now();
    const graph::TensorMap out = cache.run(n, in);
    const double ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
    const auto after = cache.stats();
    const char* how = after.hits > before.hits     ? "hit"
                      : after.waits > before.waits ? "waited for its compile"
                                                   : "compiled";
    std::printf("%-5zu %6lld %7lld %12.1f  %s", i, static_cast<long long>(n),
                static_cast<long long>(cache.bucket_of(n)), ms, how);
    if (check) {
      const graph::TensorMap want = reference::run(g, in);
      bool ok = true;
      for (const auto& name : g.outputs()) {
        ok = ok && reference::compare(out.at(name).data, want.at(name).data,
                                      reference::kGraphTolerance).ok();
      }
      std::printf(", reference: %s", ok ? "match" : "MISMATCH");
      bad += ok ? 0 : 1;
    }
    std::printf("\n");
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
  }
  cache.wait_idle();
  const auto st = cache.stats();
  std::printf("calls %zu: %lld hits, %lld compiled on the call, %lld waited for a compile in "
              "flight, %lld compiled ahead, %lld evicted\n",
              sizes.size(), static_cast<long long>(st.hits), static_cast<long long>(st.misses),
              static_cast<long long>(st.waits), static_cast<long long>(st.ahead_compiles),
              static_cast<long long>(st.evictions));
  std::printf("histogram:");
  for (const auto& [n, calls] : st.histogram) {
    std::printf(" %lld x%lld", static_cast<long long>(n), static_cast<long long>(calls));
  }
  std::printf("\n%-7s %6s %11s %14s %10s %9s %8s\n", "bucket", "calls", "compile s",
              "first call ms", "mean ms", "compiles", "MiB");
  for (const auto& [b, bs] : st.buckets) {
    std::printf("%-7lld %6lld %11.2f %14.1f %10.1f %9d %8.1f%s\n", static_cast<long long>(b),
                static_cast<long long>(bs.calls), bs.compile_s, bs.first_call_s * 1e3,
                bs.calls ? bs.run_s / double(bs.calls) * 1e3 : 0.0, bs.compiles,
                double(bs.bytes) / 1048576.0, bs.ahead ? "  (ahead)" : "");
  }
  for (const auto& line : st.log) std::printf("  %s\n", line.c_str());
  return bad ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"opfuse run: a model's fused plan through the JIT, on this CPU"};
  std::string model_path, out_dir, plan_path, profile = "host";
  std::vector<std::string> inputs;
  bool check = false;
  int reps = 0;
  app.add_option("model", model_path, "graph file (.json or .onnx)")->required();
  app.add_option("--input", inputs, "NAME=FILE (.npy or raw float32 .bin), repeatable");
  app.add_option("--outputs", out_dir, "write every output as DIR/<name>.npy");
  app.add_option("--plan", plan_path,
                 "a plan JSON (e.g. from opfuse explore) instead of the planner's");
  app.add_option("--profile", profile, "hardware profile for the planner");
  app.add_flag("--check", check, "compare every output with the reference executor");
  app.add_option("--reps", reps, "time the plan over N runs (median)");
  bool compare_spin = false;
  app.add_flag("--compare-spin", compare_spin,
               "with --reps: alternate the thread pool's idle spin (on, off) every 5 runs and "
               "print both medians (runtime/thread_pool.h)");
  std::string compare_plan;
  app.add_option("--compare-plan", compare_plan,
                 "with --reps: also compile this plan JSON (e.g. opfuse plan --no-fusion --json) "
                 "and alternate the two every 5 runs, N runs each; print both medians")
      ->check(CLI::ExistingFile);
  std::string library;
  app.add_option("--library", library,
                 "run this library (`opfuse compile MODEL --shared`) instead of the JIT");
  bool breakdown = false;
  app.add_flag("--breakdown", breakdown,
               "time each group's productions over repeated runs (medians): each group's "
               "measured time beside the cost model's prediction");
  std::string breakdown_json;
  app.add_option("--breakdown-json", breakdown_json,
                 "--breakdown, also written as JSON: each group's nodes, measured and predicted "
                 "seconds (bench/networks/breakdown.py reads it)");
  std::vector<std::string> dim_specs;
  app.add_option("--dim", dim_specs,
                 "NAME=N: the size of a symbolic dimension (a dynamic batch), repeatable; "
                 "taken from the --input files when not given");
  std::string serve;
  app.add_option("--serve", serve,
                 "NAME=N1,N2,...: serve calls at these sizes of a symbolic dimension, in order, "
                 "through the JIT's shape cache (schedules/shape_cache.h); prints each call's "
                 "latency and the cache's statistics");
  bool no_predict = false;
  app.add_flag("--no-predict", no_predict, "--serve without compiling the predicted size ahead");
  size_t cache_size = 3;
  app.add_option("--cache", cache_size, "--serve: compiled sizes kept (default 3)");
  double gap_ms = 0;
  app.add_option("--gap-ms", gap_ms, "--serve: idle time between calls, as between requests");
  CLI11_PARSE(app, argc, argv);
  if (!serve.empty()) {
    try {
      return serve_sizes(model_path, serve, fusion::parse_bindings(dim_specs, "opfuse run --serve"),
                         cache_size, !no_predict, gap_ms, check, profile);
    } catch (const std::exception& e) {
      std::cerr << "opfuse run: " << e.what() << "\n";
      return 1;
    }
  }
  try {
    // The sizes of the model's symbolic dimensions: --dim, else the .npy inputs' shapes, which
    // must agree with each other and with --dim.
    graph::DimBindings dims = fusion::parse_bindings(dim_specs, "opfuse run");
    std::map<std::string, std::string> dim_source;
    for (const auto& spec : dim_specs) dim_source[spec.substr(0, spec.find('='))] = "--dim " + spec;
    std::map<std::string, graph::HostTensor> npy;  // --input NAME=FILE.npy, read once
    for (const auto& spec : inputs) {
      const auto eq = spec.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--input wants NAME=FILE, got " + spec);
      const std::string file = spec.substr(eq + 1);
      if (fs::path(file).extension() == ".npy") npy[spec.substr(0, eq)] = tools::read_npy(file);
    }
    for (const auto& [symbol, uses] : fusion::declared_symbols(model_path)) {
      for (const auto& [input, axis] : uses) {
        const auto it = npy.find(input);
        if (it == npy.end() || size_t(axis) >= it->second.shape.size()) continue;  // the load says why
        const int64_t size = it->second.shape[size_t(axis)];
        const std::string from = "input '" + input + "' (" + graph::shape_to_string(it->second.shape) + ")";
        if (dims.count(symbol) && dims[symbol] != size) {
          throw std::runtime_error(from + " has " + symbol + " = " + std::to_string(size) + " but " +
                                   dim_source[symbol] + " says " + std::to_string(dims[symbol]));
        }
        dims[symbol] = size;
        dim_source[symbol] = from;
      }
    }
    for (const auto& [symbol, size] : dims) {
      std::printf("%s = %lld (%s)\n", symbol.c_str(), static_cast<long long>(size),
                  dim_source[symbol].c_str());
    }
    std::vector<std::string> rewrites;
    const graph::Graph g = fusion::load_model(model_path, dims, &rewrites);
    for (const auto& r : rewrites) std::printf("%s\n", r.c_str());
    // "host": this machine, for the ISA the JIT compiles for (HL_JIT_TARGET may name another).
    const fusion::RooflineCostModel model(
        schedules::profile_for(profile, Halide::get_jit_target_from_environment()));
    fusion::FusionPlan plan;
    if (plan_path.empty()) {
      plan = fusion::plan_fusion(g, model);
    } else {
      plan = fusion::plan_from_user_groups(g, model, fusion::user_groups_from_plan_file(plan_path));
    }
    graph::TensorMap in = graph::random_inputs(g, 1);
    for (const auto& spec : inputs) {
      const auto eq = spec.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--input wants NAME=FILE, got " + spec);
      const std::string name = spec.substr(0, eq);
      if (!g.has_tensor(name) || g.tensor(name).kind != graph::TensorKind::input) {
        throw std::runtime_error("--input " + name + ": the model has no input of that name");
      }
      in[name] = npy.count(name) ? checked_input(std::move(npy[name]), spec.substr(eq + 1), g.tensor(name))
                                 : read_input(spec.substr(eq + 1), g.tensor(name));
    }
    for (const auto& name : g.inputs()) {
      if (std::none_of(inputs.begin(), inputs.end(),
                       [&](const std::string& s) { return s.rfind(name + "=", 0) == 0; })) {
        std::printf("input %s %s: random (seed 1)\n", name.c_str(),
                    graph::shape_to_string(g.tensor(name).shape).c_str());
      }
    }
    breakdown = breakdown || !breakdown_json.empty();
    if (!library.empty() && breakdown) {
      throw std::runtime_error("--breakdown times the JIT's plan, not a --library");
    }
    if (!compare_plan.empty() && (!library.empty() || breakdown || compare_spin)) {
      throw std::runtime_error(
          "--compare-plan compares two JIT plans: not with --library, "
          "--breakdown or --compare-spin");
    }
    std::optional<schedules::CompiledPlan> jit, other;
    fusion::FusionPlan other_plan;
    std::optional<tools::LibraryRun> lib;
    if (library.empty()) {
      jit.emplace(g, plan, in, graph::TensorMap{}, breakdown);
      jit->run();
      std::printf("plan: %d kernels for %zu ops\n", plan.kernels_fused(), g.nodes().size());
      if (!compare_plan.empty()) {
        other_plan = fusion::plan_from_user_groups(
            g, model, fusion::user_groups_from_plan_file(compare_plan));
        other.emplace(g, other_plan, in, graph::TensorMap{}, false);
        other->run();
        std::printf("compare plan: %d kernels for %zu ops\n", other_plan.kernels_fused(),
                    g.nodes().size());
      }
    } else {
      lib.emplace(library, g, in);
      lib->run();
      std::printf("library: %s\n", library.c_str());
    }
    auto run_once = [&] { jit ? jit->run() : lib->run(); };
    const graph::TensorMap out = jit ? jit->outputs() : lib->outputs();
    if (reps > 0) {
      // With --compare-spin, runs alternate in fives: spinning workers, then sleeping ones.
      std::vector<double> spinning, sleeping, compared;
      const int spin = compare_spin ? opfuse::runtime::spin_us() : 0;
      auto timed = [](const std::function<void()>& call, std::vector<double>& into) {
        const auto t0 = std::chrono::steady_clock::now();
        call();
        into.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      };
      for (int i = 0; i < reps && !other; ++i) {
        const bool asleep = compare_spin && (i / 5) % 2;
        if (compare_spin) opfuse::runtime::set_spin_us(asleep ? 0 : spin);
        timed(run_once, asleep ? sleeping : spinning);
      }
      // With --compare-plan, up to 5 runs of this plan, then as many of the other, `reps` each.
      for (int done = 0; other && done < reps; done += 5) {
        for (int k = 0; k < std::min(5, reps - done); ++k) timed(run_once, spinning);
        for (int k = 0; k < std::min(5, reps - done); ++k) timed([&] { other->run(); }, compared);
      }
      if (compare_spin) opfuse::runtime::set_spin_us(spin);
      auto print_median = [](const char* what, std::vector<double> t) {
        if (t.empty()) return;
        std::sort(t.begin(), t.end());
        std::printf("%s: median %.4f ms over %zu runs\n", what, t[t.size() / 2] * 1e3, t.size());
      };
      print_median("time, workers sleeping between loops (spin 0)", sleeping);
      print_median("time", spinning);
      print_median("time, --compare-plan", compared);
    }
    if (breakdown) {
      // Each group's root productions stamped in every run (CompiledPlan `timed`): medians
      // over at least 20 runs and about a second. "other" is the rest of a run's wall time
      // (output copies, allocations, the pipeline's start).
      std::vector<std::vector<double>> per_group;  // [slot][run]
      std::vector<schedules::GroupTime> times;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0;
           r < 20 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0;
           ++r) {
        const auto start = std::chrono::steady_clock::now();
        jit->run();
        double rest =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        times = schedules::times_by_group(g, plan, jit->root_seconds());
        per_group.resize(times.size());
        for (size_t i = 0; i < times.size(); ++i) {
          if (times[i].group >= 0) rest -= times[i].measured_s;
          per_group[i].push_back(times[i].group >= 0 ? times[i].measured_s : 0.0);
        }
        per_group.back().back() = std::max(0.0, rest);
      }
      const int runs = int(per_group.front().size());
      double total = 0;
      for (size_t i = 0; i < times.size(); ++i) {
        auto& v = per_group[i];
        std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
        times[i].measured_s = v[v.size() / 2];
        total += times[i].measured_s;
      }
      std::printf(
          "per group (each group's productions timed, median of %d runs, %.3f ms a run; "
          "predicted by the %s model on %s):\n",
          runs, total * 1e3, plan.cost_model.c_str(), plan.profile.c_str());
      std::printf("  %-4s %-11s %12s %12s %9s  %s\n", "grp", "kind", "measured us",
                  "predicted us", "meas/pred", "nodes");
      for (const auto& t : times) {
        if (t.group < 0) {
          std::printf(
              "  %-4s %-11s %12.1f %12s %9s  (output copies, allocations, the pipeline's start)\n",
              "-", "other", t.measured_s * 1e6, "-", "-");
          continue;
        }
        const fusion::FusedGroup& grp = plan.groups[size_t(t.group)];
        std::string nodes = grp.nodes.front();
        if (grp.nodes.size() > 1) nodes += " .. " + grp.nodes.back();
        std::printf("  %-4d %-11s %12.1f %12.1f %9.2f  %s (%zu ops)\n", t.group,
                    fusion::to_string(grp.kind), t.measured_s * 1e6, t.predicted_s * 1e6,
                    t.predicted_s > 0 ? t.measured_s / t.predicted_s : 0.0, nodes.c_str(),
                    grp.nodes.size());
      }
      if (!breakdown_json.empty()) {
        nlohmann::ordered_json j;
        j["runs"] = runs;
        j["cost_model"] = plan.cost_model;
        j["profile"] = plan.profile;
        j["groups"] = nlohmann::ordered_json::array();
        for (const auto& t : times) {
          if (t.group < 0) {
            j["other_s"] = t.measured_s;
            continue;
          }
          const fusion::FusedGroup& grp = plan.groups[size_t(t.group)];
          j["groups"].push_back({{"group", t.group},
                                 {"kind", fusion::to_string(grp.kind)},
                                 {"nodes", grp.nodes},
                                 {"measured_s", t.measured_s},
                                 {"predicted_s", t.predicted_s}});
        }
        std::ofstream(breakdown_json) << j.dump(1) << "\n";
      }
    }
    if (!out_dir.empty()) fs::create_directories(out_dir);
    int bad = 0;
    const graph::TensorMap want = check ? reference::run(g, in) : graph::TensorMap{};
    for (const auto& name : g.outputs()) {
      const graph::HostTensor& t = out.at(name);
      double sum = 0;
      for (float v : t.data) sum += v;
      std::printf("output %s %s sum %.6g", name.c_str(), graph::shape_to_string(t.shape).c_str(),
                  sum);
      if (check) {
        const auto c = reference::compare(t.data, want.at(name).data, reference::kGraphTolerance);
        std::printf("  reference: %s", c.ok() ? "match" : c.summary().c_str());
        bad += c.ok() ? 0 : 1;
      }
      std::printf("\n");
      if (!out_dir.empty()) tools::write_npy(out_dir + "/" + name + ".npy", t);
    }
    return bad ? 2 : 0;
  } catch (const std::exception& e) {
    std::cerr << "opfuse run: " << e.what() << "\n";
    return 1;
  }
}
