// Any bytes as an ONNX model: a GraphError, or a validated graph that canonicalises (every
// rewrite keeps it valid) and plans.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"
#include "fusion/planner/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  opfuse::graph::Graph g;
  try {
    g = opfuse::graph::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size),
                                         "fuzz");
  } catch (const opfuse::graph::GraphError&) {
    return 0;
  }
  opfuse::fusion::canonicalize(g);  // throws only on a bug: the fuzzer reports it
  static const opfuse::fusion::RooflineCostModel model(
      opfuse::fusion::builtin_profile("epyc-avx512-2c"));
  opfuse::fusion::plan_fusion(g, model);
  return 0;
}
