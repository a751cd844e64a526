// ONNX import: models written here with the ONNX protobuf API.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/reference/executor.h"
#include "tests/onnx_model.h"
#include "tests/testing.h"

using namespace opfuse::graph;
using opfuse::testing::OnnxModel;
using opfuse::testing::random_values;

namespace {

std::string floats_json(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(v[i]));
    s += (i ? "," : "") + std::string(buf);
  }
  return s + "]";
}

}  // namespace

TEST_CASE("an ONNX Conv-BN-Relu-MaxPool model imports to the JSON graph and computes the same") {
  const auto w = random_values(4 * 3 * 3 * 3, -0.3f, 0.3f, 1), b = random_values(4, -0.1f, 0.1f, 2);
  const auto gamma = random_values(4, 0.5f, 1.5f, 3), beta = random_values(4, -0.2f, 0.2f, 4);
  const auto mean = random_values(4, -0.2f, 0.2f, 5), var = random_values(4, 0.5f, 1.5f, 6);

  OnnxModel om;
  om.input("x", {1, 3, 10, 10});
  om.init("w", {4, 3, 3, 3}, w);
  om.init("b", {4}, b);
  om.init("gamma", {4}, gamma);
  om.init("beta", {4}, beta);
  om.init("mean", {4}, mean);
  om.init("var", {4}, var);
  auto* conv = om.node("Conv", "conv", {"x", "w", "b"}, "c");
  OnnxModel::ints(conv, "kernel_shape", {3, 3});
  OnnxModel::ints(conv, "pads", {1, 1, 1, 1});
  OnnxModel::ints(conv, "strides", {1, 1});
  auto* bn = om.node("BatchNormalization", "bn", {"c", "gamma", "beta", "mean", "var"}, "n");
  OnnxModel::f(bn, "epsilon", 0.0009765625f);  // 2^-10: exact in f32 and in JSON
  om.node("Relu", "relu", {"n"}, "r");
  auto* pool = om.node("MaxPool", "pool", {"r"}, "y");
  OnnxModel::ints(pool, "kernel_shape", {2, 2});
  OnnxModel::ints(pool, "strides", {2, 2});
  om.output("y");
  const std::string path = "cbr_pool_test.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << om.bytes();
  }
  const Graph imported = import_onnx(path);

  const std::string json = R"({"format": "opfuse.graph", "version": 1, "name": "onnx_test",
    "inputs": [{"name": "x", "shape": [1,3,10,10], "layout": "NCHW"}],
    "params": [{"name": "w", "shape": [4,3,3,3], "data": )" +
                           floats_json(w) + R"(},
               {"name": "b", "shape": [4], "data": )" +
                           floats_json(b) + R"(},
               {"name": "gamma", "shape": [4], "data": )" +
                           floats_json(gamma) + R"(},
               {"name": "beta", "shape": [4], "data": )" +
                           floats_json(beta) + R"(},
               {"name": "mean", "shape": [4], "data": )" +
                           floats_json(mean) + R"(},
               {"name": "var", "shape": [4], "data": )" +
                           floats_json(var) + R"(}],
    "nodes": [
      {"name": "conv", "op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
       "attrs": {"strides": [1,1], "pads": [1,1,1,1], "groups": 1, "layout": "NCHW"}},
      {"name": "bn", "op": "batch_norm", "inputs": ["c", "gamma", "beta", "mean", "var"],
       "outputs": ["n"], "attrs": {"epsilon": 0.0009765625, "axis": 1}},
      {"name": "relu", "op": "relu", "inputs": ["n"], "outputs": ["r"]},
      {"name": "pool", "op": "max_pool", "inputs": ["r"], "outputs": ["y"],
       "attrs": {"kernel": [2,2], "strides": [2,2], "layout": "NCHW"}}],
    "outputs": ["y"]})";
  const Graph from_json = graph_from_json_string(json);
  CHECK(imported == from_json);

  const TensorMap inputs = random_inputs(imported, 3);
  const HostTensor a = opfuse::reference::run(imported, inputs).at("y");
  const HostTensor c = opfuse::reference::run(from_json, inputs).at("y");
  CHECK(a.shape == Shape{1, 4, 5, 5});
  CHECK(a.data == c.data);
  // And through Halide: root schedule against the reference, conv tolerance (test_ops.cpp).
  opfuse::testing::check_root_matches_reference(imported, {1e-4, 1e-4});
  std::remove(path.c_str());
}

TEST_CASE("ONNX Gemm(transB), MatMul, Softmax, Reshape, Transpose, Concat, LayerNormalization") {
  OnnxModel om;
  om.input("x", {2, 6});
  om.init("wt", {4, 6},
          random_values(24, -0.5f, 0.5f, 7));  // [N, K]: nn.Linear's layout, transB = 1
  om.init("bias", {4}, random_values(4, -0.1f, 0.1f, 8));
  om.init_ints("shape", {2, 2, 2});
  om.init("scale", {2}, random_values(2, 0.5f, 1.5f, 9));
  om.init("shift", {2}, random_values(2, -0.5f, 0.5f, 10));
  auto* gemm = om.node("Gemm", "gemm", {"x", "wt", "bias"}, "h");
  OnnxModel::i(gemm, "transB", 1);
  om.node("Reshape", "reshape", {"h", "shape"}, "h3");
  auto* tr = om.node("Transpose", "tr", {"h3"}, "ht");
  OnnxModel::ints(tr, "perm", {0, 2, 1});
  om.node("MatMul", "mm", {"h3", "ht"}, "s");
  auto* sm = om.node("Softmax", "sm", {"s"}, "p");
  OnnxModel::i(sm, "axis", -1);
  auto* cat = om.node("Concat", "cat", {"p", "h3"}, "pc");
  OnnxModel::i(cat, "axis", 1);
  om.node("LayerNormalization", "ln", {"pc", "scale", "shift"}, "y");
  om.output("y");
  const Graph g = import_onnx_bytes(om.bytes(), "gemm.onnx");
  CHECK(g.tensor("wt").shape == Shape{6, 4});  // transposed at import
  CHECK(g.tensor("y").shape == Shape{2, 4, 2});
  opfuse::testing::check_root_matches_reference(g, {1e-4, 1e-4});
}

TEST_CASE("ONNX: unsupported ops and features are refused by name") {
  {
    OnnxModel om;
    om.input("x", {1, 4});
    om.node("LSTM", "rnn", {"x"}, "y");
    om.output("y");
    opfuse::testing::check_graph_error(
        [&] { import_onnx_bytes(om.bytes(), "lstm.onnx"); },
        {"lstm.onnx", "node 'rnn'", "LSTM", "opset 17", "not supported"});
  }
  {
    OnnxModel om;
    om.input("x", {1, 4}, /*symbolic=*/true);
    om.node("Relu", "r", {"x"}, "y");
    om.output("y");
    opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes()); },
                                       {"input 'x'", "symbolic dimension 'N'"});
  }
  {
    OnnxModel om;
    om.input("x", {1, 1, 8, 8});
    auto* p = om.node("MaxPool", "mp", {"x"}, "y");
    OnnxModel::ints(p, "kernel_shape", {2, 2});
    OnnxModel::i(p, "ceil_mode", 1);
    om.output("y");
    opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes()); },
                                       {"node 'mp'", "ceil_mode"});
  }
  {
    // Found by fuzz_onnx: a Gemm weight whose data is shorter than its dims was read past its
    // end.
    OnnxModel om;
    om.input("x", {2, 4});
    om.init("w", {3, 4}, {1, 2, 3});
    auto* gemm = om.node("Gemm", "gemm", {"x", "w"}, "y");
    OnnxModel::i(gemm, "transB", 1);
    om.output("y");
    opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes(), "short.onnx"); },
                                       {"initializer 'w'", "[3,4]", "carries 3 values"});
  }
  opfuse::testing::check_graph_error(
      [] { import_onnx_bytes("not a protobuf at all", "junk.onnx"); },
      {"junk.onnx", "not a valid ONNX model"});
}

TEST_CASE("regression (fuzz): a BOOL initializer without values is refused, not read") {
  // Found by fuzz_onnx: a Gemm whose B was a BOOL initializer carrying no values was
  // transposed at import past the end of its (empty) data.
  OnnxModel om(13);
  om.input("x", {2, 4});
  auto* t = om.m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_dims(7);
  t->add_dims(4);
  auto* g = om.node("Gemm", "gemm", {"x", "w"}, "y");
  OnnxModel::i(g, "transB", 1);
  om.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes(), "bool.onnx"); },
                                     {"initializer 'w'", "[7,4]", "carries 0 values"});
}
