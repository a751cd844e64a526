// Reference for the elementwise chain y = square(relu(scale * x + bias)): plain C++ loops,
// no Halide, one pass per operator with the intermediates materialised, exactly as an
// unfused executor would run it. It is the oracle the fused kernel is checked against.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "fusion/reference/compare.h"

namespace opfuse::reference {

inline std::vector<float> ew_chain(const std::vector<float>& x, float scale, float bias) {
  std::vector<float> t(x.size()), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) t[i] = x[i] * scale;
  for (std::size_t i = 0; i < x.size(); ++i) t[i] = t[i] + bias;
  for (std::size_t i = 0; i < x.size(); ++i) t[i] = std::max(t[i], 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = t[i] * t[i];
  return y;
}

// Tolerance of a fused ew_chain against this reference, for |x*scale + bias| <= 8. The fused
// kernel may contract x*scale + bias into one FMA (Halide and OpenCL C both allow it), which
// changes t = x*scale + bias by at most 0.5 ulp(x*scale) <= 2^-24 * 8; squaring doubles a
// relative error and adds 0.5 ulp of its own. Hence atol = 2 * 8 * 2^-24 * 8 ~ 8e-6 covers
// small t, and rtol = 4 * 2^-24 ~ 2.4e-7 the rounding of the square.
inline constexpr Tolerance kEwChainTolerance{2.4e-7, 8e-6};

}  // namespace opfuse::reference
