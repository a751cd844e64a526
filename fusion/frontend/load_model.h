// Loading a model for planning: a graph JSON file as it is, or an ONNX model imported and
// canonicalised (decomposed LayerNorm, GELU, SiLU, Clip(0, 6), MatMul + Add rewritten into
// the library's ops). Every tool and the generator load models through here, so they see
// the same graph.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

// How the graph is rewritten for its target.
struct LoadOptions {
  // 3x3 convolutions as Winograd F(2x2, 3x3) (fusion/frontend/winograd.h): CPU targets. A GPU
  // schedule computes each output in a thread of its own, which would transform the input and
  // run all 16 GEMMs of its 2x2 tile for one output, more work than the direct convolution.
  bool winograd = true;
};

// `rewrites`, when given, receives one line per canonicalisation rewrite that fired.
// `dims`: sizes of the model's symbolic input dimensions (a dynamic batch); the graph is
// built at those sizes.
graph::Graph load_model(const std::string& path, const graph::DimBindings& dims,
                        std::vector<std::string>* rewrites = nullptr,
                        const LoadOptions& options = {});
inline graph::Graph load_model(const std::string& path,
                               std::vector<std::string>* rewrites = nullptr) {
  return load_model(path, {}, rewrites);
}

// The symbolic dimensions a model file's inputs declare (ONNX dim_param, names in a graph
// file's shapes), without building the graph.
graph::SymbolUses declared_symbols(const std::string& path);
// "x:0, mask:0": the uses, for messages.
std::string uses_to_string(const std::vector<std::pair<std::string, int>>& uses);

}  // namespace opfuse::fusion
