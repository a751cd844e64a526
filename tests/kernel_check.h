// Checks an AOT-built zoo kernel (through the runtime registry) against the reference
// executor. No Halide JIT here: binaries that use this may also load PoCL.
#pragma once

#include <string>

#include "fusion/reference/compare.h"
#include "runtime/kernel.h"

namespace opfuse::testing {

// Tolerance for a whole zoo model against the reference: chains of up to ~17 ops whose f32
// reductions (<= 1024 terms) differ from the double reference by ~K * 2^-24 of the sum's
// scale (tests/ops/test_ops.cpp), FMA contraction and the schedule's summation order
// included; the op-level 1e-4 is kept, doubled on the absolute side for chains.
inline constexpr reference::Tolerance kZooTolerance{1e-4, 2e-4};

// Runs `model` (models/cpu/<model>.json) with kernel model/strategy/target on random inputs
// and the graph's params, and CHECKs every output against the reference executor.
void check_zoo_kernel(const std::string& models_dir, const std::string& model,
                      const std::string& strategy, const std::string& target);

}  // namespace opfuse::testing
