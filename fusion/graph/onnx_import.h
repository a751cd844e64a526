// ONNX import of the supported operator subset (Debian's libonnx protobuf definitions).
//
//   Conv, BatchNormalization, Relu, Sigmoid, Tanh, Gelu, Add, Mul, Sub, Div, MaxPool,
//   AveragePool, GlobalAveragePool, Gemm, MatMul, Softmax, LayerNormalization, Transpose,
//   Reshape, Concat
//
// Initializers become params carrying their data; 4-D graph inputs are NCHW (ONNX's
// convention). Any other op, and any unsupported attribute value, is refused with the node's
// name, the op and the model's opset.
#pragma once

#include <string>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

Graph import_onnx(const std::string& path);
Graph import_onnx_bytes(const std::string& bytes, const std::string& source = "<onnx>");

}  // namespace opfuse::graph
