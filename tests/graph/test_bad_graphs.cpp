// Bad graphs, fed through the JSON loader as a user would: each kind gets a GraphError whose
// message names the culprit and says what was expected — never a crash or an abort.
#include <doctest/doctest.h>

#include "fusion/graph/json_io.h"
#include "tests/testing.h"

using opfuse::graph::graph_from_json_string;
using opfuse::testing::check_graph_error;

namespace {

// A graph document with one NCHW input x [1,3,8,8] and the given params, nodes and outputs.
std::string doc(
    const std::string& nodes, const std::string& outputs, const std::string& params = "[]",
    const std::string& inputs = R"([{"name": "x", "shape": [1,3,8,8], "layout": "NCHW"}])") {
  return R"({"format": "opfuse.graph", "version": 1, "name": "bad", "inputs": )" + inputs +
         R"(, "params": )" + params + R"(, "nodes": )" + nodes + R"(, "outputs": )" + outputs + "}";
}

void expect(const std::string& text, std::initializer_list<std::string> needles) {
  check_graph_error([&] { graph_from_json_string(text, "bad.json"); }, needles);
}

const std::string kW = R"([{"name": "w", "shape": [4,3,3,3]}])";

}  // namespace

TEST_CASE("bad graph: cycle") {
  expect(doc(R"([{"name": "a", "op": "add", "inputs": ["x", "b"]},
                 {"name": "b", "op": "relu", "inputs": ["a"]}])",
             R"(["b"])"),
         {"cycle", "'a'", "'b'"});
}

TEST_CASE("bad graph: dangling input reference") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["nowhere"]}])", R"(["r"])"),
         {"node 'r'", "'nowhere'", "dangling"});
}

TEST_CASE("bad graph: duplicate tensor name") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["x"]}])", R"(["x"])"),
         {"node 'r'", "output 'x'", "already declared"});
}

TEST_CASE("bad graph: duplicate node name") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]},
                 {"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["r2"]}])",
             R"(["r"])"),
         {"duplicate node name 'r'"});
}

TEST_CASE("bad graph: tensor produced by two nodes") {
  expect(doc(R"([{"name": "a", "op": "relu", "inputs": ["x"], "outputs": ["t"]},
                 {"name": "b", "op": "tanh", "inputs": ["x"], "outputs": ["t"]}])",
             R"(["t"])"),
         {"node 'b'", "output 't'", "produced by node 'a'"});
}

TEST_CASE("bad graph: shapes that do not broadcast") {
  expect(doc(R"([{"name": "s", "op": "add", "inputs": ["x", "y"]}])", R"(["s"])", "[]",
             R"([{"name": "x", "shape": [2,3]}, {"name": "y", "shape": [4]}])"),
         {"node 's' (add)", "[2,3]", "[4]", "do not broadcast"});
}

TEST_CASE("bad graph: dtype mismatch") {
  expect(doc(R"([{"name": "s", "op": "add", "inputs": ["x", "y"]}])", R"(["s"])", "[]",
             R"([{"name": "x", "shape": [4], "dtype": "f16"}, {"name": "y", "shape": [4]}])"),
         {"node 's'", "f32", "f16"});
}

TEST_CASE("bad graph: missing attribute") {
  expect(doc(R"([{"name": "p", "op": "max_pool", "inputs": ["x"]}])", R"(["p"])"),
         {"node 'p' (max_pool)", "missing attribute 'kernel'"});
}

TEST_CASE("bad graph: stride 0") {
  expect(
      doc(R"([{"name": "c", "op": "conv2d", "inputs": ["x", "w"], "attrs": {"strides": [0, 1]}}])",
          R"(["c"])", kW),
      {"node 'c' (conv2d)", "'strides' must be >= 1", "[0,1]"});
}

TEST_CASE("bad graph: negative padding") {
  expect(
      doc(R"([{"name": "c", "op": "conv2d", "inputs": ["x", "w"], "attrs": {"pads": [1, -1, 1, 1]}}])",
          R"(["c"])", kW),
      {"node 'c'", "'pads' must not be negative"});
}

TEST_CASE("bad graph: kernel larger than the padded input") {
  expect(doc(R"([{"name": "p", "op": "max_pool", "inputs": ["x"], "attrs": {"kernel": [9, 9]}}])",
             R"(["p"])"),
         {"node 'p'", "kernel spans 9", "padded input is only 8"});
}

TEST_CASE("bad graph: unknown op") {
  expect(doc(R"([{"name": "f", "op": "fft", "inputs": ["x"]}])", R"(["f"])"),
         {"node 'f'", "unknown op 'fft'", "known ops"});
}

TEST_CASE("bad graph: empty shape") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["r"])", "[]",
             R"([{"name": "x", "shape": [4,0,2]}])"),
         {"input 'x'", "[4,0,2]", "must be >= 1"});
}

TEST_CASE("bad graph: shape too large for 32-bit indexing") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["r"])", "[]",
             R"([{"name": "x", "shape": [65536,65536]}])"),
         {"input 'x'", "2^31-1", "32-bit"});
  // An intermediate that overflows though its inputs do not.
  expect(doc(R"([{"name": "m", "op": "matmul", "inputs": ["a", "b"]}])", R"(["m"])", "[]",
             R"([{"name": "a", "shape": [65536,1]}, {"name": "b", "shape": [1,65536]}])"),
         {"node 'm'", "2^31-1"});
}

TEST_CASE("bad graph: attribute of the wrong type") {
  expect(
      doc(R"([{"name": "c", "op": "conv2d", "inputs": ["x", "w"], "attrs": {"strides": "two"}}])",
          R"(["c"])", kW),
      {"node 'c'", "'strides' must be a list of ints", "string"});
}

TEST_CASE("bad graph: conv channel mismatch") {
  expect(doc(R"([{"name": "c", "op": "conv2d", "inputs": ["x", "w"]}])", R"(["c"])",
             R"([{"name": "w", "shape": [4,5,3,3]}])"),
         {"node 'c'", "weight 'w'", "expects 5 input channels", "has 3"});
}

TEST_CASE("bad graph: wrong number of inputs") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x", "x"]}])", R"(["r"])"),
         {"node 'r' (relu)", "takes 1 inputs, got 2"});
}

TEST_CASE("bad graph: output that is not a tensor, and no outputs") {
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["q"])"),
         {"graph output 'q'"});
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", "[]"), {"has no outputs"});
}

TEST_CASE("bad graph: matmul inner dimensions differ") {
  expect(doc(R"([{"name": "m", "op": "matmul", "inputs": ["a", "b"]}])", R"(["m"])", "[]",
             R"([{"name": "a", "shape": [2,3]}, {"name": "b", "shape": [4,5]}])"),
         {"node 'm'", "inner dimensions differ", "[2,3]", "[4,5]"});
}

TEST_CASE("bad graph: impossible reshape, bad permutation, bad axis") {
  expect(doc(R"([{"name": "r", "op": "reshape", "inputs": ["x"], "attrs": {"shape": [5, -1]}}])",
             R"(["r"])"),
         {"node 'r'", "cannot reshape [1,3,8,8]"});
  expect(
      doc(R"([{"name": "t", "op": "transpose", "inputs": ["x"], "attrs": {"perm": [0, 1, 1, 3]}}])",
          R"(["t"])"),
      {"node 't'", "not a permutation"});
  expect(
      doc(R"([{"name": "s", "op": "softmax", "inputs": ["x"], "attrs": {"axis": 4}}])", R"(["s"])"),
      {"node 's'", "axis 4 is out of range for rank 4"});
}

TEST_CASE("bad graph: param data of the wrong length, norm params of the wrong shape") {
  expect(doc(R"([{"name": "s", "op": "mul", "inputs": ["x", "k"]}])", R"(["s"])",
             R"([{"name": "k", "shape": [3,1,1], "data": [1, 2]}])"),
         {"param 'k'", "carries 2 values", "needs 3"});
  expect(doc(R"([{"name": "l", "op": "layer_norm", "inputs": ["x", "g", "b"]}])", R"(["l"])",
             R"([{"name": "g", "shape": [7]}, {"name": "b", "shape": [8]}])"),
         {"node 'l'", "gamma 'g' must have shape [8]"});
}

TEST_CASE("bad file: invalid JSON, wrong version, unknown key, wrong type") {
  expect("{\"format\": ", {"bad.json", "not valid JSON"});
  expect(
      R"({"format": "opfuse.graph", "version": 7, "name": "v", "inputs": [], "nodes": [], "outputs": []})",
      {"$.version", "unsupported version 7"});
  expect(
      R"({"format": "opfuse.graph", "version": 1, "name": "v", "inputs": [], "nodes": [], "outputs": [], "extra": 1})",
      {"unknown key 'extra'"});
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": "x"}])", R"(["r"])"),
         {"$.nodes[0].inputs", "expected an array"});
  expect(doc("[]", R"(["x"])", "[]", R"([{"name": "x", "shape": [2], "dtype": "int8"}])"),
         {"$.inputs[0]", "unknown dtype 'int8'"});
}

TEST_CASE("bad graph: invalid groups and clamp bounds") {
  expect(doc(R"([{"name": "c", "op": "conv2d", "inputs": ["x", "w"], "attrs": {"groups": 2}}])",
             R"(["c"])", R"([{"name": "w", "shape": [4,1,3,3]}])"),
         {"node 'c'", "groups 2 must divide input channels 3"});
  expect(
      doc(R"([{"name": "c", "op": "clamp", "inputs": ["x"], "attrs": {"min": 2.0, "max": 1.0}}])",
          R"(["c"])"),
      {"node 'c'", "min <= max"});
}

TEST_CASE("bad file: a number too large for a double (found by fuzz_graph_json)") {
  expect(R"({"format": "opfuse.graph", "version": 1, "name": "n", "x": [-0.05e9778]})",
         {"bad.json", "not valid JSON", "number overflow"});
}

TEST_CASE("a named extent: bound by the caller, kept through a save, refused unbound") {
  const std::string text = doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["r"])", "[]",
                               R"([{"name": "x", "shape": ["batch",3,8,8], "layout": "NCHW"}])");
  expect(text, {"input 'x'", "axis 0", "symbolic dimension 'batch'", "--dim batch="});
  const opfuse::graph::Graph g = graph_from_json_string(text, "named.json", {{"batch", 5}});
  CHECK(g.tensor("r").shape == opfuse::graph::Shape{5, 3, 8, 8});
  CHECK(g.tensor("x").dim_names == std::vector<std::string>{"batch", "", "", ""});
  const opfuse::graph::Graph back = graph_from_json_string(opfuse::graph::graph_to_json_string(g));
  CHECK(back == g);
  check_graph_error([&] { graph_from_json_string(text, "named.json", {{"btach", 5}}); },
                    {"symbolic dimension 'batch'", "sizes were given for: btach"});
  check_graph_error(
      [&] { graph_from_json_string(text, "named.json", {{"batch", 5}, {"btach", 5}}); },
      {"no input has a dimension named 'btach'", "its symbols: batch"});
  expect(doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["r"])", "[]",
             R"([{"name": "x", "shape": [1.5,3,8,8]}])"),
         {"$.inputs[0].shape", "integers or names"});
}

TEST_CASE("a graph saved at one size refuses another size for it") {
  const std::string text = doc(R"([{"name": "r", "op": "relu", "inputs": ["x"]}])", R"(["r"])", "[]",
                               R"([{"name": "x", "shape": ["batch",3,8,8], "layout": "NCHW"}])");
  const std::string saved = opfuse::graph::graph_to_json_string(
      graph_from_json_string(text, "named.json", {{"batch", 5}}));
  CHECK(graph_from_json_string(saved, "saved.json", {{"batch", 5}}).tensor("x").shape[0] == 5);
  check_graph_error([&] { graph_from_json_string(saved, "saved.json", {{"batch", 8}}); },
                    {"saved.json", "was saved at batch = 5, not 8"});
}
