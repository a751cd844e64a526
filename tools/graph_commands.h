#pragma once

#include <string>

namespace opfuse::tools {

// `opfuse zoo --out DIR`: writes every zoo model at both sizes as DIR/<size>/<name>.json.
int write_zoo(const std::string& out_dir);

// `opfuse check GRAPH`: loads a .json or .onnx graph, validates it and prints its nodes with
// fusion kind and output shape; runs it through the reference executor when `run` is set.
int check_graph(const std::string& path, bool run);

}  // namespace opfuse::tools
