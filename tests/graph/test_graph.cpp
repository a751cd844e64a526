// The graph IR, the builder and the JSON format.
#include <doctest/doctest.h>

#include "fusion/graph/builder.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/op_schema.h"
#include "fusion/graph/zoo.h"
#include "tests/testing.h"

using namespace opfuse::graph;

TEST_CASE("the builder reads like the math and infers shapes") {
  GraphBuilder g("cbr");
  auto x = g.input("x", {1, 16, 16, 8}, Layout::NHWC);
  Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto y = g.max_pool(g.relu(g.batch_norm(g.conv2d(x, g.param("w", {12, 8, 3, 3}), same))), 2, 2);
  g.output(y);
  Graph graph = g.build();
  CHECK(graph.tensor(y).shape == Shape{1, 8, 8, 12});
  CHECK(graph.tensor(y).layout == Layout::NHWC);
  std::vector<std::string> ops;
  for (size_t i : graph.topo_order()) ops.push_back(graph.nodes()[i].op);
  CHECK(ops == std::vector<std::string>{"conv2d", "batch_norm", "relu", "max_pool"});
  CHECK(graph.params().size() == 5);  // w + gamma, beta, mean, var
}

TEST_CASE("every op has a fusion kind as in TVM") {
  CHECK(find_op("relu")->kind == FusionKind::elementwise);
  CHECK(find_op("add")->kind == FusionKind::broadcast);
  CHECK(find_op("batch_norm")->kind == FusionKind::broadcast);
  CHECK(find_op("transpose")->kind == FusionKind::injective);
  CHECK(find_op("softmax")->kind == FusionKind::reduction);
  CHECK(find_op("conv2d")->kind == FusionKind::out_elementwise_fusable);
  CHECK(find_op("matmul")->kind == FusionKind::out_elementwise_fusable);
  CHECK(find_op("nonexistent") == nullptr);
  CHECK(all_ops().size() >= 25);
}

TEST_CASE("builder errors point at the call that made them") {
  GraphBuilder g("bad");
  auto x = g.input("x", {1, 3, 8, 8}, Layout::NCHW);
  opfuse::testing::check_graph_error(
      [&] {
        g.conv2d(x, g.param("w", {4, 5, 3, 3}));
      },
      {"conv2d_0", "weight 'w'", "expects 5 input channels", "has 3"});
}

TEST_CASE("JSON round trip is exact for every zoo model") {
  for (ZooSize size : {ZooSize::cpu, ZooSize::gpu}) {
    for (const auto& name : zoo_names()) {
      CAPTURE(name);
      const Graph g = zoo_model(name, size);
      const std::string text = graph_to_json_string(g);
      const Graph back = graph_from_json_string(text);
      CHECK(back == g);
      CHECK(graph_to_json_string(back) == text);
    }
  }
}

TEST_CASE("JSON round trip keeps explicit data, float attributes and named outputs exactly") {
  const std::string text = R"({
 "format": "opfuse.graph",
 "version": 1,
 "name": "exact",
 "inputs": [
  {
   "name": "x",
   "shape": [2,3],
   "dtype": "f16"
  }
 ],
 "params": [
  {
   "name": "w",
   "shape": [3],
   "data": [0.1,-2.5,3.0000001]
  }
 ],
 "nodes": [
  {
   "name": "scale",
   "op": "mul",
   "inputs": ["x","w"],
   "outputs": ["scaled"]
  },
  {
   "name": "act",
   "op": "leaky_relu",
   "inputs": ["scaled"],
   "attrs": {
    "alpha": 0.123456789
   }
  }
 ],
 "outputs": ["act"]
}
)";
  const Graph g = graph_from_json_string(text);
  CHECK(g.tensor("w").data == std::vector<float>{0.1f, -2.5f, 3.0000001f});
  CHECK(std::get<double>(g.nodes()[1].attrs.at("alpha")) == 0.123456789);
  CHECK(g.tensor("act").dtype == DType::f16);
  const Graph back = graph_from_json_string(graph_to_json_string(g));
  CHECK(back == g);
}

TEST_CASE("param values are deterministic and follow their init range") {
  Tensor p;
  p.name = "w";
  p.kind = TensorKind::param;
  p.shape = {1000};
  p.init = {0.5, 1.5};
  const HostTensor a = param_values(p), b = param_values(p);
  CHECK(a.data == b.data);
  for (float v : a.data) {
    CHECK(v >= 0.5f);
    CHECK(v < 1.5f);
  }
  p.name = "w2";
  CHECK(param_values(p).data != a.data);  // seeded by name
}

TEST_CASE("round_to_f16 rounds to nearest even and saturates to infinity") {
  CHECK(round_to_f16(1.0f) == 1.0f);
  CHECK(round_to_f16(1.0f + std::ldexp(1.0f, -11)) == 1.0f);  // a tie rounds to even
  CHECK(round_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 1.0f + std::ldexp(1.0f, -9));
  CHECK(round_to_f16(65504.0f) == 65504.0f);
  CHECK(std::isinf(round_to_f16(70000.0f)));
  CHECK(round_to_f16(std::ldexp(1.0f, -24)) == std::ldexp(1.0f, -24));  // smallest subnormal
}

TEST_CASE("subgraph: a group of nodes as a graph of its own") {
  const Graph g = zoo_model("mixed", ZooSize::cpu);
  const Graph s = subgraph(g, {"batch_norm_0", "relu_0", "max_pool_0"}, "part");
  CHECK(s.name == "part");
  CHECK(s.nodes().size() == 3);
  // conv2d_0's output comes in from outside; BN's params stay params with their init.
  REQUIRE(s.inputs().size() == 1);
  CHECK(s.inputs()[0] == g.nodes()[0].outputs[0]);
  CHECK(s.tensor(s.inputs()[0]).shape == g.tensor(g.nodes()[0].outputs[0]).shape);
  CHECK(s.params().size() == 4);
  // relu_0's output is read outside (by avg_pool_0), max_pool_0's is a graph output.
  CHECK(s.outputs() == std::vector<std::string>{"relu_0", "max_pool_0"});
  CHECK(s.tensor("max_pool_0").shape == g.tensor("max_pool_0").shape);
  opfuse::testing::check_graph_error(
      [&] {
        subgraph(g, {"relu_0", "nope"}, "bad");
      },
      {"nope", "mixed"});
}
