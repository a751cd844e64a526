#include "tests/kernel_check.h"

#include <doctest/doctest.h>

#include "bench/zoo_model.h"
#include "fusion/reference/executor.h"

namespace opfuse::testing {

void check_zoo_kernel(const std::string& models_dir, const std::string& model,
                      const std::string& strategy, const std::string& target) {
  INFO(model << "/" << strategy << "/" << target);
  bench::ModelTensors c(models_dir, model, 11);
  const graph::TensorMap want = reference::run(c.graph, c.inputs, c.params);
  runtime::Registry::global().find(model, strategy, target).run(c.ins, c.outs);
  for (const auto& name : c.graph.outputs()) {
    INFO("output " << name);
    const reference::Comparison cmp =
        reference::compare(c.outputs[name].data, want.at(name).data, kZooTolerance);
    CHECK_MESSAGE(cmp.ok(), cmp.summary());
  }
}

}  // namespace opfuse::testing
