// The channels-last layout pass (fusion/frontend/channels_last.h) on an NCHW network with what
// the corpus CNNs have: conv + batch norm + ReLU, a per-channel constant, a depthwise conv, a
// branch joined by a concat, a pool, a squeeze-excitation gate (a [N,C,1,1] tensor broadcast
// against the activations, pooled by a ReduceMean over H and W as the dynamo exporter writes
// it), a spatial gate (a max over channels, [N,1,H,W]), global pooling into a reshape and a linear head, and an output
// taken inside the region. The rewritten graph keeps the inputs and outputs, changes layout
// only at the region's edges, and computes the same values: by the reference executor and by
// the fused plan through the JIT.
#include <doctest/doctest.h>

#include "fusion/cost/cost_model.h"
#include "fusion/frontend/channels_last.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/op_schema.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/jit.h"

using namespace opfuse;

namespace {

graph::Graph small_cnn() {
  graph::GraphBuilder b("small_cnn");
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto x = b.input("x", {1, 8, 12, 12});
  auto c1 = b.relu(b.batch_norm(b.conv2d(x, b.param("w1", {16, 8, 3, 3}), same)));
  auto shifted = b.add(c1, b.param("shift", {16, 1, 1}));
  graph::Conv2dOptions dw = same;
  dw.groups = 16;
  auto c2 = b.relu6(b.conv2d(shifted, b.param("w2", {16, 1, 3, 3}), dw));
  auto c3 = b.conv2d(c2, b.param("w3", {16, 16, 1, 1}));
  auto c4 = b.conv2d(c1, b.param("w4", {16, 16, 1, 1}));
  auto joined = b.concat({c3, c4}, 1);
  auto pooled = b.max_pool(joined, 2, 2);
  auto squeezed = b.reduce("reduce_mean", pooled, {3, -2});  // H and W, one axis negative
  auto gate = b.sigmoid(b.conv2d(squeezed, b.param("w5", {32, 32, 1, 1})));
  auto spatial = b.sigmoid(b.reduce("reduce_max", pooled, {1}));
  auto gated = b.mul(b.mul(pooled, gate), spatial);
  auto features = b.reshape(b.global_avg_pool(gated), {1, 32});
  b.output(b.linear(features, b.param("fc", {32, 10})));
  b.output(pooled);
  return b.build();
}

// A stem of ViT and Swin: a 4x4 stride-4 convolution of an input x [1, 3, 16, 16], with bias,
// to `channels` channels.
graph::GraphBuilder::T patch_embedding(graph::GraphBuilder& b, int64_t channels) {
  graph::Conv2dOptions patch;
  patch.strides = {4, 4};
  auto x = b.input("x", {1, 3, 16, 16});
  return b.conv2d(x, b.param("w", {channels, 3, 4, 4}), patch, b.param("b", {channels}));
}

int count(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

// The rewritten graph's values, by the reference executor and by its fused plan through the
// JIT, are the original's.
void check_same_values(const graph::Graph& before, const graph::Graph& after, uint64_t seed) {
  const graph::TensorMap in = graph::random_inputs(before, seed);
  const graph::TensorMap want = reference::run(before, in);
  const graph::TensorMap ref = reference::run(after, in);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const graph::TensorMap fused =
      schedules::realize_with_plan(after, fusion::plan_fusion(after, model), in);
  for (const auto& o : before.outputs()) {
    CAPTURE(o);
    const auto r = reference::compare(ref.at(o).data, want.at(o).data, reference::kGraphTolerance);
    CHECK_MESSAGE(r.ok(), r.summary());
    const auto f =
        reference::compare(fused.at(o).data, want.at(o).data, reference::kGraphTolerance);
    CHECK_MESSAGE(f.ok(), f.summary());
  }
}

}  // namespace

TEST_CASE("channels-last: same inputs, outputs and values; layout changes at the edges only") {
  const graph::Graph before = small_cnn();
  graph::Graph after = before;
  const std::vector<std::string> log = fusion::to_channels_last(after);
  REQUIRE(log.size() == 1);
  MESSAGE(log[0]);
  CHECK(log[0].find("(5 convolutions) run NHWC") != std::string::npos);
  CHECK(after.inputs() == before.inputs());
  CHECK(after.outputs() == before.outputs());
  for (const auto& o : before.outputs()) CHECK(after.tensor(o).shape == before.tensor(o).shape);
  // One transpose after x, one before the reshape, one before the pooled output.
  CHECK(count(after, "transpose") == 3);
  for (const auto& n : after.nodes()) {
    if (n.op == "conv2d" || n.op == "max_pool" || n.op == "global_avg_pool") {
      CHECK(graph::attr_string(n, "layout", "") == "NHWC");
    }
    if (n.op == "batch_norm") CHECK(graph::attr_int(n, "axis", 1) == 3);
    if (n.op == "concat") CHECK(graph::attr_int(n, "axis", 1) == 3);
    if (n.op == "reduce_mean") CHECK(graph::attr_ints(n, "axes", {}) == std::vector<int64_t>{1, 2});
    if (n.op == "reduce_max") CHECK(graph::attr_ints(n, "axes", {}) == std::vector<int64_t>{3});
  }
  check_same_values(before, after, 7);
}

TEST_CASE("channels-last leaves a graph with fewer convolutions than asked, and NHWC ones, alone") {
  graph::Graph g = small_cnn();
  CHECK(fusion::to_channels_last(g, 6).empty());
  CHECK(g == small_cnn());
  graph::Graph once = small_cnn();
  fusion::to_channels_last(once);
  graph::Graph twice = once;
  CHECK(fusion::to_channels_last(twice).empty());  // already NHWC: nothing to convert
  CHECK(twice == once);
}

TEST_CASE("channels-last takes a lone patch embedding too, and keeps its values") {
  // ViT's stem: a 4x4 stride-4 convolution, flattened to tokens. NCHW it vectorises along the
  // output row with inputs 4 apart; NHWC along its 32 output channels.
  graph::GraphBuilder b("patches");
  auto p = patch_embedding(b, 32);
  b.output(b.transpose(b.reshape(p, {1, 32, 16}), {0, 2, 1}));
  const graph::Graph before = b.build();
  graph::Graph after = before;
  CHECK_FALSE(fusion::to_channels_last(after).empty());
  bool nhwc = false;
  for (const auto& n : after.nodes()) {
    if (n.op == "conv2d") nhwc = graph::attr_string(n, "layout", "") == "NHWC";
  }
  CHECK(nhwc);
  const graph::TensorMap in = graph::random_inputs(before, 3);
  const graph::TensorMap want = reference::run(before, in);
  const graph::TensorMap got = reference::run(after, in);
  for (const auto& o : before.outputs()) {
    const auto r = reference::compare(got.at(o).data, want.at(o).data, reference::kGraphTolerance);
    CHECK_MESSAGE(r.ok(), r.summary());
  }
}

TEST_CASE("channels-last converts the regions that hold a layout op, not every 4-D op") {
  // Swin's stem: a patch embedding permuted to [N, H, W, C], then 4-D residual adds and ReLUs
  // around a layer norm. Only the conv (and its bias add) form a region with a layout op; the
  // adds after the permute stay as they are, with no transposes around them.
  graph::GraphBuilder b("swin_stem");
  auto p = patch_embedding(b, 8);
  auto t = b.transpose(p, {0, 2, 3, 1});  // [1, 4, 4, 8]
  auto y = b.add(t, b.relu(b.layer_norm(t, -1, 1e-5)));
  b.output(b.add(y, b.relu(b.layer_norm(y, -1, 1e-5))));
  const graph::Graph before = b.build();
  graph::Graph after = before;
  const std::vector<std::string> log = fusion::to_channels_last(after);
  REQUIRE(log.size() == 1);
  MESSAGE(log[0]);
  CHECK(log[0].find("1 ops (1 convolutions) run NHWC, 2 transposes") != std::string::npos);
  CHECK(count(after, "transpose") == 3);  // the model's own, and one either side of the conv
  check_same_values(before, after, 5);
}

TEST_CASE("channels-last keeps a conv's computed weights in their layout, and their values") {
  // A squeeze-excite gate folded into the next conv's weights, W' = W * gate ([Cout, Cin, 1, 1]
  // from a [1, Cin, 1, 1] gate computed in the NHWC region): W' is the conv's weights, no
  // activation, and stays [Cout, Cin, KH, KW], its gate transposed back to NCHW for it. (Taken
  // for an activation, it was permuted to [12,1,1,16]: "expects 1 input channels".)
  graph::GraphBuilder b("computed_weights");
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto x = b.input("x", {1, 8, 10, 10});
  auto h = b.relu(b.conv2d(x, b.param("w1", {16, 8, 3, 3}), same));
  auto squeezed = b.reduce("reduce_mean", h, {2, 3});
  auto gate = b.sigmoid(b.conv2d(squeezed, b.param("w_se", {16, 16, 1, 1})));
  auto scaled = b.mul(b.param("w2", {12, 16, 1, 1}), gate);
  b.output(b.conv2d(h, scaled));
  b.output(gate);  // also an output: the weights read it through the output's transpose back
  const graph::Graph before = b.build();
  graph::Graph after = before;
  REQUIRE_FALSE(fusion::to_channels_last(after).empty());
  int nhwc_convs = 0;
  for (const auto& n : after.nodes()) {
    if (n.op != "conv2d") continue;
    nhwc_convs += graph::attr_string(n, "layout", "") == "NHWC";
    CHECK(after.tensor(n.inputs[1]).shape.size() == 4);
    if (after.tensor(n.inputs[1]).kind != graph::TensorKind::param) {
      CHECK(after.tensor(n.inputs[1]).shape == graph::Shape{12, 16, 1, 1});
    }
  }
  CHECK(nhwc_convs == 3);
  check_same_values(before, after, 5);
}
