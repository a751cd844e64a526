// A builder that reads like the math:
//
//   GraphBuilder g("cbr_pool");
//   auto x = g.input("x", {1, 56, 56, 32}, Layout::NHWC);
//   Conv2dOptions same;
//   same.pads = {1, 1, 1, 1};
//   auto y = g.max_pool(g.relu(g.batch_norm(g.conv2d(x, g.param("w", {32, 32, 3, 3}), same))),
//                       2, 2);
//   g.output(y);
//   Graph graph = g.build();
//
// Every call checks its node at once (GraphError names it), so a mistake is reported at the
// line that made it. Params a call needs and is not given (batch norm's statistics, a bias)
// are created with sensible deterministic initial values.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

struct Conv2dOptions {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> dilations{1, 1};
  int64_t groups = 1;
};

class GraphBuilder {
 public:
  using T = std::string;  // a tensor, by name

  explicit GraphBuilder(std::string name);

  T input(const std::string& name, Shape shape, Layout layout = Layout::none,
          DType dtype = DType::f32);
  T param(const std::string& name, Shape shape, ParamInit init = {});

  // Elementwise and broadcast.
  T relu(const T& x);
  T leaky_relu(const T& x, double alpha = 0.01);
  T clamp(const T& x, double lo, double hi);
  T relu6(const T& x);
  T hard_sigmoid(const T& x, double alpha = 0.2, double beta = 0.5);
  T hard_swish(const T& x);
  T sigmoid(const T& x);
  T tanh(const T& x);
  T gelu(const T& x, bool tanh_approximation = false);
  T exp(const T& x);
  T sqrt(const T& x);
  T reciprocal(const T& x);
  T neg(const T& x);
  T erf(const T& x);
  T silu(const T& x);
  T pow(const T& x, double exponent);
  T where(const T& cond, const T& a, const T& b);
  T expand(const T& x, std::vector<int64_t> shape);
  T reduce(const std::string& op, const T& x, std::vector<int64_t> axes, bool keepdims = true);
  T gather(const T& x, int64_t axis, std::vector<int64_t> indices, bool scalar = false);
  // ONNX Gather by an integer tensor of indices (an embedding lookup: table, ids, axis 0).
  T gather(const T& x, const T& indices, int64_t axis);
  T cast(const T& x);  // an integer tensor's values as f32
  // ONNX Slice with constant bounds: axes default to 0..n-1, steps to 1.
  T slice(const T& x, std::vector<int64_t> starts, std::vector<int64_t> ends,
          std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {});
  T add(const T& a, const T& b);
  T sub(const T& a, const T& b);
  T mul(const T& a, const T& b);
  T div(const T& a, const T& b);
  T bias_add(const T& x, const T& b, int64_t axis);
  // Creates gamma, beta, mean and var params along the channel axis of x's layout.
  T batch_norm(const T& x, double epsilon = 1e-5);
  T layer_norm(const T& x, int64_t axis = -1, double epsilon = 1e-5);
  T softmax(const T& x, int64_t axis = -1);

  // Anchors and windows.
  T conv2d(const T& x, const T& w, const Conv2dOptions& opts = {}, const T& bias = "");
  T matmul(const T& a, const T& b);
  T linear(const T& x, const T& w, const T& bias = "");
  T max_pool(const T& x, int64_t kernel, int64_t stride, int64_t pad = 0);
  T avg_pool(const T& x, int64_t kernel, int64_t stride, int64_t pad = 0,
             bool count_include_pad = false);
  T global_avg_pool(const T& x);

  // Data movement.
  T transpose(const T& x, std::vector<int64_t> perm);
  T reshape(const T& x, std::vector<int64_t> shape);
  T concat(const std::vector<T>& xs, int64_t axis);

  // softmax(q k^T / sqrt(d)) v as a composition of transpose, matmul, mul, softmax, matmul.
  T attention(const T& q, const T& k, const T& v);

  void output(const T& t);
  const Shape& shape(const T& t) const { return graph_.tensor(t).shape; }
  // Validates the whole graph and returns it.
  Graph build();

 private:
  T node(const std::string& op, std::vector<T> inputs, Attrs attrs = {});
  std::string fresh(const std::string& base);
  Graph graph_;
  std::map<std::string, int> counters_;
};

}  // namespace opfuse::graph
