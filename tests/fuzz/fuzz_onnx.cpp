// Any bytes as an ONNX model: a GraphError or a validated graph.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusion/graph/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    opfuse::graph::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size),
                                     "fuzz");
  } catch (const opfuse::graph::GraphError&) {
  }
  return 0;
}
