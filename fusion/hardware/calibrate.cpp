#include "fusion/hardware/calibrate.h"

#include "fusion/hardware/host.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace opfuse::fusion {
namespace {

using clock_type = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(clock_type::now().time_since_epoch()).count();
}

// Runs fn(thread) on `threads` threads at once; returns the wall time.
template <typename Fn>
double run_parallel(int threads, Fn fn) {
  std::vector<std::thread> pool;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  double start = 0;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      fn(t);
    });
  }
  while (ready.load() < threads) {
  }
  start = now_s();
  go.store(true);
  for (auto& th : pool) th.join();
  return now_s() - start;
}

typedef float v16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));

// N independent FMA chains acc = acc * a + b. Peak needs latency x pipes chains in flight
// (4 cycles x 2 pipes = 8 on Zen and Skylake) and all of them, with the two constants, in
// registers: N + 2 <= the register file (16 ymm: N <= 14; 32 zmm: N <= 30). 16 chains on AVX2
// spill and measured 110 GFLOP/s on a Zen 3 that does ~200.
template <typename V, int N>
__attribute__((always_inline)) inline float fma_chains(long iterations, float seed) {
  V acc[N];
  for (int i = 0; i < N; ++i) acc[i] = V{} + seed * float(i + 1);
  const V a = V{} + 0.999999f, b = V{} + 1e-7f;
  for (long k = 0; k < iterations; ++k) {
#pragma GCC unroll 32
    for (int i = 0; i < N; ++i) acc[i] = acc[i] * a + b;
  }
  V sum = acc[0];
  for (int i = 1; i < N; ++i) sum += acc[i];
  return sum[0];
}

template <int N>
__attribute__((target("avx512f,fma"))) float fma_avx512(long iterations, float seed) {
  return fma_chains<v16, N>(iterations, seed);
}
template <int N>
__attribute__((target("avx2,fma"))) float fma_avx2(long iterations, float seed) {
  return fma_chains<v8, N>(iterations, seed);
}

using FmaKernel = float (*)(long, float);
template <int... N>
std::vector<std::pair<FmaKernel, int>> avx512_kernels() {
  return {{fma_avx512<N>, N}...};
}
template <int... N>
std::vector<std::pair<FmaKernel, int>> avx2_kernels() {
  return {{fma_avx2<N>, N}...};
}
// (kernel, chains) tried for the ISA: the best of them is the peak (which count wins depends
// on the core's FMA latency and pipe count).
std::vector<std::pair<FmaKernel, int>> fma_kernels(bool wide) {
  return wide ? avx512_kernels<8, 12, 16, 24>() : avx2_kernels<8, 10, 12, 14>();
}

volatile float g_sink;

// Per-core (L1, L2) or shared (L3) data-cache size: from sysfs, which virtual machines report
// correctly more often than sysconf, else sysconf, else `fallback`.
double cache_bytes(int level, int sysconf_name, double fallback) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l) || !(ty >> type) || !(sz >> size)) continue;
    if (l != level || type == "Instruction" || size.empty()) continue;
    double v = std::atof(size.c_str());
    if (size.back() == 'K') v *= 1024;
    if (size.back() == 'M') v *= 1024 * 1024;
    if (v > 0) return v;
  }
  const long v = sysconf(sysconf_name);
  return v > 0 ? double(v) : fallback;
}

}  // namespace

double host_cache_bytes(int level, double fallback) {
  const int name = level == 1   ? _SC_LEVEL1_DCACHE_SIZE
                   : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                : _SC_LEVEL3_CACHE_SIZE;
  return cache_bytes(level, name, fallback);
}

double measure_fma_peak_flops(int threads, double seconds, const Isa& isa) {
  if ((isa.name != "avx512" && isa.name != "avx2") || !host_runs(isa)) {
    throw std::runtime_error("measure_fma_peak_flops: no FMA kernel for " + isa.name +
                             " on this CPU (avx512 and avx2, where the CPU runs them)");
  }
  const bool wide = isa.name == "avx512";
  const double lanes = wide ? 16 : 8;
  double best = 0;
  // The peak is the best of three passes over the kernels: on a VM the other core is now and
  // then not ours for a while (measured on one 2-core VM: 176 GFLOP/s in one set-up's pass,
  // 334-341 in every other).
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& kc : fma_kernels(wide)) {
      // Not a structured binding: C++17 lambdas cannot capture one.
      const FmaKernel kernel = kc.first;
      const int chains = kc.second;
      long iterations = 1 << 14;
      // Grow until one run takes long enough to time.
      while (true) {
        const double t = run_parallel(threads, [&](int) { g_sink = kernel(iterations, 1.0f); });
        if (t >= seconds || iterations > (1L << 40)) {
          best = std::max(best, 2.0 * lanes * chains * double(iterations) * threads / t);
          break;
        }
        iterations *= t > 0 ? std::max(2.0, seconds / t) : 2;
      }
    }
  }
  return best;
}

double measure_fma_peak_flops(int threads, double seconds) {
  return measure_fma_peak_flops(threads, seconds, host_isa());
}

double measure_bandwidth_Bps(size_t working_set_bytes, int threads, double seconds) {
  // Three arrays per thread for triad (a = b + s*c); copy uses two of them.
  const size_t per_thread = std::max<size_t>(working_set_bytes / threads / 3 / sizeof(float), 1024);
  std::vector<std::vector<float>> a(threads), b(threads), c(threads);
  for (int t = 0; t < threads; ++t) {
    a[t].assign(per_thread, 1.0f);
    b[t].assign(per_thread, 2.0f);
    c[t].assign(per_thread, 3.0f);
  }
  double best = 0;
  for (int kernel = 0; kernel < 2; ++kernel) {  // 0 copy, 1 triad
    const double bytes_per_pass =
        double(per_thread) * sizeof(float) * (kernel == 0 ? 2 : 3) * threads;
    long passes = 1;
    while (true) {
      const double t = run_parallel(threads, [&](int th) {
        float* A = a[th].data();
        const float* B = b[th].data();
        const float* C = c[th].data();
        for (long p = 0; p < passes; ++p) {
          if (kernel == 0) {
            std::memcpy(A, B, per_thread * sizeof(float));
          } else {
            for (size_t i = 0; i < per_thread; ++i) A[i] = B[i] + 3.0f * C[i];
          }
          asm volatile("" ::: "memory");
        }
      });
      if (t >= seconds || passes > (1L << 30)) {
        best = std::max(best, bytes_per_pass * double(passes) / t);
        break;
      }
      passes *= t > 0 ? long(std::max(2.0, seconds / t)) : 2;
    }
  }
  return best;
}

double measure_latency_s(size_t buffer_bytes, double seconds) {
  const size_t lines = buffer_bytes / 64;
  std::vector<size_t> order(lines);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  struct alignas(64) Line {
    Line* next;
  };
  std::vector<Line> buf(lines);
  for (size_t i = 0; i < lines; ++i) buf[order[i]].next = &buf[order[(i + 1) % lines]];
  Line* p = &buf[order[0]];
  long steps = 1 << 16;
  while (true) {
    const double t0 = now_s();
    for (long k = 0; k < steps; ++k) p = p->next;
    const double t = now_s() - t0;
    g_sink = float(reinterpret_cast<uintptr_t>(p) & 1);
    if (t >= seconds || steps > (1L << 34)) return t / double(steps);
    steps *= 2;
  }
}

HardwareProfile calibrate(const HardwareProfile& base, const CalibrationOptions& o) {
  HardwareProfile p = base;
  const int cores = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const double secs = o.quick ? 0.02 : o.seconds_per_measurement;
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  p.name = std::string("measured-") + host + "-" + o.isa.name;
  p.cores = cores;
  p.gpu = false;
  p.peak_flops_f32 = measure_fma_peak_flops(cores, secs, o.isa);
  p.peak_flops_f16 = p.peak_flops_f32;  // f16 storage, f32 arithmetic on this CPU
  p.vector_bytes = o.isa.vector_bytes;
  p.vector_registers = o.isa.vector_registers;

  const double l1 = cache_bytes(1, _SC_LEVEL1_DCACHE_SIZE, 32 * 1024) * cores;
  const double l2 = cache_bytes(2, _SC_LEVEL2_CACHE_SIZE, 1 << 20) * cores;
  const double l3 = cache_bytes(3, _SC_LEVEL3_CACHE_SIZE, 16 << 20);
  const double dram_ws = o.quick ? 4 * l3 : 8 * l3;
  p.levels = {
      {"L1", l1, measure_bandwidth_Bps(size_t(l1 / 2), cores, secs)},
      {"L2", l2, measure_bandwidth_Bps(size_t(l2 / 2), cores, secs)},
      {"LLC", l3, measure_bandwidth_Bps(size_t(l3 / 2), cores, secs)},
      {"DRAM", base.main_memory().size_bytes, measure_bandwidth_Bps(size_t(dram_ws), cores, secs)}};
  p.memory_latency_s = measure_latency_s(size_t(dram_ws), secs);
  return p;
}

}  // namespace opfuse::fusion
