#include "fusion/frontend/load_model.h"

#include <filesystem>

#include "fusion/graph/json_io.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"

namespace opfuse::fusion {

graph::Graph load_model(const std::string& path, std::vector<std::string>* rewrites) {
  if (std::filesystem::path(path).extension() != ".onnx") return graph::load_graph_json(path);
  graph::Graph g = graph::import_onnx(path);
  std::vector<std::string> log = canonicalize(g);
  if (rewrites) *rewrites = std::move(log);
  return g;
}

}  // namespace opfuse::fusion
