// Host tensors as Halide buffers, without libHalide: only the Halide runtime's header-only
// Buffer, so that a process running AOT-built kernels on PoCL (which must not load libHalide's
// LLVM beside PoCL's) can feed them graph tensors, as the JIT does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"

namespace opfuse::ops {

// A tensor's name as a C identifier: the name of its argument in a compiled library, and of
// its Funcs.
std::string halide_safe_name(const std::string& name);

// Halide's extents (innermost first) of a row-major shape.
std::vector<int> halide_extents(const graph::Shape& s);

// A buffer holding `value` in tensor `t`'s storage dtype (f16 as IEEE half, rounded to
// nearest even; integers, held as exact f32 values, as int64/int32); GraphError when the
// shapes differ.
Halide::Runtime::Buffer<> tensor_buffer(const graph::Tensor& t, const graph::HostTensor& value);

// f32 -> IEEE binary16 bits, rounded as graph::round_to_f16 rounds (nearest even, overflow
// to infinity; NaN stays NaN).
uint16_t f16_bits(float f);

}  // namespace opfuse::ops
