// `calibrate`: measures the running machine and writes it as a HardwareProfile.
//
//   bandwidth per level   STREAM-like copy and triad, all cores, at a working set sized for
//                         each cache level (half its capacity) and for DRAM (8x the LLC);
//                         the better of the two kernels counts, write-allocate traffic not
//   FMA peak              independent FMA chains on the ISA's vector unit (AVX-512 or AVX2),
//                         on every core: the best of several chain counts, each small enough
//                         for the ISA's register file (no spills) and large enough to cover
//                         the FMA latency of two pipes, over three passes
//   memory latency        a pointer chase through a random cyclic permutation of 64-byte
//                         lines in a DRAM-sized buffer
//
// Cache sizes come from the OS (sysconf); the launch overhead and the profile's other fields
// are taken from `base` (a built-in profile).
#pragma once

#include "fusion/hardware/host.h"
#include "fusion/hardware/profile.h"

namespace opfuse::fusion {

struct CalibrationOptions {
  double seconds_per_measurement = 0.2;  // each kernel repeats until this much time has passed
  bool quick = false;                    // smaller DRAM buffer, shorter runs (tests, CI)
  Isa isa = host_isa();                  // whose FMA peak and registers (the CPU must run it)
};

HardwareProfile calibrate(const HardwareProfile& base, const CalibrationOptions& options = {});

// The pieces, for tests and benchmarks.
// This machine's data cache of `level` (1, 2: per core; 3: shared), in bytes: from sysfs, else
// sysconf, else `fallback`.
double host_cache_bytes(int level, double fallback);
double measure_fma_peak_flops(int threads, double seconds, const Isa& isa);
double measure_fma_peak_flops(int threads, double seconds);  // the host's widest ISA
double measure_bandwidth_Bps(size_t working_set_bytes, int threads, double seconds);
double measure_latency_s(size_t buffer_bytes, double seconds);

}  // namespace opfuse::fusion
