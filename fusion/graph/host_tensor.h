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

// Calls fn(index, flat) for every row-major index of `shape`, in order.
template <typename Fn>
void for_each_index(const Shape& shape, Fn fn) {
  std::vector<int64_t> idx(shape.size(), 0);
  const int64_t total = num_elements(shape);
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(idx, flat);
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

// The flat offset in an operand of shape `s` that numpy broadcasting reads at the index `out`
// of the (same or higher rank) result.
int64_t broadcast_offset(const Shape& s, const std::vector<int64_t>& out);

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
