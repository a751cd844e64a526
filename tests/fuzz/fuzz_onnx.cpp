// Any bytes as an ONNX model: a GraphError, or a validated graph that canonicalises (every
// rewrite keeps it valid), goes channels-last where it has a convolution (a lower threshold
// than load_model's, so small inputs reach the pass) and plans. External data resolves in a folder of its own beside the
// work directory, holding one 4 KiB file, w.bin: locations, offsets and lengths are fuzzed
// against it (and anything outside the folder must be refused).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fusion/cost/cost_model.h"
#include "fusion/frontend/channels_last.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"
#include "fusion/planner/planner.h"

namespace {

std::string external_dir() {
  const std::filesystem::path dir = std::filesystem::current_path() / "fuzz-external";
  std::filesystem::create_directories(dir);
  std::ofstream w(dir / "w.bin", std::ios::binary);
  for (int i = 0; i < 1024; ++i) {
    const float v = float(i % 17) * 0.125f - 1.0f;
    w.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  return dir.string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = external_dir();
  opfuse::graph::Graph g;
  try {
    g = opfuse::graph::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size),
                                         "fuzz", dir);
  } catch (const opfuse::graph::GraphError&) {
    return 0;
  }
  opfuse::fusion::canonicalize(g);  // throws only on a bug: the fuzzer reports it
  opfuse::fusion::to_channels_last(g, 1);
  static const opfuse::fusion::RooflineCostModel model(
      opfuse::fusion::builtin_profile("epyc-avx512-2c"));
  opfuse::fusion::plan_fusion(g, model);
  return 0;
}
