#include "tests/kernel_check.h"

#include <doctest/doctest.h>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/json_io.h"
#include "fusion/reference/executor.h"

namespace opfuse::testing {

void check_zoo_kernel(const std::string& models_dir, const std::string& model,
                      const std::string& strategy, const std::string& target) {
  INFO(model << "/" << strategy << "/" << target);
  const graph::Graph g = graph::load_graph_json(models_dir + "/cpu/" + model + ".json");
  const graph::TensorMap inputs = graph::random_inputs(g, 11);
  const graph::TensorMap params = graph::param_values(g);
  const graph::TensorMap want = reference::run(g, inputs, params);

  const runtime::Kernel& k = runtime::Registry::global().find(model, strategy, target);
  std::vector<runtime::Tensor> ins, outs;
  for (const auto& name : g.inputs())
    ins.push_back(runtime::Tensor::f32(inputs.at(name).data.data(), inputs.at(name).shape));
  for (const auto& name : g.params())
    ins.push_back(runtime::Tensor::f32(params.at(name).data.data(), params.at(name).shape));
  graph::TensorMap got;
  for (const auto& name : g.outputs()) {
    got[name] = graph::HostTensor(g.tensor(name).shape);
    outs.push_back(runtime::Tensor::f32(got[name].data.data(), got[name].shape));
  }
  k.run(ins, outs);
  for (const auto& name : g.outputs()) {
    INFO("output " << name);
    const reference::Comparison c =
        reference::compare(got[name].data, want.at(name).data, kZooTolerance);
    CHECK_MESSAGE(c.ok(), c.summary());
  }
}

}  // namespace opfuse::testing
