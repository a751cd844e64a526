#include "tools/demo.h"

#include <HalideBuffer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "ew_chain_host.h"
#include "fusion/reference/ew_chain.h"
#include "runtime/errors.h"

namespace opfuse::tools {

int run_demo(const DemoOptions& options) {
  const int n = options.elements;
  const float scale = 1.5f, bias = -0.25f;
  std::vector<float> x(n), y(n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& v : x) v = dist(rng);

  Halide::Runtime::Buffer<float, 1> in(x.data(), n), out(y.data(), n);
  using clock = std::chrono::steady_clock;
  double best_s = 1e30;
  for (int r = 0; r < options.repeats; ++r) {
    auto t0 = clock::now();
    runtime::check(ew_chain_host(in, scale, bias, out), "ew_chain_host");
    best_s = std::min(best_s, std::chrono::duration<double>(clock::now() - t0).count());
  }

  const std::vector<float> ref = reference::ew_chain(x, scale, bias);
  // The fused kernel may contract scale * x + bias into an FMA; kEwChainTolerance bounds
  // the difference that makes.
  const reference::Comparison cmp = reference::compare(y, ref, reference::kEwChainTolerance);

  const double bytes = 2.0 * n * sizeof(float);  // fused: one read, one write (7.1.1)
  std::printf("opfuse demo: fused elementwise chain scale -> bias -> relu -> square\n");
  std::printf("  elements            %d (%.1f MiB in, %.1f MiB out)\n", n,
              n * 4.0 / (1 << 20), n * 4.0 / (1 << 20));
  std::printf("  fused kernel        %.3f ms best of %d, %.1f GB/s\n", best_s * 1e3,
              options.repeats, bytes / best_s / 1e9);
  std::printf("  check vs C++ ref    %s (rtol %.1e, atol %.1e) -> %s\n", cmp.summary().c_str(),
              reference::kEwChainTolerance.rtol, reference::kEwChainTolerance.atol,
              cmp.ok() ? "PASS" : "FAIL");
  return cmp.ok() ? 0 : 1;
}

}  // namespace opfuse::tools
