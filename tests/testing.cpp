#include "tests/testing.h"

#include "fusion/ops/realize.h"
#include "fusion/reference/executor.h"

namespace opfuse::testing {

void check_root_matches_reference(const graph::Graph& g, reference::Tolerance tol, uint64_t seed) {
  const graph::TensorMap inputs = graph::random_inputs(g, seed);
  const graph::TensorMap got = ops::realize_root(g, inputs);
  const graph::TensorMap want = reference::run(g, inputs);
  for (const auto& out : g.outputs()) {
    INFO("graph " << g.name << ", output " << out);
    REQUIRE(got.at(out).shape == want.at(out).shape);
    const reference::Comparison c = reference::compare(got.at(out).data, want.at(out).data, tol);
    CHECK_MESSAGE(c.ok(), c.summary());
  }
}

}  // namespace opfuse::testing
