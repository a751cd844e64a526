// Loading a model for planning: a graph JSON file as it is, or an ONNX model imported and
// canonicalised (decomposed LayerNorm, GELU, SiLU, Clip(0, 6), MatMul + Add rewritten into
// the library's ops). Every tool and the generator load models through here, so they see
// the same graph.
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

// `rewrites`, when given, receives one line per canonicalisation rewrite that fired.
graph::Graph load_model(const std::string& path, std::vector<std::string>* rewrites = nullptr);

}  // namespace opfuse::fusion
