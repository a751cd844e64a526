#include "fusion/frontend/load_model.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fusion/frontend/channels_last.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"

namespace opfuse::fusion {

graph::Graph load_model(const std::string& path, std::vector<std::string>* rewrites) {
  if (std::filesystem::path(path).extension() != ".onnx") return graph::load_graph_json(path);
  graph::Graph g = graph::import_onnx(path);
  std::vector<std::string> log = canonicalize(g);
  // OPFUSE_CHANNELS_LAST=0 keeps an exported CNN's NCHW layout (to compare, or to bisect).
  const char* cl = std::getenv("OPFUSE_CHANNELS_LAST");
  if (!cl || std::strcmp(cl, "0") != 0) {
    for (auto& line : to_channels_last(g)) log.push_back(std::move(line));
  }
  if (rewrites) *rewrites = std::move(log);
  return g;
}

}  // namespace opfuse::fusion
