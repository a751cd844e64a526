// Blocks as PyTorch's exporter writes them, built with the ONNX protobuf API: a
// depthwise-separable block, a residual block, a transformer encoder block, a two-branch
// detection head and a SwiGLU MLP. At opset 13 LayerNorm is decomposed (ReduceMean, Sub,
// Pow, ...); at opset 17 it is LayerNormalization. GELU is the erf form, SiLU x * sigmoid(x),
// ReLU6 a Clip with input bounds, nn.Linear a MatMul and an Add, as the exporter writes them.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/onnx_model.h"

namespace opfuse::testing {

struct Block {
  std::string name;
  // (model, opset, scale): scale multiplies the spatial size (H, W) or the sequence length
  std::function<void(OnnxModel&, int, int64_t)> build;
  std::map<std::string, int> rewrites_13, rewrites_17;  // canonical rule -> times it fires
};

const std::vector<Block>& blocks();
std::string block_bytes(const Block& b, int opset, int64_t scale = 1);  // serialised ModelProto

}  // namespace opfuse::testing
