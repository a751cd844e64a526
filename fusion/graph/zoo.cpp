#include "fusion/graph/zoo.h"

#include <cmath>
#include <functional>
#include <map>

#include "fusion/graph/builder.h"

namespace opfuse::graph {
namespace {

using T = GraphBuilder::T;

Graph ew_chain(int n, bool gpu) {
  GraphBuilder g("ew_chain_" + std::to_string(n));
  T x = g.input("x", gpu ? Shape{8, 64, 256, 256} : Shape{1, 64, 128, 128}, Layout::NCHW);
  // A cycle of cheap, range-preserving ops: values stay in about [-1.2, 1.2] at any N.
  for (int i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0:
        x = g.mul(x, g.param("scale_" + std::to_string(i), {1}, {0.9, 1.1}));
        break;
      case 1:
        x = g.add(x, g.param("shift_" + std::to_string(i), {1}, {-0.1, 0.1}));
        break;
      case 2:
        x = g.tanh(x);
        break;
      default:
        x = g.leaky_relu(x, 0.1);
        break;
    }
  }
  g.output(x);
  return g.build();
}

T conv_bn_relu(GraphBuilder& g, const T& x, const std::string& w, int64_t cin, int64_t cout,
               int64_t k, int64_t stride) {
  Conv2dOptions o;
  o.strides = {stride, stride};
  const int64_t p = k / 2;
  o.pads = {p, p, p, p};
  // He-style range: keeps activations of a conv stack at a stable scale.
  const double a = 1.0 / std::sqrt(double(cin * k * k));
  return g.relu(g.batch_norm(g.conv2d(x, g.param(w, {cout, cin, k, k}, {-a, a}), o)));
}

Graph cbr_pool(bool gpu) {
  GraphBuilder g("cbr_pool");
  T x = g.input("x", gpu ? Shape{256, 112, 112, 32} : Shape{1, 56, 56, 32}, Layout::NHWC);
  g.output(g.max_pool(conv_bn_relu(g, x, "w", 32, 32, 3, 1), 2, 2));
  return g.build();
}

Graph mixed(bool gpu) {
  GraphBuilder g("mixed");
  T x = g.input("x", gpu ? Shape{32, 112, 112, 32} : Shape{1, 56, 56, 32}, Layout::NHWC);
  T y = conv_bn_relu(g, x, "w", 32, 32, 3, 1);
  g.output(g.max_pool(y, 2, 2));
  g.output(g.avg_pool(y, 2, 2));
  return g.build();
}

Graph attention(bool gpu) {
  GraphBuilder g("attention");
  const int64_t B = gpu ? 32 : 1, L = gpu ? 512 : 128, D = gpu ? 768 : 64;
  T x = g.input("x", {B, L, D});
  const double a = 1.0 / std::sqrt(double(D));
  T q = g.linear(x, g.param("wq", {D, D}, {-a, a}));
  T k = g.linear(x, g.param("wk", {D, D}, {-a, a}));
  T v = g.linear(x, g.param("wv", {D, D}, {-a, a}));
  g.output(g.attention(q, k, v));
  return g.build();
}

Graph mlp(bool gpu) {
  GraphBuilder g("mlp");
  const int64_t M = gpu ? 4096 : 128, D = gpu ? 768 : 256, H = 4 * D;
  T x = g.input("x", {M, D});
  T h = g.linear(x, g.param("w1", {D, H}, {-1 / std::sqrt(double(D)), 1 / std::sqrt(double(D))}));
  h = g.gelu(g.bias_add(h, g.param("b1", {H}, {-0.1, 0.1}), -1));
  g.output(
      g.linear(h, g.param("w2", {H, D}, {-1 / std::sqrt(double(H)), 1 / std::sqrt(double(H))})));
  return g.build();
}

Graph layernorm(bool gpu) {
  GraphBuilder g("layernorm");
  const Shape s = gpu ? Shape{16384, 1024} : Shape{512, 768};
  T x = g.input("x", s);
  T r = g.input("residual", s);
  g.output(g.gelu(g.layer_norm(g.add(x, r))));
  return g.build();
}

Graph softmax(bool gpu) {
  GraphBuilder g("softmax");
  T x = g.input("x", gpu ? Shape{32, 12, 512, 512} : Shape{1, 8, 128, 128});
  g.output(g.softmax(g.mul(x, g.param("scale", {1}, {0.125, 0.125}))));
  return g.build();
}

Graph perception(bool gpu) {
  GraphBuilder g("perception");
  T img = g.input("image", gpu ? Shape{8, 512, 512, 3} : Shape{1, 128, 128, 3}, Layout::NHWC);
  // Preprocess: per-channel normalisation (x - mean) / std.
  T x = g.div(g.sub(img, g.param("mean", {3}, {0.4, 0.5})), g.param("std", {3}, {0.2, 0.3}));
  x = conv_bn_relu(g, x, "w1", 3, 16, 3, 2);
  x = conv_bn_relu(g, x, "w2", 16, 32, 3, 2);
  x = conv_bn_relu(g, x, "w3", 32, 32, 3, 1);
  // Two heads: a dense per-pixel head (detection) and a global classification head.
  g.output(g.sigmoid(g.conv2d(x, g.param("w_det", {8, 32, 1, 1}, {-0.2, 0.2}))));
  T pooled = g.reshape(g.global_avg_pool(x), {-1, 32});
  g.output(g.softmax(g.linear(pooled, g.param("w_cls", {32, 10}, {-0.2, 0.2}),
                              g.param("b_cls", {10}, {-0.1, 0.1}))));
  return g.build();
}

const std::map<std::string, std::function<Graph(bool)>>& registry() {
  static const std::map<std::string, std::function<Graph(bool)>> r = {
      {"ew_chain_2", [](bool gpu) { return ew_chain(2, gpu); }},
      {"ew_chain_4", [](bool gpu) { return ew_chain(4, gpu); }},
      {"ew_chain_8", [](bool gpu) { return ew_chain(8, gpu); }},
      {"ew_chain_16", [](bool gpu) { return ew_chain(16, gpu); }},
      {"cbr_pool", cbr_pool},
      {"mixed", mixed},
      {"attention", attention},
      {"mlp", mlp},
      {"layernorm", layernorm},
      {"softmax", softmax},
      {"perception", perception},
  };
  return r;
}

}  // namespace

std::vector<std::string> zoo_names() {
  std::vector<std::string> out;
  for (const auto& [name, _] : registry()) out.push_back(name);
  return out;
}

Graph zoo_model(const std::string& name, ZooSize size) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& n : zoo_names()) known += (known.empty() ? "" : ", ") + n;
    throw GraphError("no zoo model named '" + name + "' (the zoo has: " + known + ")");
  }
  return it->second(size == ZooSize::gpu);
}

const char* to_string(ZooSize s) { return s == ZooSize::gpu ? "gpu" : "cpu"; }

}  // namespace opfuse::graph
