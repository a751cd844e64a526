#include "fusion/frontend/load_model.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fusion/frontend/channels_last.h"
#include "fusion/frontend/winograd.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"

namespace opfuse::fusion {

graph::Graph load_model(const std::string& path, const graph::DimBindings& dims,
                        std::vector<std::string>* rewrites, const LoadOptions& options) {
  if (std::filesystem::path(path).extension() != ".onnx") return graph::load_graph_json(path, dims);
  graph::Graph g = graph::import_onnx(path, dims);
  std::vector<std::string> log = canonicalize(g);
  // OPFUSE_CHANNELS_LAST=0 keeps an exported CNN's NCHW layout (to compare, or to bisect).
  const char* cl = std::getenv("OPFUSE_CHANNELS_LAST");
  if (!cl || std::strcmp(cl, "0") != 0) {
    for (auto& line : to_channels_last(g)) log.push_back(std::move(line));
  }
  if (options.winograd) {
    for (auto& line : to_winograd(g)) log.push_back(std::move(line));
  }
  if (rewrites) *rewrites = std::move(log);
  return g;
}

graph::SymbolUses declared_symbols(const std::string& path) {
  graph::SymbolUses out;
  const auto inputs = std::filesystem::path(path).extension() == ".onnx"
                          ? graph::onnx_input_dims(path)
                          : graph::json_input_dims(path);
  for (const auto& [input, names] : inputs) {
    for (size_t a = 0; a < names.size(); ++a) {
      if (!names[a].empty()) out[names[a]].push_back({input, int(a)});
    }
  }
  return out;
}

std::string uses_to_string(const std::vector<std::pair<std::string, int>>& uses) {
  std::string s;
  for (const auto& [input, axis] : uses) s += (s.empty() ? "" : ", ") + input + ":" + std::to_string(axis);
  return s;
}

}  // namespace opfuse::fusion
