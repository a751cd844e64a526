// The zoo on a CUDA GPU, from AOT-built kernels: fused vs unfused vs Anderson2021.
//
//   bench_gpu --models DIR --out FILE.json [--seconds S]
//
// 1. Correctness: every CPU-size CUDA kernel (model, strategy) against the reference
//    executor on the host (the reference is plain C++ loops: GPU sizes would take minutes).
// 2. Speed: every GPU-size kernel (models/gpu, planned for the h200 profile), inputs and
//    outputs resident on the device (copied once), timed call by call with a device sync,
//    median over a time budget; fused and Anderson2021 outputs compared with unfused's.
// The JSON has the format of the demo's results ({"results": [{model, strategy, median_s,
// ...}]}), which bench/compare_runs.py compares across runs.
#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/zoo_model.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "runtime/errors.h"

using namespace opfuse;
using json = nlohmann::json;

namespace {

// Halide's message for a failed call, as a runtime::KernelError.
void check(int rc, const std::string& what) { runtime::check(rc, what); }

// Inputs and outputs on the device; returns the argv of the kernel.
std::vector<void*> to_device(runtime::HostBuffers& ins, runtime::HostBuffers& outs) {
  const halide_device_interface_t* cuda = halide_cuda_device_interface();
  std::vector<void*> argv;
  for (auto& b : ins) {
    b.flags = halide_buffer_flag_host_dirty;
    check(halide_copy_to_device(nullptr, &b, cuda), "copy to device");
    argv.push_back(&b);
  }
  for (auto& b : outs) {
    check(halide_device_malloc(nullptr, &b, cuda), "device malloc");
    argv.push_back(&b);
  }
  return argv;
}

void to_host(runtime::HostBuffers& outs) {
  for (auto& b : outs) {
    b.flags = halide_buffer_flag_device_dirty;
    check(halide_copy_to_host(nullptr, &b), "copy to host");
  }
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"opfuse zoo on a CUDA GPU: fused vs unfused vs Anderson2021"};
  std::string models_dir = OPFUSE_MODELS_DIR, out = "bench_gpu.json";
  double seconds = 1.0;
  app.add_option("--models", models_dir, "model zoo folder (cpu/ and gpu/ graph files)");
  app.add_option("--out", out, "results JSON");
  app.add_option("--seconds", seconds, "timing budget per kernel")->check(CLI::Range(0.05, 30.0));
  CLI11_PARSE(app, argc, argv);
  runtime::install_error_handler();

  std::vector<const runtime::Kernel*> small, large;
  for (const runtime::Kernel* k : runtime::Registry::global().all()) {
    if (k->target() != "host-cuda") continue;
    const bool gpu_size = k->model().rfind("gpu/", 0) == 0;
    (gpu_size ? large : small).push_back(k);
  }
  if (small.empty() && large.empty()) {
    std::fprintf(stderr, "bench_gpu: no CUDA kernel is built in (no CUDA toolkit at build?)\n");
    return 1;
  }
  json results = json::array();
  bool all_ok = true;

  // 1. CPU sizes against the reference executor.
  std::printf("correctness (CPU sizes, vs the reference executor)\n");
  std::map<std::string, graph::TensorMap> reference_of;  // model -> reference outputs
  for (const runtime::Kernel* k : small) {
    bench::ModelTensors c(models_dir, k->model(), 3, "cpu");
    if (!reference_of.count(k->model()))
      reference_of[k->model()] = reference::run(c.graph, c.inputs, c.params);
    const graph::TensorMap& want = reference_of.at(k->model());
    runtime::HostBuffers ins(c.ins), outs(c.outs);
    std::vector<void*> args = to_device(ins, outs);
    check(k->entry()(args.data()), k->name());
    to_host(outs);
    bool ok = true;
    for (const auto& o : c.graph.outputs()) {
      const auto cmp =
          reference::compare(c.outputs[o].data, want.at(o).data, reference::kGraphTolerance);
      ok = ok && cmp.ok();
      if (!cmp.ok()) std::printf("  %s: %s\n", k->name().c_str(), cmp.summary().c_str());
    }
    all_ok = all_ok && ok;
    std::printf("  %-28s %s\n", (k->model() + "/" + k->strategy()).c_str(), ok ? "ok" : "MISMATCH");
    results.push_back({{"model", k->model()}, {"strategy", k->strategy()}, {"size", "cpu"},
                       {"target", "cuda"}, {"matches_reference", ok}});
  }

  // 2. GPU sizes: timed, on the device.
  std::printf("\ntimes (GPU sizes, on the device)\n%-14s %-14s %12s %10s %s\n", "model",
              "strategy", "median us", "vs unfused", "vs unfused output");
  std::set<std::string> models;
  for (const runtime::Kernel* k : large) models.insert(k->model());
  for (const std::string& model : models) {
    bench::ModelTensors c(models_dir, model.substr(4), 3, "gpu");
    std::map<std::string, graph::TensorMap> got;
    double unfused_us = 0;
    for (const std::string strategy : {"unfused", "fused", "Anderson2021"}) {
      const runtime::Kernel* k = nullptr;
      for (const runtime::Kernel* x : large) {
        if (x->model() == model && x->strategy() == strategy) k = x;
      }
      if (!k) continue;
      runtime::HostBuffers ins(c.ins), outs(c.outs);
      std::vector<void*> args = to_device(ins, outs);
      std::vector<double> t;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; ++i) check(k->entry()(args.data()), k->name());  // warm-up, JIT
      check(halide_device_sync(nullptr, &outs[0]), "sync");
      while (t.size() < 5 || (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                            start).count() < seconds &&
                              t.size() < 1000)) {
        const auto t0 = std::chrono::steady_clock::now();
        check(k->entry()(args.data()), k->name());
        check(halide_device_sync(nullptr, &outs[0]), "sync");
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(t.begin(), t.end());
      const double us = t[t.size() / 2] * 1e6;
      to_host(outs);
      got[strategy] = c.outputs;
      if (strategy == std::string("unfused")) unfused_us = us;
      std::string agree = "-";
      if (strategy != std::string("unfused") && got.count("unfused")) {
        bool ok = true;
        for (const auto& o : c.graph.outputs()) {
          ok = ok && reference::compare(got[strategy][o].data, got["unfused"][o].data,
                                        reference::kGraphTolerance)
                         .ok();
        }
        all_ok = all_ok && ok;
        agree = ok ? "equal" : "DIFFERENT";
      }
      std::printf("%-14s %-14s %12.1f %10.2f %s\n", model.substr(4).c_str(), strategy.c_str(), us,
                  unfused_us > 0 ? unfused_us / us : 0.0, agree.c_str());
      results.push_back({{"model", model.substr(4)},
                         {"strategy", strategy},
                         {"size", "gpu"},
                         {"target", "cuda"},
                         {"median_s", us * 1e-6},
                         {"p99_s", t[std::min(t.size() - 1, size_t(t.size() * 0.99))]},
                         {"speedup_vs_unfused", unfused_us > 0 ? unfused_us / us : 0.0},
                         {"matches_unfused", agree != "DIFFERENT"}});
    }
  }
  std::ofstream(out) << json{{"device", "cuda"}, {"results", results}}.dump(1) << "\n";
  std::printf("\nwrote %s\n", out.c_str());
  return all_ok ? 0 : 3;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "bench_gpu: %s (is there a CUDA GPU and driver?)\n", e.what());
    return 2;
  }
}
