// A hardware profile: what the cost model needs to know about a machine. Built-in profiles
// (this CPU kind, a generic AVX2 machine, an NVIDIA H200), or one measured by `calibrate`,
// loaded from and saved to JSON.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace opfuse::fusion {

struct MemoryLevel {
  std::string name;          // "L1", "L2", "LLC", "DRAM" on a CPU; "SMEM", "L2", "HBM" on a GPU
  double size_bytes = 0;     // capacity visible to the whole device (all cores / SMs)
  double bandwidth_Bps = 0;  // sustained bandwidth, bytes per second, all cores together
};

// A CPU's vector ISA as the cost model and the schedules see it: the widest vector and the
// number of architectural vector registers (what register blocks are sized from).
struct Isa {
  std::string name;        // "avx512", "avx2", "sse4"
  int vector_bytes = 16;   // widest f32 vector
  int vector_registers = 16;
};
// Vector registers a register-blocked anchor's accumulators take (conv, matmul): half the
// register file, the other half holding the loaded and broadcast inputs and the epilogue's
// values (16 of AVX-512's 32 zmm, 8 of AVX2's 16 ymm). The schedules size their blocks by it
// and the cost model counts it against R_max.
inline int anchor_accumulator_registers(int vector_registers) {
  return vector_registers / 2 > 1 ? vector_registers / 2 : 1;
}

// The ISAs opfuse plans for on x86-64: avx512 (32 zmm), avx2 (16 ymm, FMA), sse4 (16 xmm).
Isa isa_named(const std::string& name);

struct HardwareProfile {
  std::string name;
  bool gpu = false;
  double peak_flops_f32 = 0;        // FLOP/s, all cores, FMA counted as 2
  double peak_flops_f16 = 0;        // FLOP/s for f16 arithmetic (CPUs here compute f16 in f32)
  std::vector<MemoryLevel> levels;  // fastest first; the last is main memory
  double memory_latency_s = 0;      // main-memory load-to-use latency
  double launch_overhead_s = 0;     // per kernel: GPU launch, or CPU parallel-for dispatch
  int cores = 1;                    // CPU cores, or GPU SMs
  int vector_bytes = 16;            // widest SIMD register (CPU)
  int vector_registers = 16;        // architectural SIMD registers (CPU)
  int registers_per_thread = 0;     // GPU: registers one thread may use
  double shared_memory_per_block_bytes = 0;  // GPU
  int max_threads_per_block = 0;             // GPU
  // NUMA (exercise 7.5): nodes and their latencies; bandwidth to a remote node is scaled by
  // local/remote latency, the model's simplest consistent assumption.
  int numa_nodes = 1;
  double numa_local_latency_s = 0;
  double numa_remote_latency_s = 0;
  // 7.4.1 correction: T_actual = T_fused * (1 + a_cache + a_conflict + a_divergence),
  // fitted from measurements by the exploration tool; 0 until calibrated.
  double alpha_cache = 0, alpha_conflict = 0, alpha_divergence = 0;
  // The share of peak_flops_f32 opfuse's schedules attain, by anchor class (the cost model's
  // anchor_class: "conv_depthwise", "conv_pointwise", "conv_spatial", "linear", "gemv",
  // "matmul"), fitted on this machine from timed groups (bench/networks/calibrate.py); a class
  // not listed runs at the peak, as the plain roofline assumes.
  std::map<std::string, double> anchor_efficiency;
  double efficiency(const std::string& anchor_class) const;

  const MemoryLevel& main_memory() const { return levels.back(); }
  // The fastest level whose capacity holds `bytes` (main memory if none does).
  const MemoryLevel& level_holding(double bytes) const;
  const MemoryLevel* level(const std::string& name) const;
};

// Built-in profiles: "epyc-avx512-2c" (an AVX-512 machine of this kind), "x86-avx2-8c", "h200",
// for planning for another machine. The default everywhere is "host" (fusion/hardware/host.h):
// the machine that runs, measured once and cached.
std::vector<std::string> builtin_profile_names();
// "host" (this machine, host.h), a built-in by name, or a profile JSON file by path;
// std::runtime_error names what is wrong.
HardwareProfile load_profile(const std::string& name_or_path);
HardwareProfile builtin_profile(const std::string& name);
std::string profile_to_json(const HardwareProfile& p);
HardwareProfile profile_from_json(const std::string& text, const std::string& source);

}  // namespace opfuse::fusion
