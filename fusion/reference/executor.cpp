#include "fusion/reference/executor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fusion/graph/op_schema.h"

namespace opfuse::reference {

using graph::Graph;
using graph::HostTensor;
using graph::Node;
using graph::Shape;

namespace {

using Index = std::vector<int64_t>;

using graph::broadcast_offset;
using graph::for_each_index;

int64_t offset(const Shape& shape, const Index& idx) {
  int64_t off = 0;
  for (size_t i = 0; i < shape.size(); ++i) off = off * shape[i] + idx[i];
  return off;
}

float unary(const Node& n, const graph::UnaryParams& p, float x) {
  const std::string& op = n.op;
  if (op == "relu") return x > 0 ? x : 0.0f;
  // Attribute constants are f32 in every kernel, so the reference rounds them the same way.
  if (op == "leaky_relu") return x > 0 ? x : float(p.alpha) * x;
  if (op == "clamp") return std::min(std::max(x, float(p.lo)), float(p.hi));
  if (op == "relu6") return std::min(std::max(x, 0.0f), 6.0f);
  if (op == "hard_sigmoid") {
    return float(std::clamp(double(float(p.alpha)) * x + double(float(p.beta)), 0.0, 1.0));
  }
  if (op == "hard_swish") return float(x * std::clamp(double(x) / 6.0 + 0.5, 0.0, 1.0));
  if (op == "sigmoid") return float(1.0 / (1.0 + std::exp(-double(x))));
  if (op == "tanh") return float(std::tanh(double(x)));
  if (op == "exp") return float(std::exp(double(x)));
  if (op == "gelu" && p.gelu_tanh) {
    const double k = std::sqrt(2.0 / M_PI), d = x;
    return float(0.5 * d * (1.0 + std::tanh(k * (d + 0.044715 * d * d * d))));
  }
  if (op == "gelu") return float(0.5 * x * (1.0 + std::erf(double(x) / std::sqrt(2.0))));
  if (op == "sqrt") return float(std::sqrt(double(x)));
  if (op == "reciprocal") return float(1.0 / double(x));
  if (op == "neg") return -x;
  if (op == "erf") return float(std::erf(double(x)));
  if (op == "silu") return float(double(x) / (1.0 + std::exp(-double(x))));
  if (op == "pow") return float(std::pow(double(x), p.exponent));
  if (op == "cast" && graph::attr_string(n, "to", "float") == "bool") return x != 0 ? 1.0f : 0.0f;
  if (op == "cast" && graph::attr_string(n, "to", "float") == "i64") return std::nearbyint(x);
  if (op == "cast") return x;  // integers are held as exact f32 values
  graph::fail(n, "no reference for this elementwise op (internal error)");
}

HostTensor conv2d(const Graph& g, const Node& n, const std::vector<const HostTensor*>& in,
                  const Shape& out_shape) {
  const graph::Window2d w = graph::conv2d_window(n, g.tensor(n.inputs[0]), g.tensor(n.inputs[1]));
  const HostTensor& x = *in[0];
  const HostTensor& wt = *in[1];
  const int64_t cin_g = wt.shape[1], cout_g = wt.shape[0] / w.groups;
  const int64_t H = x.shape[w.h_axis()], W = x.shape[w.w_axis()];
  HostTensor y(out_shape);
  for_each_index(out_shape, [&](const Index& o, int64_t flat) {
    const int64_t co = o[w.c_axis()];
    double acc = in.size() == 3 ? in[2]->data[co] : 0.0;
    Index xi(4);
    xi[w.n_axis()] = o[w.n_axis()];
    for (int64_t ci = 0; ci < cin_g; ++ci) {
      xi[w.c_axis()] = (co / cout_g) * cin_g + ci;
      for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
        const int64_t h = o[w.h_axis()] * w.strides[0] - w.pads[0] + kh * w.dilations[0];
        if (h < 0 || h >= H) continue;
        xi[w.h_axis()] = h;
        for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
          const int64_t ww = o[w.w_axis()] * w.strides[1] - w.pads[1] + kw * w.dilations[1];
          if (ww < 0 || ww >= W) continue;
          xi[w.w_axis()] = ww;
          acc += double(x.data[offset(x.shape, xi)]) *
                 wt.data[((co * cin_g + ci) * w.kernel[0] + kh) * w.kernel[1] + kw];
        }
      }
    }
    y.data[flat] = float(acc);
  });
  return y;
}

// F(2x2, 3x3) tile by tile, in double: V = B^T d B of each 4x4 input tile (zero outside the
// input), M = sum over ci of U * V, Y = A^T M A, with B^T = [[1, 0, -1, 0], [0, 1, 1, 0],
// [0, -1, 1, 0], [0, 1, 0, -1]] and A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]. Its tests compare it
// with conv2d on the direct weights.
HostTensor conv2d_winograd(const std::vector<const HostTensor*>& in, const Shape& out_shape) {
  static const double BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static const double AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  const HostTensor &x = *in[0], &u = *in[1];
  const graph::WinogradWeights l = graph::conv2d_winograd_weights(u.shape);
  const int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3], K = l.cout;
  HostTensor y(out_shape);
  std::vector<double> v(size_t(16 * C)), m(size_t(16 * K));
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t ty = 0; ty < (H + 1) / 2; ++ty) {
      for (int64_t tx = 0; tx < (W + 1) / 2; ++tx) {
        for (int64_t c = 0; c < C; ++c) {
          double d[4][4];
          for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
              const int64_t h = 2 * ty - 1 + i, w = 2 * tx - 1 + j;
              d[i][j] = h < 0 || h >= H || w < 0 || w >= W
                            ? 0.0
                            : double(x.data[size_t(((b * H + h) * W + w) * C + c)]);
            }
          }
          for (int i = 0; i < 4; ++i) {
            for (int j = 0; j < 4; ++j) {
              double s = 0;
              for (int p = 0; p < 4; ++p) {
                for (int q = 0; q < 4; ++q) s += BT[i][p] * d[p][q] * BT[j][q];
              }
              v[size_t((i * 4 + j) * C + c)] = s;
            }
          }
        }
        std::fill(m.begin(), m.end(), 0.0);
        for (int e = 0; e < 16; ++e) {
          for (int64_t c = 0; c < C; ++c) {
            const double ve = v[size_t(e * C + c)];
            for (int64_t k = 0; k < K; ++k) {
              m[size_t(e * K + k)] += ve * double(u.data[size_t(l.index(e / 4, e % 4, c, k))]);
            }
          }
        }
        for (int a = 0; a < 2; ++a) {
          for (int bb = 0; bb < 2; ++bb) {
            const int64_t h = 2 * ty + a, w = 2 * tx + bb;
            if (h >= H || w >= W) continue;
            for (int64_t k = 0; k < K; ++k) {
              double s = in.size() == 3 ? double(in[2]->data[size_t(k)]) : 0.0;
              for (int p = 0; p < 4; ++p) {
                for (int q = 0; q < 4; ++q) {
                  s += AT[a][p] * m[size_t((p * 4 + q) * K + k)] * AT[bb][q];
                }
              }
              y.data[size_t(((b * H + h) * W + w) * K + k)] = float(s);
            }
          }
        }
      }
    }
  }
  return y;
}

HostTensor pool(const Graph& g, const Node& n, const HostTensor& x, const Shape& out_shape) {
  const graph::Window2d w = graph::pool_window(n, g.tensor(n.inputs[0]));
  const int64_t H = x.shape[w.h_axis()], W = x.shape[w.w_axis()];
  const bool is_max = n.op == "max_pool";
  HostTensor y(out_shape);
  for_each_index(out_shape, [&](const Index& o, int64_t flat) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t count = 0;
    Index xi = o;
    for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
      const int64_t h = o[w.h_axis()] * w.strides[0] - w.pads[0] + kh;
      for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
        const int64_t ww = o[w.w_axis()] * w.strides[1] - w.pads[1] + kw;
        if (h < 0 || h >= H || ww < 0 || ww >= W) continue;  // padding never wins or counts
        xi[w.h_axis()] = h;
        xi[w.w_axis()] = ww;
        const double v = x.data[offset(x.shape, xi)];
        acc = is_max ? std::max(acc, v) : acc + v;
        ++count;
      }
    }
    if (!is_max) acc /= double(w.count_include_pad ? w.kernel[0] * w.kernel[1] : count);
    y.data[flat] = float(acc);
  });
  return y;
}

HostTensor softmax(const Node& n, const HostTensor& x) {
  const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", -1), x.shape.size());
  HostTensor y(x.shape);
  const int64_t len = x.shape[axis], stride = graph::row_major_strides(x.shape)[axis];
  Shape outer = x.shape;
  outer[axis] = 1;
  for_each_index(outer, [&](const Index& o, int64_t) {
    const int64_t base = offset(x.shape, o);
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t i = 0; i < len; ++i) mx = std::max(mx, double(x.data[base + i * stride]));
    for (int64_t i = 0; i < len; ++i) sum += std::exp(double(x.data[base + i * stride]) - mx);
    for (int64_t i = 0; i < len; ++i) {
      y.data[base + i * stride] = float(std::exp(double(x.data[base + i * stride]) - mx) / sum);
    }
  });
  return y;
}

HostTensor layer_norm(const Node& n, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", -1), x.shape.size());
  const double eps = graph::attr_float(n, "epsilon", 1e-5);
  int64_t inner = 1;
  for (size_t i = axis; i < x.shape.size(); ++i) inner *= x.shape[i];
  const int64_t rows = int64_t(x.size()) / inner;
  HostTensor y(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &x.data[r * inner];
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += row[i];
    mean /= double(inner);
    for (int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= double(inner);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i) {
      y.data[r * inner + i] = float((row[i] - mean) * inv * in[1]->data[i] + in[2]->data[i]);
    }
  }
  return y;
}

HostTensor matmul(const HostTensor& a, const HostTensor& b, const Shape& out_shape) {
  const int64_t K = a.shape.back(), M = a.shape[a.shape.size() - 2], N = b.shape.back();
  const Shape abatch(a.shape.begin(), a.shape.end() - 2),
      bbatch(b.shape.begin(), b.shape.end() - 2);
  const Shape obatch(out_shape.begin(), out_shape.end() - 2);
  HostTensor y(out_shape);
  for_each_index(obatch.empty() ? Shape{1} : obatch, [&](const Index& bi, int64_t flat) {
    const Index idx = obatch.empty() ? Index{} : bi;
    const float* A = &a.data[(abatch.empty() ? 0 : broadcast_offset(abatch, idx)) * M * K];
    const float* B = &b.data[(bbatch.empty() ? 0 : broadcast_offset(bbatch, idx)) * K * N];
    float* Y = &y.data[flat * M * N];
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(A[m * K + k]) * B[k * N + j];
        Y[m * N + j] = float(acc);
      }
    }
  });
  return y;
}

}  // namespace

HostTensor run_node(const Graph& g, const Node& n, const std::vector<const HostTensor*>& in) {
  const Shape& out_shape = g.tensor(n.outputs[0]).shape;
  const std::string& op = n.op;
  const HostTensor& x = *in[0];
  if (graph::schema_of(n).kind == graph::FusionKind::elementwise) {
    const graph::UnaryParams p = graph::unary_params(n);
    HostTensor y(out_shape);
    for (size_t i = 0; i < x.size(); ++i) y.data[i] = unary(n, p, x.data[i]);
    return y;
  }
  if (op == "add" || op == "sub" || op == "mul" || op == "div") {
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      const float a = x.data[broadcast_offset(x.shape, o)];
      const float b = in[1]->data[broadcast_offset(in[1]->shape, o)];
      y.data[flat] = op == "add" ? a + b : op == "sub" ? a - b : op == "mul" ? a * b : a / b;
    });
    return y;
  }
  if (op == "where" || op == "expand") {
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      const float a = x.data[broadcast_offset(x.shape, o)];
      y.data[flat] = op == "expand" ? a
                     : a != 0.0f    ? in[1]->data[broadcast_offset(in[1]->shape, o)]
                                    : in[2]->data[broadcast_offset(in[2]->shape, o)];
    });
    return y;
  }
  if (graph::has_trait(op, graph::OpTrait::axes_reduction)) {
    const std::vector<bool> red = graph::reduced_axes(n, x.shape.size());
    const bool keep = graph::attr_int(n, "keepdims", 1) != 0;
    std::vector<double> acc(size_t(graph::num_elements(out_shape)),
                            op == "reduce_max" ? -INFINITY : 0.0);
    double count = 1;
    for (size_t i = 0; i < red.size(); ++i) count *= red[i] ? double(x.shape[i]) : 1.0;
    for_each_index(x.shape, [&](const Index& xi, int64_t flat) {
      Index o;
      for (size_t i = 0; i < xi.size(); ++i) {
        if (!red[i])
          o.push_back(xi[i]);
        else if (keep)
          o.push_back(0);
      }
      double& a = acc[size_t(offset(out_shape, o))];
      const double v = x.data[size_t(flat)];
      a = op == "reduce_max" ? std::max(a, v) : a + v;
    });
    HostTensor y(out_shape);
    for (size_t i = 0; i < acc.size(); ++i) {
      y.data[i] = float(op == "reduce_mean" ? acc[i] / count : acc[i]);
    }
    return y;
  }
  if (op == "slice") {
    const std::vector<graph::SliceDim> d = graph::slice_dims(n, x.shape);
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      Index xi = o;
      for (size_t i = 0; i < d.size(); ++i) xi[i] = d[i].start + o[i] * d[i].step;
      y.data[flat] = x.data[offset(x.shape, xi)];
    });
    return y;
  }
  if (op == "gather" && in.size() == 2) {
    // ONNX Gather: out[pre, i..., post] = x[pre, indices[i...], post]. An index outside
    // [-n, n) is an error here (the kernels clamp it into range instead).
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), x.shape.size());
    const HostTensor& ind = *in[1];
    const int64_t extent = x.shape[size_t(axis)];
    const size_t r = ind.shape.size();
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      const Index ii(o.begin() + axis, o.begin() + axis + long(r));
      const float v = ind.data[size_t(offset(ind.shape, ii))];
      int64_t i = int64_t(v);
      if (float(i) != v || i < -extent || i >= extent) {
        graph::fail(n, "index " + std::to_string(v) + " of '" + n.inputs[1] +
                           "' is out of range for axis " + std::to_string(axis) + " of extent " +
                           std::to_string(extent));
      }
      if (i < 0) i += extent;
      Index xi(o.begin(), o.begin() + axis);
      xi.push_back(i);
      xi.insert(xi.end(), o.begin() + axis + long(r), o.end());
      y.data[flat] = x.data[offset(x.shape, xi)];
    });
    return y;
  }
  if (op == "gather") {
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), x.shape.size());
    const std::vector<int64_t> idx = graph::gather_indices(n, x.shape);
    const bool scalar = graph::attr_int(n, "scalar", 0) != 0;
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      Index xi = o;
      if (scalar) {
        xi.insert(xi.begin() + axis, idx[0]);
      } else {
        xi[size_t(axis)] = idx[size_t(o[size_t(axis)])];
      }
      y.data[flat] = x.data[offset(x.shape, xi)];
    });
    return y;
  }
  if (op == "bias_add" || op == "batch_norm") {
    const int axis = op == "bias_add"
                         ? graph::normalize_axis(n, graph::attr_int(n, "axis", 1), x.shape.size())
                         : graph::batch_norm_axis(n, g.tensor(n.inputs[0]));
    const double eps = graph::attr_float(n, "epsilon", 1e-5);
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      const int64_t c = o[axis];
      const double v = x.data[flat];
      y.data[flat] = op == "bias_add" ? float(v + in[1]->data[c])
                                      : float((v - in[3]->data[c]) * in[1]->data[c] /
                                                  std::sqrt(double(in[4]->data[c]) + eps) +
                                              in[2]->data[c]);
    });
    return y;
  }
  if (op == "layer_norm") return layer_norm(n, in);
  if (op == "softmax") return softmax(n, x);
  if (op == "conv2d") return conv2d(g, n, in, out_shape);
  if (op == "conv2d_winograd") return conv2d_winograd(in, out_shape);
  if (op == "max_pool" || op == "avg_pool") return pool(g, n, x, out_shape);
  if (op == "global_avg_pool") {
    const graph::Window2d w = graph::pool_window(n, g.tensor(n.inputs[0]));
    const int64_t H = x.shape[w.h_axis()], W = x.shape[w.w_axis()];
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      Index xi = o;
      double acc = 0;
      for (xi[w.h_axis()] = 0; xi[w.h_axis()] < H; ++xi[w.h_axis()]) {
        for (xi[w.w_axis()] = 0; xi[w.w_axis()] < W; ++xi[w.w_axis()]) {
          acc += x.data[offset(x.shape, xi)];
        }
      }
      y.data[flat] = float(acc / double(H * W));
    });
    return y;
  }
  if (op == "matmul") return matmul(x, *in[1], out_shape);
  if (op == "linear") {
    // [..., K] x [K, N] is a matmul of the flattened rows.
    HostTensor rows = x;
    rows.shape = {int64_t(x.size()) / x.shape.back(), x.shape.back()};
    HostTensor y = matmul(rows, *in[1], {rows.shape[0], in[1]->shape[1]});
    y.shape = out_shape;
    if (in.size() == 3) {
      const int64_t N = out_shape.back();
      for (size_t i = 0; i < y.size(); ++i) y.data[i] += in[2]->data[i % N];
    }
    return y;
  }
  if (op == "transpose") {
    std::vector<int64_t> perm = graph::attr_ints(n, "perm", {});
    if (perm.empty()) {
      for (int64_t i = int64_t(x.shape.size()) - 1; i >= 0; --i) perm.push_back(i);
    }
    HostTensor y(out_shape);
    Index xi(x.shape.size());
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      for (size_t i = 0; i < perm.size(); ++i) xi[perm[i]] = o[i];
      y.data[flat] = x.data[offset(x.shape, xi)];
    });
    return y;
  }
  if (op == "reshape") {
    HostTensor y = x;
    y.shape = out_shape;
    return y;
  }
  if (op == "concat") {
    const int axis = graph::normalize_axis(n, graph::attr_int(n, "axis", 0), x.shape.size());
    HostTensor y(out_shape);
    for_each_index(out_shape, [&](const Index& o, int64_t flat) {
      Index xi = o;
      size_t k = 0;
      while (xi[axis] >= in[k]->shape[axis]) xi[axis] -= in[k++]->shape[axis];
      y.data[flat] = in[k]->data[offset(in[k]->shape, xi)];
    });
    return y;
  }
  graph::fail(n, "no reference implementation (internal error)");
}

graph::TensorMap run(const Graph& g, const graph::TensorMap& inputs,
                     const graph::TensorMap& params) {
  graph::TensorMap values;
  for (const auto& name : g.inputs()) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      throw graph::GraphError("reference: missing graph input '" + name + "'");
    if (it->second.shape != g.tensor(name).shape) {
      throw graph::GraphError("reference: input '" + name + "' has shape " +
                              graph::shape_to_string(it->second.shape) + ", the graph expects " +
                              graph::shape_to_string(g.tensor(name).shape));
    }
    values[name] = it->second;
  }
  for (const auto& name : g.params()) {
    auto it = params.find(name);
    values[name] = it != params.end() ? it->second : graph::param_values(g.tensor(name));
  }
  for (size_t i : g.topo_order()) {
    const Node& n = g.nodes()[i];
    std::vector<const HostTensor*> in;
    for (const auto& name : n.inputs) in.push_back(&values.at(name));
    HostTensor y = run_node(g, n, in);
    if (g.tensor(n.outputs[0]).dtype == graph::DType::f16) {
      for (float& v : y.data) v = graph::round_to_f16(v);
    }
    values[n.outputs[0]] = std::move(y);
  }
  return values;
}

}  // namespace opfuse::reference
