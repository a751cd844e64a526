#include "fusion/graph/host_tensor.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "fusion/graph/op_schema.h"

namespace opfuse::graph {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// uniform [lo, hi) from 24 random bits: the same values with any standard library.
void fill_uniform(std::vector<float>& v, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  for (float& x : v) {
    const double u = double(rng() >> 40) / double(1 << 24);
    x = float(lo + (hi - lo) * u);
  }
}

}  // namespace

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

HostTensor param_values(const Tensor& p) {
  HostTensor t(p.shape);
  if (!p.data.empty()) {
    t.data = p.data;
  } else {
    fill_uniform(t.data, fnv1a(p.name, 0), p.init.lo, p.init.hi);
  }
  return t;
}

TensorMap param_values(const Graph& g) {
  TensorMap m;
  for (const auto& name : g.params()) m[name] = param_values(g.tensor(name));
  return m;
}

HostTensor random_input(const Tensor& in, uint64_t seed, float lo, float hi) {
  HostTensor t(in.shape);
  fill_uniform(t.data, fnv1a(in.name, seed), lo, hi);
  if (in.dtype == DType::f16) {
    for (float& v : t.data) v = round_to_f16(v);
  }
  return t;
}

int64_t index_bound(const Graph& g, const std::string& input) {
  int64_t bound = INT64_MAX;
  std::vector<std::string> stack{input};
  std::set<std::string> seen;
  while (!stack.empty()) {
    const std::string t = stack.back();
    stack.pop_back();
    if (!seen.insert(t).second) continue;
    for (const Node& n : g.nodes()) {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != t) continue;
        if (n.op == "gather" && i == 1) {
          const Shape& x = g.tensor(n.inputs[0]).shape;
          const int axis = normalize_axis(n, attr_int(n, "axis", 0), x.size());
          bound = std::min(bound, x[size_t(axis)]);
        } else if (n.op == "cast") {
          bound = std::min<int64_t>(bound, 2);  // a mask
        } else {
          stack.push_back(n.outputs[0]);  // moved (reshape, expand ...), still the same values
        }
      }
    }
  }
  return bound == INT64_MAX ? 2 : bound;
}

TensorMap random_inputs(const Graph& g, uint64_t seed) {
  TensorMap m;
  for (const auto& name : g.inputs()) {
    const Tensor& t = g.tensor(name);
    if (!is_integer(t.dtype)) {
      m[name] = random_input(t, seed);
      continue;
    }
    // Integers in [0, bound): valid token ids for every table they index, 0/1 for a mask.
    const int64_t bound = index_bound(g, name);
    HostTensor h = random_input(t, seed, 0.0f, float(bound));
    for (float& v : h.data) v = std::min(std::floor(v), float(bound - 1));
    m[name] = std::move(h);
  }
  return m;
}

int64_t broadcast_offset(const Shape& s, const std::vector<int64_t>& out) {
  int64_t off = 0;
  const size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) off = off * s[i] + (s[i] == 1 ? 0 : out[lead + i]);
  return off;
}

float round_to_f16(float v) {
  if (!std::isfinite(v)) return v;
  const float a = std::fabs(v);
  if (a >= 65520.0f) return std::copysign(INFINITY, v);  // rounds past f16's max (65504)
  if (a < std::ldexp(1.0f, -24))
    return std::copysign(a <= std::ldexp(1.0f, -25) ? 0.0f : std::ldexp(1.0f, -24), v);
  // Spacing of f16 values around a: 2^(e-10) for normals, 2^-24 for subnormals.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const float ulp = std::ldexp(1.0f, std::max(e - 11, -24));
  return std::copysign(std::nearbyint(a / ulp) * ulp, v);  // nearbyint: ties to even
}

}  // namespace opfuse::graph
