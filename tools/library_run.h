// A compiled library (`opfuse compile --shared`) run on a model's graph tensors through
// runtime::Model: its arguments matched to the graph's inputs (and params, for a library that
// takes its weights as arguments) by their C names. No libHalide: a process that runs an
// OpenCL library on PoCL uses it too.
#pragma once

#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "runtime/model.h"

namespace opfuse::tools {

class LibraryRun {
 public:
  LibraryRun(const std::string& path, const graph::Graph& g, const graph::TensorMap& inputs);
  void run();
  graph::TensorMap outputs() const;

 private:
  runtime::Model model_;
  const graph::Graph& g_;
  std::vector<Halide::Runtime::Buffer<>> storage_;
  std::vector<runtime::Tensor> ins_;
  std::vector<runtime::OwnedTensor> outs_;
};

}  // namespace opfuse::tools
