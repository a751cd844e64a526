#include "fusion/ops/host_buffer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

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
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
  // The rounding is graph::round_to_f16's (the reference executor's); what is left is to
  // write the f16 value it gives, which is exact.
  const float a = std::fabs(graph::round_to_f16(f));
  if (std::isinf(a)) return uint16_t(sign | 0x7c00u);
  if (a < std::ldexp(1.0f, -14)) return uint16_t(sign | uint16_t(std::ldexp(a, 24)));  // subnormal
  int e;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): f16 exponent e + 14
  return uint16_t(sign | uint16_t((e + 14) << 10) | uint16_t(std::ldexp(2 * m - 1, 10)));
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
