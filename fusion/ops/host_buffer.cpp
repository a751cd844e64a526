#include "fusion/ops/host_buffer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace opfuse::ops {

std::string halide_safe_name(const std::string& name) {
  std::string out = name.empty() ? "t" : name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  if (std::isdigit(static_cast<unsigned char>(out[0]))) out = "t" + out;
  return out;
}

std::vector<int> halide_extents(const graph::Shape& s) {
  return std::vector<int>(s.rbegin(), s.rend());
}

uint16_t f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, biased = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (biased == 0xffu) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf, NaN
  const int32_t exp = int32_t(biased) - 127 + 15;
  if (exp >= 0x1f) return uint16_t(sign | 0x7c00u);  // too large: infinity
  uint32_t shift = 13, bits;
  if (exp <= 0) {  // a subnormal half (or zero)
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    shift = uint32_t(14 - exp);
    bits = mant >> shift;
  } else {
    bits = (uint32_t(exp) << 10) | (mant >> 13);
  }
  const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (bits & 1u))) ++bits;  // a carry rounds into the exponent
  return uint16_t(sign | bits);
}

Halide::Runtime::Buffer<> tensor_buffer(const graph::Tensor& info, const graph::HostTensor& t) {
  if (t.shape != info.shape) {
    throw graph::GraphError("input '" + info.name + "' has shape " +
                            graph::shape_to_string(t.shape) + ", the graph expects " +
                            graph::shape_to_string(info.shape));
  }
  const std::vector<int> ext = halide_extents(t.shape);
  if (info.dtype == graph::DType::f16) {
    Halide::Runtime::Buffer<> b(halide_type_t(halide_type_float, 16), ext);
    auto* p = static_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < t.size(); ++i) p[i] = f16_bits(t.data[i]);
    return b;
  }
  if (graph::is_integer(info.dtype)) {  // held as exact f32 values
    auto fill = [&](auto b) {
      for (size_t i = 0; i < t.size(); ++i) b.data()[i] = decltype(b.data()[0] + 0)(t.data[i]);
      return Halide::Runtime::Buffer<>(b);
    };
    return info.dtype == graph::DType::i64 ? fill(Halide::Runtime::Buffer<int64_t>(ext))
                                           : fill(Halide::Runtime::Buffer<int32_t>(ext));
  }
  Halide::Runtime::Buffer<float> b(ext);
  std::copy(t.data.begin(), t.data.end(), b.data());
  return b;
}

}  // namespace opfuse::ops
