// Fused elementwise chain (one Halide loop nest) against the same chain unfused (four
// materialised passes, plain C++), on DRAM-sized tensors.
//
// 7.1.1: T_unfused = 2nNb/B and T_fused = 2Nb/B, so a bandwidth-bound n-op chain speeds up
// by S = n. The reference runs 4 passes and allocates one intermediate, so it moves 8Nb bytes
// against the fused kernel's 2Nb; expect a ratio near 4 when both saturate DRAM bandwidth.
#include <HalideBuffer.h>
#include <benchmark/benchmark.h>

#include <vector>

#include "ew_chain_host.h"
#include "fusion/reference/ew_chain.h"
#include "runtime/errors.h"

namespace {

constexpr int kElements = 1 << 24;  // 64 MiB per tensor, far beyond any cache here

void BM_EwChainFusedHalide(benchmark::State& state) {
  std::vector<float> x(kElements, 0.5f), y(kElements);
  Halide::Runtime::Buffer<float, 1> in(x.data(), kElements), out(y.data(), kElements);
  for (auto _ : state) {
    opfuse::runtime::check(ew_chain_host(in, 1.5f, -0.25f, out), "ew_chain_host");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2LL * kElements * sizeof(float));
}

void BM_EwChainUnfusedCpp(benchmark::State& state) {
  std::vector<float> x(kElements, 0.5f);
  for (auto _ : state) {
    std::vector<float> y = opfuse::reference::ew_chain(x, 1.5f, -0.25f);
    benchmark::DoNotOptimize(y.data());
  }
  // Bytes the unfused chain moves: four passes each reading and writing N floats.
  state.SetBytesProcessed(state.iterations() * 8LL * kElements * sizeof(float));
}

}  // namespace

BENCHMARK(BM_EwChainFusedHalide)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EwChainUnfusedCpp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
