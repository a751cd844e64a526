// Every zoo model x strategy (fused, unfused, Mullapudi2016, Adams2019, Li2018) on the host,
// against the machine's roofline measured in the same run (FMA peak, DRAM triad/copy).
//
// Counters: GFLOP/s, GB/s of compulsory traffic (inputs + weights + outputs), pct_roofline =
// the roofline bound max(FLOPs / P_peak, bytes / B) over the measured time, and the cost
// model's predicted time for the fused and unfused plans. Intermediates come from the pooled
// allocator, so no strategy pays page faults of fresh allocations on each call.
#include <benchmark/benchmark.h>

#include <memory>
#include <thread>

#include "bench/zoo_model.h"
#include "fusion/hardware/calibrate.h"
#include "fusion/hardware/host.h"
#include "runtime/pool_allocator.h"

namespace {

using namespace opfuse;

double g_peak = 0, g_bw = 0;

void BM_RooflineFmaPeak(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(g_peak);
  }
  state.counters["GFLOP/s"] = g_peak / 1e9;
}

void BM_RooflineDramBandwidth(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(g_bw);
  }
  state.counters["GB/s"] = g_bw / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  runtime::use_pooled_allocator();
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  // The roofline of this run: FMA peak on every core; the better of copy and triad over a
  // DRAM-sized working set (256 MiB).
  g_peak = fusion::measure_fma_peak_flops(threads, 0.3);
  g_bw = fusion::measure_bandwidth_Bps(size_t(256) << 20, threads, 0.3);
  benchmark::RegisterBenchmark("roofline/fma_peak", BM_RooflineFmaPeak)->Iterations(1);
  benchmark::RegisterBenchmark("roofline/dram_bandwidth", BM_RooflineDramBandwidth)->Iterations(1);

  const fusion::HardwareProfile profile = fusion::host_profile();
  static std::vector<std::unique_ptr<bench::ZooCase>> cases;
  std::map<std::string, bench::ZooCase*> by_model;
  for (const runtime::Kernel* k : runtime::Registry::global().all()) {
    if (k->target() != "host") continue;
    if (!by_model.count(k->model())) {
      cases.push_back(std::make_unique<bench::ZooCase>(OPFUSE_MODELS_DIR, k->model(), profile));
      by_model[k->model()] = cases.back().get();
    }
    bench::ZooCase* c = by_model[k->model()];
    benchmark::RegisterBenchmark(
        (k->model() + "/" + k->strategy()).c_str(),
        [k, c](benchmark::State& state) {
          for (auto _ : state) k->run(c->ins, c->outs);
          state.counters["GFLOP/s"] = benchmark::Counter(
              c->flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
          state.counters["GB/s"] =
              benchmark::Counter(c->compulsory_bytes, benchmark::Counter::kIsIterationInvariantRate,
                                 benchmark::Counter::kIs1000);
          // bound seconds per call / measured seconds per call
          state.counters["pct_roofline"] = benchmark::Counter(
              100 * c->roofline_s(g_peak, g_bw), benchmark::Counter::kIsIterationInvariantRate);
          state.counters["pred_fused_us"] = c->predicted_fused_s * 1e6;
          state.counters["pred_unfused_us"] = c->predicted_unfused_s * 1e6;
        })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->MinTime(0.2);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
