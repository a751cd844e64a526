// Comparing a kernel's output with the reference executor's.
//
// Fusion reorders and contracts floating point (pitfall 5): a fused a*b+c may become one FMA
// that rounds once where the unfused chain rounds twice. Results are therefore compared
// element-wise as |got - want| <= atol + rtol * |want|, with tolerances chosen per operator
// chain by the caller, who says why.
#pragma once

#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

namespace opfuse::reference {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// Tolerance for a whole graph (a zoo model, a random graph, an explored plan) against the
// reference: chains of up to ~17 ops whose f32 reductions (<= 1024 terms) differ from the
// double reference by ~K * 2^-24 of the sum's scale (tests/ops/test_ops.cpp), FMA
// contraction and the schedule's summation order included; the op-level 1e-4 is kept,
// doubled on the absolute side for chains.
inline constexpr Tolerance kGraphTolerance{1e-4, 2e-4};

struct Comparison {
  std::size_t mismatches = 0;   // elements outside the tolerance (NaN vs non-NaN counts)
  std::size_t worst_index = 0;  // element with the largest |got - want|
  double worst_abs_error = 0;
  bool ok() const { return mismatches == 0; }
  std::string summary() const {
    std::ostringstream os;
    os << mismatches << " mismatches, max |error| " << worst_abs_error << " at element "
       << worst_index;
    return os.str();
  }
};

inline Comparison compare(const float* got, const float* want, std::size_t n, Tolerance tol) {
  Comparison c;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) != std::isnan(w)) ++c.mismatches;
      continue;
    }
    const double err = (g == w) ? 0.0 : std::fabs(g - w);  // equal infinities agree
    if (err > c.worst_abs_error) c.worst_abs_error = err, c.worst_index = i;
    if (err > tol.atol + tol.rtol * std::fabs(w)) ++c.mismatches;
  }
  return c;
}

inline Comparison compare(const std::vector<float>& got, const std::vector<float>& want,
                          Tolerance tol) {
  if (got.size() != want.size()) {
    Comparison c;
    c.mismatches = got.size() > want.size() ? got.size() : want.size();
    return c;
  }
  return compare(got.data(), want.data(), got.size(), tol);
}

}  // namespace opfuse::reference
