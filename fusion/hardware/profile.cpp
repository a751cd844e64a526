#include "fusion/hardware/profile.h"

#include "fusion/hardware/host.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace opfuse::fusion {

using json = nlohmann::ordered_json;

const MemoryLevel& HardwareProfile::level_holding(double bytes) const {
  for (const MemoryLevel& l : levels) {
    if (bytes <= l.size_bytes) return l;
  }
  return main_memory();
}

const MemoryLevel* HardwareProfile::level(const std::string& n) const {
  for (const MemoryLevel& l : levels) {
    if (l.name == n) return &l;
  }
  return nullptr;
}

namespace {

constexpr double KiB = 1024, MiB = 1024 * KiB, GB = 1e9, GFLOP = 1e9, TFLOP = 1e12;
constexpr double ns = 1e-9, us = 1e-6;

// This machine kind: 2 AMD EPYC (Zen 5) cores, AVX-512 with two full-width FMA pipes
// (2 pipes x 16 lanes x 2 FLOP x 2 cores x ~4.1 GHz = 525 GFLOP/s; oneDNN's 3x3 conv reaches
// ~500 here). Caches from sysfs: 48 KiB L1d and 1 MiB L2 per core, 32 MiB L3. Peak,
// bandwidths and latency as `opfuse calibrate` measured them on this machine kind
// (2026-11-29: 532 GFLOP/s; 561, 510, 209, 48 GB/s; 165 ns for a random DRAM line, TLB
// misses included).
HardwareProfile epyc_avx512_2c() {
  HardwareProfile p;
  p.name = "epyc-avx512-2c";
  p.peak_flops_f32 = 530 * GFLOP;
  p.peak_flops_f16 = 530 * GFLOP;  // f16 storage, f32 arithmetic
  p.levels = {{"L1", 2 * 48 * KiB, 560 * GB},
              {"L2", 2 * 1 * MiB, 500 * GB},
              {"LLC", 32 * MiB, 200 * GB},
              {"DRAM", 24.0 * 1024 * MiB, 48 * GB}};
  p.memory_latency_s = 165 * ns;
  p.launch_overhead_s = 2 * us;  // Halide parallel-for dispatch to the thread pool
  p.cores = 2;
  p.vector_bytes = 64;
  p.vector_registers = 32;
  return p;
}

// A generic 8-core AVX2 desktop: 2 x 256-bit FMA pipes, ~3.5 GHz, dual-channel DDR4.
HardwareProfile x86_avx2_8c() {
  HardwareProfile p;
  p.name = "x86-avx2-8c";
  p.peak_flops_f32 = 8 * 32 * 3.5 * GFLOP;  // 8 cores x 32 FLOP/cycle x 3.5 GHz = 896
  p.peak_flops_f16 = p.peak_flops_f32;
  p.levels = {{"L1", 8 * 32 * KiB, 1500 * GB},
              {"L2", 8 * 512 * KiB, 700 * GB},
              {"LLC", 16 * MiB, 250 * GB},
              {"DRAM", 32.0 * 1024 * MiB, 40 * GB}};
  p.memory_latency_s = 90 * ns;
  p.launch_overhead_s = 3 * us;
  p.cores = 8;
  p.vector_bytes = 32;
  p.vector_registers = 16;
  return p;
}

// NVIDIA H200 SXM: 132 SMs, 141 GB HBM3e at ~4.8 TB/s, 50 MB L2, up to 228 KB shared memory
// per SM (227 KB per block). Dense peaks: ~67 TFLOP/s fp32 (non-tensor), ~990 TFLOP/s fp16
// with tensor cores.
HardwareProfile h200() {
  HardwareProfile p;
  p.name = "h200";
  p.gpu = true;
  p.peak_flops_f32 = 67 * TFLOP;
  p.peak_flops_f16 = 990 * TFLOP;
  p.levels = {{"SMEM", 132 * 228 * KiB, 33000 * GB},
              {"L2", 50 * MiB, 12000 * GB},
              {"HBM", 141 * GB, 4800 * GB}};
  p.memory_latency_s = 600 * ns;
  p.launch_overhead_s = 4 * us;
  p.cores = 132;
  p.registers_per_thread = 255;
  p.shared_memory_per_block_bytes = 227 * KiB;
  p.max_threads_per_block = 1024;
  return p;
}

double num(const json& j, const std::string& key, const std::string& source, double fallback,
           bool required = false) {
  if (!j.contains(key)) {
    if (required) throw std::runtime_error(source + ": missing key '" + key + "'");
    return fallback;
  }
  if (!j[key].is_number()) throw std::runtime_error(source + ": '" + key + "' must be a number");
  return j[key].get<double>();
}

}  // namespace

Isa isa_named(const std::string& name) {
  if (name == "avx512") return {"avx512", 64, 32};
  if (name == "avx2") return {"avx2", 32, 16};
  if (name == "sse4") return {"sse4", 16, 16};
  throw std::runtime_error("unknown ISA '" + name + "' (avx512, avx2, sse4)");
}

std::vector<std::string> builtin_profile_names() {
  return {"epyc-avx512-2c", "x86-avx2-8c", "h200"};
}

HardwareProfile builtin_profile(const std::string& name) {
  if (name == "epyc-avx512-2c") return epyc_avx512_2c();
  if (name == "x86-avx2-8c") return x86_avx2_8c();
  if (name == "h200") return h200();
  throw std::runtime_error("no built-in hardware profile '" + name +
                           "' (host, or built in: epyc-avx512-2c, x86-avx2-8c, h200; or a .json file)");
}

HardwareProfile load_profile(const std::string& name_or_path) {
  if (name_or_path == "host" && !std::filesystem::exists(name_or_path)) return host_profile();
  if (!std::filesystem::exists(name_or_path)) return builtin_profile(name_or_path);
  std::ifstream in(name_or_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return profile_from_json(ss.str(), name_or_path);
}

double HardwareProfile::efficiency(const std::string& anchor_class) const {
  const auto it = anchor_efficiency.find(anchor_class);
  return it == anchor_efficiency.end() ? 1.0 : it->second;
}

std::string profile_to_json(const HardwareProfile& p) {
  json j;
  j["format"] = "opfuse.profile";
  j["version"] = 1;
  j["name"] = p.name;
  j["gpu"] = p.gpu;
  j["peak_flops_f32"] = p.peak_flops_f32;
  j["peak_flops_f16"] = p.peak_flops_f16;
  j["levels"] = json::array();
  for (const auto& l : p.levels) {
    j["levels"].push_back(
        {{"name", l.name}, {"size_bytes", l.size_bytes}, {"bandwidth_Bps", l.bandwidth_Bps}});
  }
  j["memory_latency_s"] = p.memory_latency_s;
  j["launch_overhead_s"] = p.launch_overhead_s;
  j["cores"] = p.cores;
  j["vector_bytes"] = p.vector_bytes;
  j["vector_registers"] = p.vector_registers;
  j["registers_per_thread"] = p.registers_per_thread;
  j["shared_memory_per_block_bytes"] = p.shared_memory_per_block_bytes;
  j["max_threads_per_block"] = p.max_threads_per_block;
  j["numa_nodes"] = p.numa_nodes;
  j["numa_local_latency_s"] = p.numa_local_latency_s;
  j["numa_remote_latency_s"] = p.numa_remote_latency_s;
  j["alpha_cache"] = p.alpha_cache;
  j["alpha_conflict"] = p.alpha_conflict;
  j["alpha_divergence"] = p.alpha_divergence;
  if (!p.anchor_efficiency.empty()) j["anchor_efficiency"] = p.anchor_efficiency;
  return j.dump(2) + "\n";
}

HardwareProfile profile_from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "opfuse.profile") {
    throw std::runtime_error(source + ": not an opfuse profile (\"format\": \"opfuse.profile\")");
  }
  HardwareProfile p;
  p.name = j.value("name", source);
  p.gpu = j.value("gpu", false);
  p.peak_flops_f32 = num(j, "peak_flops_f32", source, 0, true);
  p.peak_flops_f16 = num(j, "peak_flops_f16", source, p.peak_flops_f32);
  if (!j.contains("levels") || !j["levels"].is_array() || j["levels"].empty()) {
    throw std::runtime_error(source + ": 'levels' must list the memory levels, main memory last");
  }
  for (const auto& l : j["levels"]) {
    p.levels.push_back({l.value("name", "?"), num(l, "size_bytes", source, 0, true),
                        num(l, "bandwidth_Bps", source, 0, true)});
    if (p.levels.back().bandwidth_Bps <= 0)
      throw std::runtime_error(source + ": bandwidths must be > 0");
  }
  if (p.peak_flops_f32 <= 0) throw std::runtime_error(source + ": peak_flops_f32 must be > 0");
  p.memory_latency_s = num(j, "memory_latency_s", source, 100e-9);
  p.launch_overhead_s = num(j, "launch_overhead_s", source, 0);
  p.cores = int(num(j, "cores", source, 1));
  p.vector_bytes = int(num(j, "vector_bytes", source, 16));
  p.vector_registers = int(num(j, "vector_registers", source, 16));
  p.registers_per_thread = int(num(j, "registers_per_thread", source, 0));
  p.shared_memory_per_block_bytes = num(j, "shared_memory_per_block_bytes", source, 0);
  p.max_threads_per_block = int(num(j, "max_threads_per_block", source, 0));
  p.numa_nodes = int(num(j, "numa_nodes", source, 1));
  p.numa_local_latency_s = num(j, "numa_local_latency_s", source, 0);
  p.numa_remote_latency_s = num(j, "numa_remote_latency_s", source, 0);
  p.alpha_cache = num(j, "alpha_cache", source, 0);
  p.alpha_conflict = num(j, "alpha_conflict", source, 0);
  p.alpha_divergence = num(j, "alpha_divergence", source, 0);
  if (j.contains("anchor_efficiency")) {
    const json& e = j["anchor_efficiency"];
    if (!e.is_object()) {
      throw std::runtime_error(source +
                               ": 'anchor_efficiency' must map anchor classes to shares "
                               "of the peak");
    }
    for (const auto& [cls, v] : e.items()) {
      if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 1) {
        throw std::runtime_error(source + ": anchor_efficiency." + cls + " must be in (0, 1], is " +
                                 v.dump());
      }
      p.anchor_efficiency[cls] = v.get<double>();
    }
  }
  return p;
}

}  // namespace opfuse::fusion
