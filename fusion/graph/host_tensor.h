// Tensor data on the host: a row-major shape and f32 values. The reference executor, the JIT
// realisation and the loaders exchange tensors in this form. f16 tensors are held as f32
// values already rounded to f16 precision.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

struct HostTensor {
  Shape shape;
  std::vector<float> data;
  HostTensor() = default;
  explicit HostTensor(Shape s) : shape(std::move(s)), data(size_t(num_elements(shape)), 0.0f) {}
  size_t size() const { return data.size(); }
};

using TensorMap = std::map<std::string, HostTensor>;

// Row-major strides of a shape (elements).
std::vector<int64_t> row_major_strides(const Shape& s);

// A param's values: its explicit data, else uniform in [init.lo, init.hi) from a generator
// seeded by the tensor's name (FNV-1a), so every tool sees the same weights.
HostTensor param_values(const Tensor& param);
// Every param of the graph, by name.
TensorMap param_values(const Graph& g);
// Uniform values in [lo, hi) for a graph input, from `seed` and the input's name.
HostTensor random_input(const Tensor& input, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Integer inputs get integers in [0, index_bound): valid indices wherever they are gathered by.
TensorMap random_inputs(const Graph& g, uint64_t seed);
// The values an integer input may take: the smallest extent it indexes (through the ops that
// move it), 2 where it is cast to a mask, 2 when it does neither.
int64_t index_bound(const Graph& g, const std::string& input);

// Rounds an f32 value to the nearest f16 value (ties to even), returned as f32.
float round_to_f16(float v);

}  // namespace opfuse::graph
