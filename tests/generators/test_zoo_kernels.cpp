// Every zoo model, AOT-built fused, unfused and (on the host) with each of Halide's CPU
// autoschedulers, against the reference executor. The target
// comes from the test's command line (host or host-opencl), so one source serves both.
#include <doctest/doctest.h>

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

}  // namespace

TEST_CASE("zoo kernels equal the reference executor") {
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
