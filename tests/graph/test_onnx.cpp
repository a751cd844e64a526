// ONNX import: models written here with the ONNX protobuf API.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
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
                                       {"input 'x'", "axis 0", "symbolic dimension 'N'", "--dim N="});
    // Bound: the size given, the name kept.
    const Graph g = import_onnx_bytes(om.bytes(), "<onnx>", "", {{"N", 3}});
    CHECK(g.tensor("x").shape == Shape{3, 4});
    CHECK(g.tensor("x").dim_names == std::vector<std::string>{"N", ""});
    CHECK(g.tensor("y").shape == Shape{3, 4});
    opfuse::testing::check_graph_error(
        [&] { import_onnx_bytes(om.bytes(), "<onnx>", "", {{"N", 0}}); }, {"'N'", "size 0"});
    opfuse::testing::check_graph_error(
        [&] { import_onnx_bytes(om.bytes(), "<onnx>", "", {{"N", 2}, {"batch", 2}}); },
        {"no input has a dimension named 'batch'", "its symbols: N"});
  }
  {
    // ceil_mode with count_include_pad: PyTorch counts the declared pads, not the window's
    // overhang past the end.
    OnnxModel om;
    om.input("x", {1, 1, 8, 8});
    auto* p = om.node("AveragePool", "ap", {"x"}, "y");
    OnnxModel::ints(p, "kernel_shape", {3, 3});
    OnnxModel::ints(p, "strides", {2, 2});
    OnnxModel::i(p, "ceil_mode", 1);
    OnnxModel::i(p, "count_include_pad", 1);
    om.output("y");
    opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes()); },
                                       {"node 'ap'", "ceil_mode = 1 with count_include_pad = 1"});
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
  {
    // Found by fuzz_onnx: a pool with no input escaped as std::out_of_range.
    OnnxModel om;
    om.input("x", {1, 1, 8, 8});
    auto* p = om.node("MaxPool", "mp", {}, "y");
    OnnxModel::ints(p, "kernel_shape", {2, 2});
    OnnxModel::i(p, "ceil_mode", 1);
    om.output("y");
    opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes(), "noin.onnx"); },
                                       {"node 'mp'", "MaxPool", "has 0 inputs"});
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

TEST_CASE("ONNX external data: weights in a file beside the model, checked and refused clearly") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "opfuse_test_external";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  // Two weights in one data file, the second at an offset, as torch.onnx.export(dynamo=True)
  // writes MODEL.onnx.data; the bias in a sub-folder.
  const std::vector<float> w = random_values(2 * 3, -1, 1, 3), b = {0.5f, -0.25f};
  {
    std::ofstream data(dir / "m.onnx.data", std::ios::binary);
    const std::vector<float> pad(4, 9.0f);
    data.write(reinterpret_cast<const char*>(pad.data()), 16);
    data.write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size() * 4));
    std::ofstream(dir / "sub/b.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), 8);
  }
  auto model = [&](const std::string& w_location, int64_t offset, int64_t length,
                   const std::string& b_location = "sub/b.bin") {
    OnnxModel om(20);
    om.input("x", {4, 3});
    om.init_external("w", {3, 2}, w_location, offset, length);
    om.init_external("b", {2}, b_location, 0, -1);
    om.node("Gemm", "fc", {"x", "w", "b"}, "y");
    om.output("y");
    const fs::path path = dir / "m.onnx";
    std::ofstream(path, std::ios::binary) << om.bytes();
    return path.string();
  };
  const Graph g = import_onnx(model("m.onnx.data", 16, 24));
  CHECK(g.tensor("w").data == w);
  CHECK(g.tensor("b").data == b);
  const TensorMap in = random_inputs(g, 1);
  CHECK(opfuse::reference::run(g, in).at("y").data.size() == 8);

  opfuse::testing::check_graph_error([&] { import_onnx(model("/etc/passwd", 0, 24)); },
                                     {"initializer 'w'", "'/etc/passwd'", "outside the model's folder"});
  opfuse::testing::check_graph_error([&] { import_onnx(model("../m.onnx.data", 16, 24)); },
                                     {"initializer 'w'", "'../m.onnx.data'", "outside"});
  opfuse::testing::check_graph_error([&] { import_onnx(model("missing.data", 0, 24)); },
                                     {"initializer 'w'", "'missing.data'", "not found"});
  opfuse::testing::check_graph_error(
      [&] { import_onnx(model("m.onnx.data", 16, 20)); },
      {"initializer 'w'", "length 20 bytes", "need 24"});
  opfuse::testing::check_graph_error(
      [&] { import_onnx(model("m.onnx.data", 32, 24)); },
      {"initializer 'w'", "bytes [32, 56)", "'m.onnx.data'", "which has 40"});
  opfuse::testing::check_graph_error(
      [&] { import_onnx(model("m.onnx.data", 16, -1, "sub")); },
      {"initializer 'b'", "'sub'", "not found"});
  // Found by fuzz_onnx: dims far larger than the file were allocated before the file's size
  // was checked (out of memory); now the range is checked first.
  {
    OnnxModel om(20);
    om.input("x", {4, 3});
    om.init_external("w", {3, int64_t(1) << 30}, "m.onnx.data", 0, -1);
    om.node("MatMul", "mm", {"x", "w"}, "y");
    om.output("y");
    std::ofstream(dir / "huge.onnx", std::ios::binary) << om.bytes();
    opfuse::testing::check_graph_error([&] { import_onnx((dir / "huge.onnx").string()); },
                                       {"initializer 'w'", "which has 40"});
  }
  // A link inside the folder that points outside it.
  fs::create_symlink(fs::temp_directory_path(), dir / "out");
  opfuse::testing::check_graph_error([&] { import_onnx(model("out/x.data", 0, 24)); },
                                     {"initializer 'w'", "resolves outside the model's folder"});
  // Bytes without a folder (a fuzzer's, a caller's buffer): external data has nowhere to be.
  OnnxModel om;
  om.input("x", {4, 3});
  om.init_external("w", {3, 2}, "m.onnx.data", 16, 24);
  om.node("MatMul", "mm", {"x", "w"}, "y");
  om.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes(), "buf.onnx"); },
                                     {"initializer 'w'", "not read from a file"});
  fs::remove_all(dir);
}

TEST_CASE("ONNX Slice and Split: constant bounds, every attribute form, against the reference") {
  // Slice with axes and steps as inputs (opset 13+), on an NCHW tensor; Split three ways: sizes
  // as an input (13+), num_outputs (18+), and equal parts by the output count.
  for (int opset : {13, 18, 20}) {
    CAPTURE(opset);
    OnnxModel om(opset);
    om.input("x", {1, 6, 4, 5});
    om.init_ints("st", {1, -1});
    om.init_ints("en", {5, -6});
    om.init_ints("ax", {1, 3});
    om.init_ints("sp", {2, -1});
    om.node("Slice", "sl", {"x", "st", "en", "ax", "sp"}, "s");  // [1, 2, 4, 5]
    auto* split = om.m.mutable_graph()->add_node();
    split->set_op_type("Split");
    split->set_name("split");
    split->add_input("x");
    if (opset < 18) {
      om.init_ints("sizes", {1, 2, 3});
      split->add_input("sizes");
    } else {
      OnnxModel::i(split, "num_outputs", 3);
    }
    for (const char* o : {"p0", "p1", "p2"}) split->add_output(o);
    OnnxModel::i(split, "axis", 1);
    om.node("Relu", "r", {"s"}, "y");
    om.node("Concat", "cat", {"p2", "p0"}, "z");
    OnnxModel::i(om.m.mutable_graph()->mutable_node(om.m.graph().node_size() - 1), "axis", 1);
    om.output("y");
    om.output("z");
    const Graph g = import_onnx_bytes(om.bytes(), "slice.onnx");
    CHECK(g.tensor("y").shape == Shape{1, 2, 4, 5});
    CHECK(g.tensor("z").shape == Shape{1, 4, 4, 5});  // 3 + 1 channels, or 2 + 2
    const TensorMap in = random_inputs(g, 2);
    const TensorMap out = opfuse::reference::run(g, in);
    const HostTensor& x = in.at("x");
    auto at = [&](int64_t c, int64_t h, int64_t w) { return x.data[size_t((c * 4 + h) * 5 + w)]; };
    // y[0, c, h, w] = relu(x[0, 1 + 2c, h, 4 - w])
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w)
          CHECK(out.at("y").data[size_t((c * 4 + h) * 5 + w)] ==
                std::max(0.0f, at(1 + 2 * c, h, 4 - w)));
    // z = concat(x[:, 3:6], x[:, 0:1]) for sizes 1, 2, 3; concat(x[:, 4:6], x[:, 0:2]) for
    // equal parts of 2.
    const int64_t first = opset < 18 ? 3 : 4, take = opset < 18 ? 3 : 2;
    for (int64_t c = 0; c < 4; ++c) {
      const int64_t src = c < take ? first + c : c - take;
      CHECK(out.at("z").data[size_t(c * 20 + 7)] == at(src, 1, 2));
    }
  }
  OnnxModel om;
  om.input("x", {2, 5});
  om.init_ints("sizes", {2, 2});
  auto* split = om.m.mutable_graph()->add_node();
  split->set_op_type("Split");
  split->set_name("bad_split");
  split->add_input("x");
  split->add_input("sizes");
  split->add_output("a");
  split->add_output("b");
  OnnxModel::i(split, "axis", 1);
  om.output("a");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(om.bytes(), "split.onnx"); },
                                     {"node 'bad_split'", "Split", "[2,2]", "extent 5"});
  // Sizes that sum to the extent but hold a negative part, and a Split with no outputs (once a
  // division by zero).
  OnnxModel neg;
  neg.input("x", {2, 5});
  neg.init_ints("sizes", {7, -2});
  auto* neg_split = neg.node("Split", "neg_split", {"x", "sizes"}, "a");
  neg_split->add_output("b");
  OnnxModel::i(neg_split, "axis", 1);
  neg.output("a");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(neg.bytes(), "split.onnx"); },
                                     {"node 'neg_split'", "[7,-2]", "extent 5"});
  OnnxModel none;
  none.input("x", {2, 5});
  auto* empty = none.m.mutable_graph()->add_node();
  empty->set_op_type("Split");
  empty->set_name("empty_split");
  empty->add_input("x");
  none.output("x");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(none.bytes(), "split.onnx"); },
                                     {"node 'empty_split'", "no outputs"});
}

TEST_CASE("ONNX MaxPool and AveragePool with ceil_mode = 1: the last window overhangs the end") {
  for (const char* op : {"MaxPool", "AveragePool"}) {
    CAPTURE(op);
    OnnxModel om;
    om.input("x", {1, 2, 8, 7});
    auto* p = om.node(op, "pool", {"x"}, "y");
    OnnxModel::ints(p, "kernel_shape", {3, 3});
    OnnxModel::ints(p, "strides", {2, 2});
    OnnxModel::i(p, "ceil_mode", 1);
    om.output("y");
    const Graph g = import_onnx_bytes(om.bytes(), "pool.onnx");
    // H 8: ceil((8 - 3) / 2) + 1 = 4 (floor: 3); W 7: (7 - 3) / 2 + 1 = 3 either way.
    REQUIRE(g.tensor("y").shape == Shape{1, 2, 4, 3});
    const TensorMap in = random_inputs(g, 4);
    const HostTensor& x = in.at("x");
    const HostTensor y = opfuse::reference::run(g, in).at("y");
    const bool max = std::string(op) == "MaxPool";
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double acc = max ? -1e30 : 0;
          int count = 0;
          for (int64_t h = 2 * i; h < std::min<int64_t>(2 * i + 3, 8); ++h)
            for (int64_t w = 2 * j; w < std::min<int64_t>(2 * j + 3, 7); ++w) {
              const double v = x.data[size_t((c * 8 + h) * 7 + w)];
              acc = max ? std::max(acc, v) : acc + v;
              ++count;
            }
          if (!max) acc /= count;  // the overhang is not counted
          CHECK(y.data[size_t((c * 4 + i) * 3 + j)] == doctest::Approx(acc).epsilon(1e-6));
        }
  }
}

TEST_CASE("ONNX shape arithmetic folded at import: ConstantOfShape, Range, Equal, LessOrEqual") {
  // y = x * ConstantOfShape(Shape(x), 2.0); z = Where(Range(0, 4) == 2, x, LessOrEqual(...)
  // as 0/1) : the masks of position-dependent exports, all constant for a static shape.
  OnnxModel om(20);
  om.input("x", {3, 4});
  om.node("Shape", "shape", {"x"}, "sx");
  auto* cos = om.node("ConstantOfShape", "cos", {"sx"}, "two");
  auto* v = cos->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  v->mutable_t()->add_dims(1);
  v->mutable_t()->add_float_data(2.0f);
  om.node("Mul", "mul", {"x", "two"}, "y");
  auto scalar_int = [&](const std::string& name, int64_t value) {
    auto* t = om.m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(value);
  };
  scalar_int("zero", 0);
  scalar_int("four", 4);
  scalar_int("one", 1);
  scalar_int("two_i", 2);
  om.node("Range", "range", {"zero", "four", "one"}, "pos");
  om.node("Equal", "eq", {"pos", "two_i"}, "is2");
  om.node("LessOrEqual", "le", {"pos", "one"}, "le1");
  om.node("Cast", "cast", {"le1"}, "le1f");
  OnnxModel::i(om.m.mutable_graph()->mutable_node(om.m.graph().node_size() - 1), "to",
               onnx::TensorProto::FLOAT);
  om.node("Where", "where", {"is2", "x", "le1f"}, "z");
  om.output("y");
  om.output("z");
  const Graph g = import_onnx_bytes(om.bytes(), "shapes.onnx");
  const TensorMap in = random_inputs(g, 5);
  const TensorMap out = opfuse::reference::run(g, in);
  const HostTensor& x = in.at("x");
  for (size_t i = 0; i < 12; ++i) {
    const size_t col = i % 4;
    CHECK(out.at("y").data[i] == 2 * x.data[i]);
    CHECK(out.at("z").data[i] == (col == 2 ? x.data[i] : col <= 1 ? 1.0f : 0.0f));
  }
  // Only the multiply and the select are left: the rest was constant.
  CHECK(g.nodes().size() == 2);
}

TEST_CASE("ONNX integer inputs: token ids into an embedding table, a mask cast to float") {
  OnnxModel om;
  om.int64_input("ids", {1, 6});
  om.int64_input("mask", {1, 6});
  om.init("table", {11, 4}, opfuse::testing::random_values(44, -1, 1, 3));
  om.node("Gather", "embed", {"table", "ids"}, "e");
  // Constant indices of rank 2 (token type ids): an integer param, the lookup folded.
  auto* tt = om.m.mutable_graph()->add_initializer();
  tt->set_name("types");
  tt->set_data_type(onnx::TensorProto::INT64);
  tt->add_dims(1);
  tt->add_dims(6);
  for (int i = 0; i < 6; ++i) tt->add_int64_data(i % 2);
  om.init("type_table", {2, 4}, opfuse::testing::random_values(8, -1, 1, 4));
  om.node("Gather", "types_embed", {"type_table", "types"}, "t");
  om.node("Add", "sum", {"e", "t"}, "s");
  om.init_ints("axes", {2});
  om.node("Unsqueeze", "m3", {"mask", "axes"}, "m");
  OnnxModel::i(om.node("Cast", "mf", {"m"}, "mfloat"), "to", onnx::TensorProto::FLOAT);
  om.node("Mul", "masked", {"s", "mfloat"}, "y");
  om.output("y");
  const Graph g = import_onnx_bytes(om.bytes(), "tokens.onnx");
  CHECK(g.tensor("ids").dtype == DType::i64);
  CHECK(opfuse::graph::index_bound(g, "ids") == 11);
  CHECK(opfuse::graph::index_bound(g, "mask") == 2);
  bool cast = false, folded = true;
  for (const auto& n : g.nodes()) {
    cast = cast || n.op == "cast";
    folded = folded && n.name != "types_embed";
  }
  CHECK(cast);
  CHECK(folded);
  // Against hand-computed values: y[0, j, :] = (table[ids[j]] + type_table[j % 2]) * mask[j].
  opfuse::graph::TensorMap in;
  in["ids"] = opfuse::graph::HostTensor({1, 6});
  in["ids"].data = {3, 10, 0, -1, 5, 3};
  in["mask"] = opfuse::graph::HostTensor({1, 6});
  in["mask"].data = {1, 1, 0, 1, 1, 0};
  const auto out = opfuse::reference::run(g, in).at("y");
  const auto table = opfuse::testing::random_values(44, -1, 1, 3);
  const auto types = opfuse::testing::random_values(8, -1, 1, 4);
  for (int j = 0; j < 6; ++j) {
    const int id = int(in["ids"].data[size_t(j)] < 0 ? in["ids"].data[size_t(j)] + 11
                                                     : in["ids"].data[size_t(j)]);
    for (int c = 0; c < 4; ++c) {
      const float want = (table[size_t(id * 4 + c)] + types[size_t((j % 2) * 4 + c)]) *
                         in["mask"].data[size_t(j)];
      CHECK(out.data[size_t(j * 4 + c)] == doctest::Approx(want).epsilon(1e-6));
    }
  }
  // A cast an integer tensor cannot take.
  OnnxModel bad;
  bad.int64_input("mask", {1, 6});
  OnnxModel::i(bad.node("Cast", "to_double", {"mask"}, "b"), "to", onnx::TensorProto::DOUBLE);
  bad.output("b");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(bad.bytes(), "cast.onnx"); },
                                     {"node 'to_double'", "casts to float32", "type 11"});
}

TEST_CASE("ONNX masks and shapes as PyTorch 2.15's exporters write them") {
  // TorchScript's GPT-2 causal mask: arange(4)[None, :] <= arange(4)[:, None] broadcast to
  // [4, 4], expanded by a shape computed with Where(Equal(shape, -1), 1, shape), then
  // Where(mask, 0, -1e9) added to the scores. All constant: folded at import.
  OnnxModel om(17);
  om.input("scores", {1, 1, 4, 4});
  om.init_ints("cols", {0, 1, 2, 3}, {1, 4});
  om.init_ints("rows", {0, 1, 2, 3}, {4, 1});
  om.node("LessOrEqual", "causal", {"cols", "rows"}, "le");
  om.init_ints("target", {1, -1, 4, 4});
  om.init_ints("minus_one", {-1});
  om.init_ints("ones", {1, 1, 1, 1});
  om.node("Equal", "is_free", {"target", "minus_one"}, "free");
  om.node("Where", "shape", {"free", "ones", "target"}, "expand_to");
  om.node("Expand", "expand_mask", {"le", "expand_to"}, "mask4");
  om.scalar("zero", 0.0f);
  om.scalar("neg", -1e9f);
  om.node("Where", "additive", {"mask4", "zero", "neg"}, "bias");
  om.node("Add", "masked", {"scores", "bias"}, "y");
  // Dynamo's BERT: position ids picked from a buffer by GatherElements, an int64 attention
  // mask cast to bool, broadcast by GatherND with constant indices, and'ed with a constant
  // bool, its Where a computed condition.
  om.int64_input("attention", {1, 4});
  om.init_ints("buffer", {10, 11, 12, 13, 14, 15}, {1, 6});
  om.init_ints("picks", {3, 0, 5, 1}, {1, 4});
  OnnxModel::i(om.node("GatherElements", "positions", {"buffer", "picks"}, "pos"), "axis", 1);
  om.init("table", {16, 2}, opfuse::testing::random_values(32, -1, 1, 9));
  om.node("Gather", "position_embed", {"table", "pos"}, "pe_const");
  om.input("h", {1, 4, 2});
  om.node("Add", "embed", {"h", "pe_const"}, "pe");
  OnnxModel::i(om.node("Cast", "mask_bool", {"attention"}, "mb"), "to", onnx::TensorProto::BOOL);
  std::vector<int64_t> tuples;  // out[0, 0, i, j] = mb[0, j]
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) tuples.insert(tuples.end(), {0, j});
  }
  om.init_ints("tuples", tuples, {1, 1, 4, 4, 2});
  OnnxModel::i(om.node("GatherND", "broadcast_mask", {"mb", "tuples"}, "mb4"), "batch_dims", 0);
  om.init_ints("keep", {1, 1, 0, 1}, {1, 1, 4, 1}, onnx::TensorProto::BOOL);
  om.node("And", "both", {"keep", "mb4"}, "allowed");
  om.node("Where", "mask_bias", {"allowed", "zero", "neg"}, "mbias");
  om.node("Add", "masked2", {"scores", "mbias"}, "y2");
  // Reshape with allowzero = 1 (dynamo sets it on every Reshape) and no 0 in the shape.
  om.init_ints("flat", {1, 16});
  OnnxModel::i(om.node("Reshape", "flatten", {"y2", "flat"}, "y3"), "allowzero", 1);
  om.output("y");
  om.output("pe");
  om.output("y3");
  const Graph g = import_onnx_bytes(om.bytes(), "masks.onnx");
  for (const auto& n : g.nodes()) {
    INFO(n.name);
    CHECK(n.name != "causal");  // folded
    CHECK(n.name != "expand_mask");
  }
  TensorMap in;
  in["scores"] = HostTensor({1, 1, 4, 4});
  for (int k = 0; k < 16; ++k) in["scores"].data[size_t(k)] = float(k);
  in["attention"] = HostTensor({1, 4});
  in["attention"].data = {1, 0, 1, 1};
  in["h"] = HostTensor({1, 4, 2});  // zeros: pe is the looked-up table rows
  const TensorMap out = opfuse::reference::run(g, in);
  const auto table = opfuse::testing::random_values(32, -1, 1, 9);
  const int picked[4] = {13, 10, 15, 11};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float s = float(i * 4 + j);
      CHECK(out.at("y").data[size_t(i * 4 + j)] == (j <= i ? s : s - 1e9f));
      const bool allowed = in["attention"].data[size_t(j)] != 0 && i != 2;
      CHECK(out.at("y3").data[size_t(i * 4 + j)] == (allowed ? s : s - 1e9f));
    }
    for (int c = 0; c < 2; ++c) {
      CHECK(out.at("pe").data[size_t(i * 2 + c)] == table[size_t(picked[i] * 2 + c)]);
    }
  }
  // allowzero = 1 with a 0 in the shape asks for an empty axis: refused by name.
  OnnxModel zero(20);
  zero.input("x", {2, 3});
  zero.init_ints("s", {0, 6});
  OnnxModel::i(zero.node("Reshape", "empty", {"x", "s"}, "y"), "allowzero", 1);
  zero.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(zero.bytes(), "zero.onnx"); },
                                     {"node 'empty'", "allowzero = 1", "[0,6]"});
  // The folds index integer constants by their dims: dims that disagree with the values are
  // refused before any fold reads past them.
  OnnxModel short_ints(20);
  short_ints.input("x", {2, 2});
  short_ints.init_ints("mask", {1, 0, 1}, {2, 2});
  short_ints.init_ints("two", {2});
  short_ints.node("Expand", "grow", {"mask", "two"}, "m");
  short_ints.node("Where", "pick", {"m", "x", "x"}, "y");
  short_ints.output("y");
  opfuse::testing::check_graph_error(
      [&] { import_onnx_bytes(short_ints.bytes(), "short.onnx"); },
      {"integer constant 'mask'", "[2,2]", "carries 3 values"});
}

TEST_CASE("ONNX HardSigmoid and HardSwish (MobileNetV3) against their definitions") {
  OnnxModel om(17);
  om.input("x", {1, 8});
  auto* hs = om.node("HardSigmoid", "gate", {"x"}, "g");
  OnnxModel::f(hs, "alpha", 1.0f / 6);
  OnnxModel::f(hs, "beta", 0.5f);
  om.node("HardSwish", "act", {"x"}, "a");
  om.output("g");
  om.output("a");
  const Graph g = import_onnx_bytes(om.bytes(), "hard.onnx");
  TensorMap in;
  in["x"] = HostTensor({1, 8});
  in["x"].data = {-4, -3, -1.5f, 0, 0.75f, 2, 3, 5};
  const TensorMap out = opfuse::reference::run(g, in);
  for (size_t i = 0; i < 8; ++i) {
    const double x = in["x"].data[i], gate = std::clamp(x / 6 + 0.5, 0.0, 1.0);
    CHECK(out.at("g").data[i] == doctest::Approx(gate).epsilon(1e-6));
    CHECK(out.at("a").data[i] == doctest::Approx(x * gate).epsilon(1e-6));
  }
}

TEST_CASE("ONNX Pad, constant mode: zero pads pass through, others pad and crop as defined") {
  // y = Pad(x, begins [0, 1, -1], ends [0, 2, 1], 0.5): axis 1 grows by 1 + 2, axis 2 loses
  // its first column and gains one at the end. z = Relu(Pad(x, all zero)) is Relu(x).
  OnnxModel om(20);
  om.input("x", {2, 3, 4});
  om.init_ints("pads", {0, 1, -1, 0, 2, 1});
  om.scalar("half", 0.5f);
  om.node("Pad", "pad", {"x", "pads", "half"}, "y");
  om.init_ints("none", {0, 0, 0, 0, 0, 0});
  om.node("Pad", "nothing", {"x", "none"}, "p");
  om.node("Relu", "relu", {"p"}, "z");
  om.output("y");
  om.output("z");
  const Graph g = import_onnx_bytes(om.bytes(), "pad.onnx");
  CHECK(g.tensor("y").shape == Shape{2, 6, 4});
  const TensorMap in = random_inputs(g, 7);
  const TensorMap out = opfuse::reference::run(g, in);
  const HostTensor& x = in.at("x");
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t c = 0; c < 6; ++c) {
      for (int64_t w = 0; w < 4; ++w) {
        const int64_t xc = c - 1, xw = w + 1;  // the source element, if inside x
        const float want =
            xc >= 0 && xc < 3 && xw < 4 ? x.data[size_t((n * 3 + xc) * 4 + xw)] : 0.5f;
        CHECK(out.at("y").data[size_t((n * 6 + c) * 4 + w)] == want);
      }
    }
  }
  for (size_t i = 0; i < x.data.size(); ++i)
    CHECK(out.at("z").data[i] == std::max(0.0f, x.data[i]));

  OnnxModel reflect(20);
  reflect.input("x", {1, 4});
  reflect.init_ints("pads", {0, 1, 0, 1});
  auto* r = reflect.node("Pad", "mirror", {"x", "pads"}, "y");
  auto* mode = r->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("reflect");
  reflect.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(reflect.bytes(), "reflect.onnx"); },
                                     {"node 'mirror'", "mode 'reflect'", "constant only"});
  OnnxModel empty(20);
  empty.input("x", {1, 4});
  empty.init_ints("pads", {0, -2, 0, -2});
  empty.node("Pad", "crop", {"x", "pads"}, "y");
  empty.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(empty.bytes(), "crop.onnx"); },
                                     {"node 'crop'", "crop axis 1 of extent 4 to nothing"});
}

TEST_CASE("ONNX masks from float constants fold at import: ScatterND, Equal, Not (Swin's)") {
  // Swin's shifted-window mask, small: region ids written into zeros by ScatterND, their
  // pairwise differences, != 0 as Not(Equal(d, 0)), and -100 where they differ.
  OnnxModel om(20);
  om.input("x", {4, 4});
  om.init_ints("shape", {4});
  om.node("ConstantOfShape", "zeros", {"shape"}, "z");  // float 0 by default
  om.init_ints("at", {1, 3}, {2, 1});
  om.init("ids", {2}, {1.0f, 2.0f});
  om.node("ScatterND", "regions", {"z", "at", "ids"}, "r");  // [0, 1, 0, 2]
  om.init_ints("row", {0});
  om.init_ints("col", {1});
  om.node("Unsqueeze", "as_row", {"r", "row"}, "r_row");
  om.node("Unsqueeze", "as_col", {"r", "col"}, "r_col");
  om.node("Sub", "diff", {"r_row", "r_col"}, "d");
  om.scalar("zero", 0.0f);
  om.node("Equal", "same", {"d", "zero"}, "eq");
  om.node("Not", "differ", {"eq"}, "ne");
  om.scalar("minus100", -100.0f);
  om.node("Where", "mask", {"ne", "minus100", "zero"}, "m");
  om.node("Add", "masked", {"x", "m"}, "y");
  om.output("y");
  const Graph g = import_onnx_bytes(om.bytes(), "swin_mask.onnx");
  CHECK(g.nodes().size() == 1);  // only the add: the mask is a constant
  const TensorMap in = random_inputs(g, 3);
  const TensorMap out = opfuse::reference::run(g, in);
  const float region[4] = {0, 1, 0, 2};
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      const float m = region[j] != region[i] ? -100.0f : 0.0f;
      CHECK(out.at("y").data[i * 4 + j] == in.at("x").data[i * 4 + j] + m);
    }
  }

  // Data computed at run time cannot be scattered into at import.
  OnnxModel runtime(20);
  runtime.input("x", {4});
  runtime.init_ints("at", {1}, {1, 1});
  runtime.init("v", {1}, {5.0f});
  runtime.node("ScatterND", "write", {"x", "at", "v"}, "y");
  runtime.output("y");
  opfuse::testing::check_graph_error([&] { import_onnx_bytes(runtime.bytes(), "scatter.onnx"); },
                                     {"node 'write'", "ScatterND", "constants"});
}

TEST_CASE("ONNX TorchScript-style shape arithmetic: F.pad's pads, Mod, index tuples, Shape tails") {
  // F.pad(x, (0, pad_w)) as the TorchScript exporter writes it, pad_w = (4 - W % 4) % 4 = 1
  // for W = 7: the pads list [0, pad_w] + zeros for the other axes, a [-1, 2] matrix reversed
  // and transposed to ONNX's order, and Shape(x)[2:] (empty for a matrix) concatenated on.
  OnnxModel om(17);
  om.input("x", {3, 7});
  om.node("Shape", "shape", {"x"}, "sx");
  om.init_ints("one", {1});
  om.init_ints("zero", {0});
  om.init_ints("four", {4});
  om.init_ints("two", {2});
  om.init_ints("big", {INT64_MAX});
  om.node("Slice", "width", {"sx", "one", "two"}, "w");  // [7]
  om.node("Mod", "rem", {"w", "four"}, "r");             // [3]
  om.node("Sub", "need", {"four", "r"}, "n");            // [1]
  om.node("Mod", "padw", {"n", "four"}, "pw");           // [1]
  om.node("Slice", "tail", {"sx", "two", "big"}, "t");   // [] (empty)
  om.init_ints("zeros2", {0, 0});
  om.node("Concat", "list", {"zero", "pw", "zeros2", "t"}, "pl");  // [0, 1, 0, 0]
  OnnxModel::i(om.m.mutable_graph()->mutable_node(om.m.graph().node_size() - 1), "axis", 0);
  om.init_ints("rows", {-1, 2});
  om.node("Reshape", "pairs", {"pl", "rows"}, "pm");  // [[0, 1], [0, 0]]
  om.init_ints("minus1", {-1});
  om.init_ints("lowest", {INT64_MIN});
  om.node("Slice", "reverse", {"pm", "minus1", "lowest", "zero", "minus1"}, "rv");
  auto* tr = om.node("Transpose", "cols", {"rv"}, "tp");  // [[0, 0], [0, 1]]
  OnnxModel::ints(tr, "perm", {1, 0});
  om.node("Reshape", "flat", {"tp", "minus1"}, "pads");  // [0, 0, 0, 1]
  om.node("Pad", "pad", {"x", "pads"}, "y");
  om.output("y");
  const Graph g = import_onnx_bytes(om.bytes(), "fpad.onnx");
  REQUIRE(g.tensor("y").shape == Shape{3, 8});
  const TensorMap in = random_inputs(g, 11);
  const TensorMap out = opfuse::reference::run(g, in);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      CHECK(out.at("y").data[i * 8 + j] == (j < 7 ? in.at("x").data[i * 7 + j] : 0.0f));
    }
  }

  // Mod follows the divisor's sign (fmod = 0) or the dividend's (fmod = 1); index tuples
  // concatenated along axis 1; updates through an expand of a param (a node until the
  // ScatterND folds it, then pruned).
  OnnxModel mod(17);
  mod.input("x", {2, 3});
  mod.input("v", {2});
  mod.init_ints("a", {-7, 7});
  mod.init_ints("b", {3, -3});
  mod.node("Mod", "py", {"a", "b"}, "m0");                          // [2, -2]
  OnnxModel::i(mod.node("Mod", "c", {"a", "b"}, "m1"), "fmod", 1);  // [-1, 1]
  for (const char* m : {"m0", "m1"}) {
    auto* cast = mod.node("Cast", std::string(m) + "_cast", {m}, std::string(m) + "_f");
    OnnxModel::i(cast, "to", onnx::TensorProto::FLOAT);
    mod.node("Mul", std::string(m) + "_mul", {"v", std::string(m) + "_f"}, std::string(m) + "_v");
    mod.output(std::string(m) + "_v");
  }
  mod.init_ints("r", {0, 1}, {2, 1});
  mod.init_ints("c0", {2, 0}, {2, 1});
  OnnxModel::i(mod.node("Concat", "tuples", {"r", "c0"}, "at"), "axis", 1);  // [[0,2],[1,0]]
  mod.init("nine", {1}, {9.0f});
  mod.init_ints("n2", {2});
  mod.node("Expand", "nines", {"nine", "n2"}, "upd");
  mod.init_ints("shape", {2, 3});
  mod.node("ConstantOfShape", "zeros", {"shape"}, "z");
  mod.node("ScatterND", "put", {"z", "at", "upd"}, "s");
  mod.node("Add", "plus", {"x", "s"}, "y");
  mod.output("y");
  const Graph gm = import_onnx_bytes(mod.bytes(), "mod.onnx");
  CHECK(gm.nodes().size() == 3);  // the two multiplies and the add: the expand was pruned
  for (const auto& n : gm.nodes()) CHECK(n.op != "expand");
  const TensorMap min = random_inputs(gm, 13);
  const TensorMap mout = opfuse::reference::run(gm, min);
  const float m0[2] = {2, -2}, m1[2] = {-1, 1}, s[6] = {0, 0, 9, 9, 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    CHECK(mout.at("m0_v").data[i] == min.at("v").data[i] * m0[i]);
    CHECK(mout.at("m1_v").data[i] == min.at("v").data[i] * m1[i]);
  }
  for (size_t i = 0; i < 6; ++i) CHECK(mout.at("y").data[i] == min.at("x").data[i] + s[i]);
}
