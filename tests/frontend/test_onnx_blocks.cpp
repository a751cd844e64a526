// Bring your own model: blocks as PyTorch's exporter writes them (opset 13: decomposed
// LayerNorm, GELU as erf, SiLU as x * sigmoid(x), Clip with input bounds, MatMul + Add; opset
// 17: LayerNormalization), written here with the ONNX protobuf API. Each is imported,
// canonicalised (the log names the rewrites), planned, run fused through the JIT, and compared
// with the reference executor on the graph as imported, before any rewrite.
//
// Tolerance: reference::kGraphTolerance (1e-4 relative, 2e-4 absolute): the blocks are chains
// of <= ~25 ops with f32 reductions of <= 64 terms, and the rewrites replace a decomposed
// LayerNorm/GELU by the library's kernel, which rounds differently by a few ulp.
#include <doctest/doctest.h>

#include <functional>
#include <map>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/pattern/canonicalize.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/jit.h"
#include "tests/frontend/blocks.h"
#include "tests/testing.h"

using namespace opfuse;
using opfuse::testing::Block;
using opfuse::testing::block_bytes;
using opfuse::testing::blocks;
using opfuse::testing::OnnxModel;

namespace {

std::map<std::string, int> fired(const std::vector<std::string>& log) {
  std::map<std::string, int> out;
  for (const auto& line : log) {
    const std::string rest = line.substr(std::string("canonicalize: ").size());
    out[rest.substr(0, rest.find(':'))]++;
  }
  return out;
}

}  // namespace

TEST_CASE("blocks exported at opsets 13 and 17 import, canonicalise, plan and match") {
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  for (const Block& b : blocks()) {
    for (int opset : {13, 17}) {
      CAPTURE(b.name);
      CAPTURE(opset);
      const graph::Graph raw = graph::import_onnx_bytes(block_bytes(b, opset), b.name + ".onnx");
      graph::Graph g = raw;
      const std::vector<std::string> log = fusion::canonicalize(g);
      for (const auto& l : log) MESSAGE(l);
      CHECK(fired(log) == (opset == 13 ? b.rewrites_13 : b.rewrites_17));
      const fusion::FusionPlan plan = fusion::plan_fusion(g, model);
      CHECK(plan.kernels_fused() < int(g.nodes().size()));
      const graph::TensorMap in = graph::random_inputs(raw, 11);
      const graph::TensorMap want = reference::run(raw, in);
      const graph::TensorMap got = schedules::realize_with_plan(g, plan, in);
      for (const auto& out : raw.outputs()) {
        CAPTURE(out);
        const auto c =
            reference::compare(got.at(out).data, want.at(out).data, reference::kGraphTolerance);
        CHECK_MESSAGE(c.ok(), c.summary());
      }
    }
  }
}

TEST_CASE("a rewrite does not fire when an inner value is used elsewhere or a constant differs") {
  // x * sigmoid(x) where sigmoid(x) is also an output: SiLU would lose it.
  OnnxModel om(13);
  om.input("x", {4, 8});
  om.node("Sigmoid", "sig", {"x"}, "s");
  om.node("Mul", "mul", {"x", "s"}, "y");
  om.output("y");
  om.output("s");
  graph::Graph g = graph::import_onnx_bytes(om.bytes(), "shared.onnx");
  CHECK(fusion::canonicalize(g).empty());
  // Clip(0, 5) is a clamp, not relu6.
  OnnxModel om2(13);
  om2.input("x", {4, 8});
  om2.scalar("lo", 0.0f);
  om2.scalar("hi", 5.0f);
  om2.node("Clip", "clip", {"x", "lo", "hi"}, "y");
  om2.output("y");
  graph::Graph g2 = graph::import_onnx_bytes(om2.bytes(), "clip5.onnx");
  CHECK(fusion::canonicalize(g2).empty());
  CHECK(g2.nodes()[0].op == "clamp");
}

TEST_CASE("a MatMul by a constant [K, N] with no bias to take is a linear without one") {
  // Swin-T's patch merging (nn.Linear, bias=False): x [1, 4, 4, 16] W [16, 8], then a residual
  // Add of an activation, which is no bias; a MatMul of two activations stays a matmul.
  OnnxModel om(17);
  om.input("x", {1, 4, 4, 16});
  om.input("r", {1, 4, 4, 8});
  om.input("y", {1, 4, 16, 8});
  om.init("w", {16, 8}, opfuse::testing::random_values(16 * 8, -0.5f, 0.5f, 21));
  om.node("MatMul", "reduction", {"x", "w"}, "m");
  om.node("Add", "residual", {"m", "r"}, "out");
  om.node("MatMul", "activations", {"x", "y"}, "xy");
  om.output("out");
  om.output("xy");
  const graph::Graph raw = graph::import_onnx_bytes(om.bytes(), "no_bias.onnx");
  graph::Graph g = raw;
  CHECK(fired(fusion::canonicalize(g)) == std::map<std::string, int>{{"linear_no_bias", 1}});
  std::map<std::string, const graph::Node*> by_name;
  for (const auto& n : g.nodes()) by_name[n.name] = &n;
  REQUIRE(by_name.count("reduction"));
  CHECK(by_name.at("reduction")->op == "linear");
  CHECK(by_name.at("reduction")->inputs.size() == 2);
  CHECK(by_name.at("residual")->op == "add");
  CHECK(by_name.at("activations")->op == "matmul");
  const graph::TensorMap in = graph::random_inputs(raw, 5);
  const graph::TensorMap want = reference::run(raw, in);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const graph::TensorMap got = schedules::realize_with_plan(g, fusion::plan_fusion(g, model), in);
  for (const auto& out : raw.outputs()) {
    CAPTURE(out);
    const auto c =
        reference::compare(got.at(out).data, want.at(out).data, reference::kGraphTolerance);
    CHECK_MESSAGE(c.ok(), c.summary());
  }
}

TEST_CASE("a batch norm after a convolution is folded into its weights") {
  using opfuse::testing::random_values;
  // Conv (with and without a bias; dense and depthwise) -> BatchNormalization -> Relu, as the
  // dynamo exporter writes a torchvision block.
  for (const auto& [groups, bias] :
       std::vector<std::pair<int64_t, bool>>{{1, true}, {1, false}, {8, false}}) {
    CAPTURE(groups);
    CAPTURE(bias);
    OnnxModel om(20);
    om.input("x", {1, 8, 10, 10});
    om.init("w", {16, 8 / groups, 3, 3},
            random_values(size_t(16 * 8 / groups * 9), -0.3f, 0.3f, 1));
    std::vector<std::string> conv_in = {"x", "w"};
    if (bias) {
      om.init("b", {16}, random_values(16, -0.2f, 0.2f, 2));
      conv_in.push_back("b");
    }
    auto* c = om.node("Conv", "conv", conv_in, "c");
    OnnxModel::ints(c, "pads", {1, 1, 1, 1});
    OnnxModel::i(c, "group", groups);
    om.init("gamma", {16}, random_values(16, 0.5f, 1.5f, 3));
    om.init("beta", {16}, random_values(16, -0.5f, 0.5f, 4));
    om.init("mean", {16}, random_values(16, -0.5f, 0.5f, 5));
    om.init("var", {16}, random_values(16, 0.2f, 2.0f, 6));
    OnnxModel::f(om.node("BatchNormalization", "bn", {"c", "gamma", "beta", "mean", "var"}, "n"),
                 "epsilon", 1e-3f);
    om.node("Relu", "relu", {"n"}, "y");
    om.output("y");
    const graph::Graph raw = graph::import_onnx_bytes(om.bytes(), "conv_bn.onnx");
    graph::Graph g = raw;
    CHECK(fired(fusion::canonicalize(g)) == std::map<std::string, int>{{"conv_bn", 1}});
    REQUIRE(g.nodes().size() == 2);
    CHECK(g.nodes()[0].op == "conv2d");
    CHECK(g.nodes()[0].inputs.size() == 3);
    const graph::TensorMap in = graph::random_inputs(raw, 5);
    const auto c_ref = reference::compare(reference::run(g, in).at("y").data,
                                          reference::run(raw, in).at("y").data, {1e-5, 1e-5});
    CHECK_MESSAGE(c_ref.ok(), c_ref.summary());
  }
  // Not with a norm's statistics given at run time.
  OnnxModel om(20);
  om.input("x", {1, 4, 6, 6});
  om.input("var", {4});
  om.init("w", {4, 4, 1, 1}, random_values(16, -0.3f, 0.3f, 1));
  om.node("Conv", "conv", {"x", "w"}, "c");
  for (const char* p : {"gamma", "beta", "mean"}) om.init(p, {4}, random_values(4, 0.5f, 1.5f, 2));
  om.node("BatchNormalization", "bn", {"c", "gamma", "beta", "mean", "var"}, "y");
  om.output("y");
  graph::Graph g = graph::import_onnx_bytes(om.bytes(), "conv_bn_input.onnx");
  CHECK(fusion::canonicalize(g).empty());
}

TEST_CASE("unsupported ONNX is refused with the op, the node and the opset") {
  OnnxModel om(13);
  om.input("x", {4, 8});
  om.node("Hardmax", "hm", {"x"}, "y");
  om.output("y");
  try {
    graph::import_onnx_bytes(om.bytes(), "hardmax.onnx");
    FAIL("expected a GraphError");
  } catch (const graph::GraphError& e) {
    const std::string what = e.what();
    CHECK(what.find("Hardmax") != std::string::npos);
    CHECK(what.find("'hm'") != std::string::npos);
    CHECK(what.find("opset 13") != std::string::npos);
  }
}

TEST_CASE("RoBERTa's position ids: integer arithmetic on the token ids, in f32, into a gather") {
  // ids.ne(pad), cumsum along the sequence, times the mask, plus pad: the positions of the
  // tokens, pad for the padding, as transformers' RoBERTa embeddings compute them (dynamo
  // export, opset 20), then the position embedding looked up.
  OnnxModel om(20);
  om.int64_input("ids", {1, 6});
  om.init_ints("pad", {1}, {1});
  om.init_ints("axis", {1}, {1});
  om.node("Equal", "is_pad", {"ids", "pad"}, "eq");
  om.node("Not", "ne", {"eq"}, "mask_b");
  OnnxModel::i(om.node("Cast", "mask_int", {"mask_b"}, "mask"), "to", onnx::TensorProto::INT32);
  om.node("CumSum", "count", {"mask", "axis"}, "cs");
  OnnxModel::i(om.node("Cast", "cs_int", {"cs"}, "csi"), "to", onnx::TensorProto::INT32);
  om.node("Mul", "only_tokens", {"csi", "mask"}, "pm");
  OnnxModel::i(om.node("Cast", "pm_long", {"pm"}, "pml"), "to", onnx::TensorProto::INT64);
  om.node("Add", "from_pad", {"pml", "pad"}, "positions");
  om.init("table", {8, 4}, opfuse::testing::random_values(32, -1, 1, 5));
  om.node("Gather", "embed", {"table", "positions"}, "e");
  // The token types picked from a buffer at the positions (GatherElements along the row).
  om.init_ints("types", {0, 1, 0, 1, 0, 1, 0, 1}, {1, 8});
  OnnxModel::i(om.node("GatherElements", "pick", {"types", "positions"}, "tt"), "axis", 1);
  om.init("type_table", {2, 4}, opfuse::testing::random_values(8, -1, 1, 6));
  om.init_ints("rows_cols", {1, 6});
  om.node("Expand", "tt_batch", {"tt", "rows_cols"}, "tte");  // integers move through expand
  om.node("Gather", "type_embed", {"type_table", "tte"}, "te");
  om.input("x", {1, 6, 4});
  om.node("Add", "plus_positions", {"x", "e"}, "xe");
  om.node("Add", "plus", {"xe", "te"}, "y");
  om.output("y");
  const graph::Graph g = graph::import_onnx_bytes(om.bytes(), "roberta_positions.onnx");
  graph::TensorMap in = graph::random_inputs(g, 3);
  in["ids"].data = {0, 5, 7, 3, 1, 1};  // two pads at the end
  const float positions[6] = {2, 3, 4, 5, 1, 1};
  const graph::TensorMap want = reference::run(g, in);
  const std::vector<float> table = opfuse::testing::random_values(32, -1, 1, 5),
                           types = opfuse::testing::random_values(8, -1, 1, 6);
  for (size_t t = 0; t < 6; ++t) {
    const size_t type = size_t(positions[t]) % 2;  // the buffer alternates 0, 1
    for (size_t c = 0; c < 4; ++c) {
      CHECK(want.at("y").data[t * 4 + c] ==
            (in.at("x").data[t * 4 + c] + table[size_t(positions[t]) * 4 + c]) +
                types[type * 4 + c]);
    }
  }
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const graph::TensorMap got = schedules::realize_with_plan(g, fusion::plan_fusion(g, model), in);
  const auto c =
      reference::compare(got.at("y").data, want.at("y").data, reference::kGraphTolerance);
  CHECK_MESSAGE(c.ok(), c.summary());

  // CumSum along another axis than the last is refused by name.
  OnnxModel other(20);
  other.int64_input("ids", {3, 2});
  other.init_ints("axis0", {0}, {1});
  other.node("CumSum", "down", {"ids", "axis0"}, "cs");
  OnnxModel::i(other.node("Cast", "f", {"cs"}, "y"), "to", onnx::TensorProto::FLOAT);
  other.output("y");
  opfuse::testing::check_graph_error(
      [&] { graph::import_onnx_bytes(other.bytes(), "cumsum.onnx"); },
      {"node 'down'", "CumSum", "the last axis only"});
}
