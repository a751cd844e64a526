// opfuse_host_profile: measures and caches the host profile (fusion/hardware/host.h) for
// every ISA this CPU runs, unless cached already. tools/setup.sh runs it before the build, on
// a quiet machine: the generators of a parallel build would otherwise measure while the
// other cores compile (measured here: half the FMA peak).
#include <cstdio>
#include <exception>

#include "fusion/hardware/host.h"

int main() {
  try {
    for (const opfuse::fusion::Isa& isa : opfuse::fusion::host_fma_isas()) {
      const opfuse::fusion::HardwareProfile p = opfuse::fusion::host_profile(isa);
      std::printf("host profile %s: FMA peak %.0f GFLOP/s, DRAM %.1f GB/s (%s)\n", isa.name.c_str(),
                  p.peak_flops_f32 / 1e9, p.main_memory().bandwidth_Bps / 1e9,
                  opfuse::fusion::host_profile_cache_path(isa).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opfuse_host_profile: %s\n", e.what());
    return 1;
  }
  return 0;
}
