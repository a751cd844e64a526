// Every zoo model, AOT-built fused, unfused and (on the host) with each of Halide's CPU
// autoschedulers, against the reference executor. The target comes from OPFUSE_TEST_TARGET
// (host, x86-avx2, x86-avx512 or host-opencl), so one source serves them all; the AVX-512
// build is skipped, visibly, on a CPU without AVX-512.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "tests/kernel_check.h"

namespace {

std::vector<std::string> zoo() {
  std::istringstream in(OPFUSE_ZOO_MODELS);
  std::vector<std::string> out;
  for (std::string m; std::getline(in, m, ',');) out.push_back(m);
  return out;
}

std::string target() {
  const char* t = std::getenv("OPFUSE_TEST_TARGET");
  return t ? t : "host";
}

// Halide's avx512_skylake feature set: F, CD, BW, DQ, VL.
bool cpu_runs_avx512_skylake() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

}  // namespace

TEST_CASE("zoo kernels equal the reference executor") {
  if (target() == "x86-avx512" && !cpu_runs_avx512_skylake()) {
    // Registered with ctest's skip code: the summary says "Skipped", with this reason.
    std::puts("SKIPPED: this CPU has no AVX-512 (F, CD, BW, DQ, VL): the x86-avx512 build is "
              "tested where it has");
    std::exit(77);
  }
  const std::vector<std::string> models = zoo();
  REQUIRE(models.size() == 11);
  for (const auto& model : models) {
    for (const char* strategy : {"fused", "unfused"}) {
      opfuse::testing::check_zoo_kernel(OPFUSE_MODELS_DIR, model, strategy, target());
    }
    if (target() != "host") continue;  // the autoschedulers are built for the host only
    for (const char* strategy : {"Mullapudi2016", "Adams2019", "Li2018"}) {
      opfuse::testing::check_zoo_kernel(OPFUSE_MODELS_DIR, model, strategy, target());
    }
  }
}
