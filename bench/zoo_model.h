// What the benchmarks and the report need to know about a zoo model under a strategy: its
// graph, inputs and params held in memory, output buffers, and the cost model's view.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/hardware/profile.h"
#include "runtime/kernel.h"

namespace opfuse::bench {

// A zoo model's graph (models_dir/<size>/<model>.json, size "cpu" or "gpu") with random inputs (from `seed`), its
// params and zeroed outputs in memory, and the runtime tensors over them, in a generated
// kernel's argument order (inputs, then params; outputs). Not copyable: the tensors point
// into the maps.
struct ModelTensors {
  graph::Graph graph;
  graph::TensorMap inputs, params, outputs;
  std::vector<runtime::Tensor> ins, outs;
  // What `ins` points at: page-aligned copies of inputs and params (outputs are written to
  // `outputs` directly, where vendor baselines and the checks read them).
  std::vector<std::unique_ptr<float, void (*)(void*)>> aligned_copies;
  std::map<std::string, const float*> in_data;  // input or param name -> its aligned copy
  const float* in(const std::string& name) const { return in_data.at(name); }

  ModelTensors(const std::string& models_dir, const std::string& model, uint64_t seed,
               const std::string& size = "cpu");
  ModelTensors(const ModelTensors&) = delete;
  ModelTensors& operator=(const ModelTensors&) = delete;
};

struct ZooCase : ModelTensors {
  double flops = 0;              // sum of the ops' FLOPs
  double compulsory_bytes = 0;   // graph inputs + params + outputs: what any schedule must move
  double predicted_fused_s = 0;  // the planner's prediction for the fused plan
  double predicted_unfused_s = 0;
  int kernels_fused = 0, kernels_unfused = 0;

  ZooCase(const std::string& models_dir, const std::string& model,
          const fusion::HardwareProfile& profile);
  // The roofline bound of the whole model: max(FLOPs / P_peak, bytes / B).
  double roofline_s(double peak_flops, double bandwidth_Bps) const;
};

}  // namespace opfuse::bench
