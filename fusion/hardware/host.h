// The "host" hardware profile: the machine that runs, the default wherever a profile is not
// named.
//
//   ISA, vector registers   from the CPU (cpuid, as Halide's host target reads it), or the
//                           ISA of the target being compiled for (the generator passes it)
//   cores, cache sizes      from the OS (sysfs, sysconf)
//   FMA peak, bandwidths,   measured by `calibrate` once per machine and ISA, and cached
//   latency                 outside the clone: $OPFUSE_PROFILE_CACHE, else
//                           $XDG_CACHE_HOME/opfuse/profiles, else ~/.cache/opfuse/profiles,
//                           one file per (CPU model, ISA, cores). A one-line note on stderr
//                           says when it is measured.
//   anchor shares, a_cache  measured by `opfuse calibrate-anchors` (tools/anchor_calibration.h,
//                           a later stage: it runs the schedules) into the same file; a note
//                           on stderr says when the cached profile has none.
//
// Plans made for the host are reproducible on one machine (the cache is read, not
// re-measured); delete the file to measure again. An ISA the CPU cannot run (an AVX-512 build
// on an AVX2 machine) gets the host's measurement scaled by the vector width, named so.
#pragma once

#include <string>
#include <vector>

#include "fusion/hardware/profile.h"

namespace opfuse::fusion {

// The widest ISA this CPU runs.
Isa host_isa();
// The FMA ISAs this CPU runs, widest first (avx512, avx2; none on an older CPU): those whose
// host profile is measured.
std::vector<Isa> host_fma_isas();
// Can this CPU run code for `isa`?
bool host_runs(const Isa& isa);
// "AMD EPYC family 25 model 1" (from /proc/cpuinfo): with the ISA and the core count, the key
// of the cached calibration.
std::string host_cpu_model();

// The host's profile for code of `isa`; measures and caches it if no cached profile exists
// (`quick`: short measurements, for tests).
HardwareProfile host_profile(const Isa& isa = host_isa(), bool quick = false);
// Where host_profile keeps its measurement for `isa`.
std::string host_profile_cache_path(const Isa& isa);
// Replaces the cached profile for `isa` (under the cache's lock; a reader sees the old file or
// the new one); std::runtime_error naming the file when it cannot be written.
void store_host_profile(const Isa& isa, const HardwareProfile& p);

}  // namespace opfuse::fusion
