// Checks an AOT-built zoo kernel (through the runtime registry) against the reference
// executor. No Halide JIT here: binaries that use this may also load PoCL.
#pragma once

#include <exception>
#include <string>

#include "fusion/reference/compare.h"
#include "runtime/kernel.h"

namespace opfuse::testing {

// Tolerance for a whole zoo model: the graph tolerance (fusion/reference/compare.h).
inline constexpr reference::Tolerance kZooTolerance = reference::kGraphTolerance;

// Runs `model` (models/cpu/<model>.json) with kernel model/strategy/target on random inputs
// and the graph's params, and CHECKs every output against the reference executor.
void check_zoo_kernel(const std::string& models_dir, const std::string& model,
                      const std::string& strategy, const std::string& target);

// What `fn` throws (its what()), or "" when it returns: for checking an error's message.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace opfuse::testing
