// Helpers shared by the test suites.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/reference/compare.h"

namespace opfuse::testing {

// Runs `g` through the Halide root schedule and the reference executor on the same random
// inputs and checks every output within `tol`.
void check_root_matches_reference(const graph::Graph& g, reference::Tolerance tol,
                                  uint64_t seed = 7);

// Checks that `fn` throws GraphError whose message contains every one of `needles`.
template <typename Fn>
void check_graph_error(Fn fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    FAIL("expected a GraphError");
  } catch (const graph::GraphError& e) {
    const std::string what = e.what();
    INFO("message: " << what);
    for (const auto& n : needles)
      CHECK_MESSAGE(what.find(n) != std::string::npos, "missing '" << n << "'");
  }
}

}  // namespace opfuse::testing
