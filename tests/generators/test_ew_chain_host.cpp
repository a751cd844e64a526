// The host (CPU) fused elementwise chain against the plain C++ reference.
#include <HalideBuffer.h>
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "ew_chain_host.h"
#include "fusion/reference/ew_chain.h"
#include "runtime/errors.h"

using opfuse::runtime::check;
using opfuse::runtime::KernelError;

namespace {

std::vector<float> random_input(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

}  // namespace

TEST_CASE("ew_chain_host equals the C++ reference") {
  // Sizes cover: one element, less than one vector, a non-multiple of the vector width,
  // exactly one parallel task, several tasks with a ragged tail.
  for (int n : {1, 7, 37, 65536, 1000003}) {
    CAPTURE(n);
    std::vector<float> x = random_input(n, 1234u + n), y(n, -1.0f);
    Halide::Runtime::Buffer<float, 1> in(x.data(), n), out(y.data(), n);
    check(ew_chain_host(in, 0.75f, 0.5f, out), "ew_chain_host");
    // Tolerance: kEwChainTolerance (FMA contraction of scale * x + bias; see its comment).
    const auto cmp = opfuse::reference::compare(y, opfuse::reference::ew_chain(x, 0.75f, 0.5f),
                                                opfuse::reference::kEwChainTolerance);
    CHECK_MESSAGE(cmp.ok(), cmp.summary());
  }
}

TEST_CASE("ew_chain_host refuses an input smaller than its output with a clear error") {
  std::vector<float> x(100, 1.0f), y(200, 0.0f);
  Halide::Runtime::Buffer<float, 1> in(x.data(), 100), out(y.data(), 200);
  try {
    check(ew_chain_host(in, 1.0f, 0.0f, out), "ew_chain_host");
    FAIL("a call that reads past the input's end must fail");
  } catch (const KernelError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.code() != 0);
    CHECK(what.find("ew_chain_host") != std::string::npos);  // which kernel
    CHECK(what.find("input") != std::string::npos);          // which buffer
    CHECK(what.find("199") != std::string::npos);            // which index was out of range
  }
  // Nothing was written: the bounds check runs before the loop nest.
  CHECK(y == std::vector<float>(200, 0.0f));
}
