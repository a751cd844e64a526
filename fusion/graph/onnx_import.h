// ONNX import of what PyTorch's exporter emits for common CNN and transformer blocks
// (opsets 13 to 21), through Debian's libonnx protobuf definitions.
//
//   Conv, BatchNormalization, Relu, Sigmoid, Tanh, Gelu, Erf, Exp, Sqrt, Reciprocal, Neg,
//   Pow (constant exponent), Clip (bounds as inputs or attributes), Add, Mul, Sub, Div,
//   MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul, Softmax, LayerNormalization,
//   ReduceMean, ReduceSum, ReduceMax (axes as attribute or input), Transpose, Reshape,
//   Flatten, Squeeze, Unsqueeze, Concat, Slice and Split (constant bounds and sizes; Split into
//   one slice per output), Gather (constant indices), Expand, Where (constant condition),
//   Constant, Identity, Dropout, Cast (float32 to float32), Shape; ConstantOfShape, Range,
//   Equal, Less, LessOrEqual, Greater, GreaterOrEqual on constants (folded: shapes, masks),
//   MaxPool and AveragePool with ceil_mode = 1
//
// Initializers become params carrying their data; integer tensors (shapes, axes, indices)
// are import-time constants, and shape arithmetic on them (Shape, Gather, Concat, ...) is
// evaluated. A node whose inputs are all constants is folded into a param with the reference
// executor. Shapes are inferred node by node. 4-D graph inputs are NCHW (ONNX's convention).
// Any other op, and any unsupported attribute value, is refused with the node's name, the op
// and the model's opset. Decomposed forms (LayerNorm, GELU, SiLU, ...) are imported as they
// are; fusion/pattern/canonicalize.h rewrites them into the library's ops.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

// Tensors stored outside the model (external data: `location`, `offset`, `length`) are read
// from files in the model's folder, size-checked against their dims; a location outside the
// folder (absolute, `..`, a link out) is refused, a missing or short file names the tensor
// and the file.
//
// An input dimension given by name (dim_param, e.g. a dynamic batch) takes its size from
// `dims`; without it the import fails naming the input, the axis and the symbol. The tensor
// keeps the name (Tensor::dim_names), and shape arithmetic (Shape -> Gather -> Concat ->
// Reshape, as exporters write a dynamic batch) folds at that size.
Graph import_onnx(const std::string& path, const DimBindings& dims = {});
// Each graph input's per-axis dim_param ("" for a fixed size), read without importing.
std::vector<std::pair<std::string, std::vector<std::string>>> onnx_input_dims(
    const std::string& path);
// `base_dir`: where external data lies; empty: a model with external data is refused.
Graph import_onnx_bytes(const std::string& bytes, const std::string& source = "<onnx>",
                        const std::string& base_dir = "", const DimBindings& dims = {});

}  // namespace opfuse::graph
