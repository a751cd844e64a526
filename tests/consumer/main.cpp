// Calls the fused kernel built from scaled_gelu.json and checks it with a plain loop.
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/kernel.h"

int main() {
  using opfuse::runtime::Registry;
  using opfuse::runtime::Tensor;
  std::vector<float> x(400), scale{0.5f}, shift(100), y(400);
  for (int i = 0; i < 400; ++i) x[i] = -2.0f + 0.01f * float(i);
  for (int i = 0; i < 100; ++i) shift[i] = 0.001f * float(i);
  const auto& k = Registry::global().find("scaled_gelu", "fused", "host");
  k.run({Tensor::f32(x.data(), {4, 100}), Tensor::f32(scale.data(), {1}),
         Tensor::f32(shift.data(), {100})},
        {Tensor::f32(y.data(), {4, 100})});
  int bad = 0;
  for (int i = 0; i < 400; ++i) {
    const double t = x[i] * 0.5 + shift[i % 100];
    const double want = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
    if (std::fabs(y[i] - want) > 1e-5) ++bad;
  }
  std::printf("consumer: %d of 400 outputs differ from the reference\n", bad);
  return bad == 0 ? 0 : 1;
}
