// The Winograd pass (fusion/frontend/winograd.h) on a channels-last CNN with what ResNet has
// (3x3 convs with a bias and a residual add, a strided 3x3, a 1x1) and two 3x3 convs it must
// leave direct (no padding; an odd map). The rewritten convs compute the direct ones' values:
// by the reference executor's F(2x2, 3x3) and by the fused and unfused plans through the JIT
// (HL_JIT_TARGET: the host's, or an AVX2 target to check 16-register blocks), through both of
// the schedule's paths (tiles of rows of 2x2 tiles; chunks of output channels of a weight-bound
// conv, its input transform computed once).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "Halide.h"
#include "fusion/cost/cost_model.h"
#include "fusion/frontend/channels_last.h"
#include "fusion/frontend/load_model.h"
#include "fusion/frontend/winograd.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/emitter.h"
#include "schedules/jit.h"
#include "tests/frontend/blocks.h"

using namespace opfuse;

namespace {

graph::Graph resnet_like() {
  graph::GraphBuilder b("resnet_like");
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto x = b.input("x", {2, 16, 24, 20});  // H != W, batch 2
  // Weights of about 1 / sqrt(9 Cin): activations of order 1 through the chain, whose
  // elements the tolerance compares one by one.
  auto w = [&](const std::string& name, const graph::Shape& shape) {
    return b.param(name, shape, {-0.1, 0.1});
  };
  // 16 -> 16: transformed weights (4 K floats) under the input (15 K): tiles of rows.
  auto c1 = b.relu(b.conv2d(x, w("w1", {16, 16, 3, 3}), same, b.param("b1", {16})));
  auto c2 = b.relu(b.add(b.conv2d(c1, w("w2", {16, 16, 3, 3}), same), c1));
  // 16 -> 256: 64 K floats of weights over 15 K of input: weight-bound, in chunks of output
  // channels (2 per core, of a register block's 4 vectors: 256 channels on AVX-512).
  auto c3 = b.relu(b.conv2d(c2, w("w3", {256, 16, 3, 3}), same));
  graph::Conv2dOptions strided = same;
  strided.strides = {2, 2};
  auto s = b.conv2d(c3, w("w4", {32, 256, 3, 3}), strided);                 // stride 2: direct
  auto v = b.conv2d(s, w("w5", {32, 32, 3, 3}));                            // no padding: direct
  auto odd = b.conv2d(b.max_pool(v, 2, 2), w("w6", {32, 32, 3, 3}), same);  // 5x4: direct
  b.output(b.conv2d(odd, w("w7", {8, 32, 1, 1})));
  b.output(c2);
  return b.build();
}

int count(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

}  // namespace

TEST_CASE("winograd: the 3x3 stride-1 'same' convs as F(2x2, 3x3), with the direct values") {
  const graph::Graph before = resnet_like();
  graph::Graph nhwc = before;
  REQUIRE_FALSE(fusion::to_channels_last(nhwc).empty());
  graph::Graph after = nhwc;
  const std::vector<std::string> log = fusion::to_winograd(after);
  REQUIRE(log.size() == 1);
  MESSAGE(log[0]);
  CHECK(count(after, "conv2d_winograd") == 3);
  CHECK(count(after, "conv2d") == 4);
  // Only the transformed weights are kept for the rewritten convs.
  CHECK_FALSE(after.has_tensor("w1"));
  CHECK(after.has_tensor("w4"));
  REQUIRE(after.has_tensor("w3_winograd"));
  // 256 output channels: the 16 GEMMs' weights in panels of 64 channels; 16 stay [4, 4, Cin,
  // Cout]. The values above check both layouts.
  CHECK(after.tensor("w3_winograd").shape == graph::Shape{4, 4, 4, 16, 64});
  CHECK(after.tensor("w2_winograd").shape == graph::Shape{4, 4, 16, 16});
  CHECK(after.outputs() == before.outputs());

  const graph::TensorMap in = graph::random_inputs(before, 11);
  const graph::TensorMap want = reference::run(before, in);
  const graph::TensorMap ref = reference::run(after, in);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  fusion::PlannerOptions unfused;
  unfused.enable_fusion = false;
  for (const bool fuse : {true, false}) {
    CAPTURE(fuse);
    const fusion::FusionPlan plan =
        fuse ? fusion::plan_fusion(after, model) : fusion::plan_fusion(after, model, unfused);
    // The schedule's two paths, as the JIT's target gets them.
    const schedules::PipelineSchedule s = schedules::schedule_plan(
        after, plan, schedules::target_facts(Halide::get_jit_target_from_environment(), {}, 2));
    int rows = 0, chunks = 0;
    for (const auto& grp : s.groups) {
      for (const auto& n : grp.nodes) {
        if (!n.block || !n.block->winograd) continue;
        CAPTURE(n.node);
        const schedules::NodeSchedule& root = n.root == n.node ? n : *grp.find(n.root);
        CHECK_FALSE(n.block->in_root_loops);
        if (n.block->winograd_input_whole) {
          ++chunks;
          CHECK(root.tiling.kind == schedules::Tiling::Kind::column_chunks);
        } else {
          ++rows;
          // Whole rows of W; H split in whole 2x2 tiles.
          REQUIRE(root.tiling.kind == schedules::Tiling::Kind::rows);
          CHECK(root.tiling.split_dim >= 2);
          if (root.tiling.split_dim == 2) CHECK(root.tiling.factor % 2 == 0);
        }
      }
    }
    CHECK(rows == 2);
    CHECK(chunks == 1);
    const graph::TensorMap got = schedules::realize_with_plan(after, plan, in);
    for (const auto& o : before.outputs()) {
      CAPTURE(o);
      const auto r =
          reference::compare(ref.at(o).data, want.at(o).data, reference::kGraphTolerance);
      CHECK_MESSAGE(r.ok(), r.summary());
      const auto f =
          reference::compare(got.at(o).data, want.at(o).data, reference::kGraphTolerance);
      CHECK_MESSAGE(f.ok(), f.summary());
    }
  }
}

TEST_CASE("winograd leaves NCHW convs, and every conv when OPFUSE_WINOGRAD=0, alone") {
  graph::Graph nchw = resnet_like();
  CHECK(fusion::to_winograd(nchw).empty());  // before the layout pass: NCHW, not served
  CHECK(nchw == resnet_like());
  graph::Graph g = resnet_like();
  fusion::to_channels_last(g);
  const graph::Graph nhwc = g;
  setenv("OPFUSE_WINOGRAD", "0", 1);
  const bool left = fusion::to_winograd(g).empty();
  unsetenv("OPFUSE_WINOGRAD");
  CHECK(left);
  CHECK(g == nhwc);
  CHECK_FALSE(fusion::to_winograd(g).empty());
  CHECK(fusion::to_winograd(g).empty());  // nothing left to rewrite
}

TEST_CASE("an ONNX model loads with Winograd convs for a CPU, direct ones for a GPU") {
  // The detection head's 16 -> 16 3x3 stem at 8x8, as `opfuse compile` and the generator load
  // it for a CPU target and for host-cuda / host-opencl (LoadOptions).
  const opfuse::testing::Block* head = nullptr;
  for (const auto& b : opfuse::testing::blocks()) head = b.name == "detection_head" ? &b : head;
  REQUIRE(head != nullptr);
  const std::string path =
      (std::filesystem::temp_directory_path() / "opfuse_winograd_head.onnx").string();
  std::ofstream(path, std::ios::binary) << opfuse::testing::block_bytes(*head, 17);
  std::vector<std::string> log;
  const graph::Graph cpu = fusion::load_model(path, {}, &log);
  CHECK(count(cpu, "conv2d_winograd") == 1);
  CHECK(log.back().rfind("winograd: 1 ", 0) == 0);
  fusion::LoadOptions gpu;
  gpu.winograd = false;
  const graph::Graph direct = fusion::load_model(path, {}, nullptr, gpu);
  CHECK(count(direct, "conv2d_winograd") == 0);
  CHECK(count(direct, "conv2d") == count(cpu, "conv2d") + 1);
  std::filesystem::remove(path);
}

TEST_CASE("winograd: a malformed transformed weight is named in the error") {
  graph::Graph g;
  graph::Tensor x;
  x.name = "x";
  x.kind = graph::TensorKind::input;
  x.shape = {1, 8, 8, 16};
  graph::Tensor u;
  u.name = "u";
  u.kind = graph::TensorKind::param;
  u.shape = {4, 4, 8, 32};
  g.add_tensor(x);
  g.add_tensor(u);
  graph::Node n;
  n.name = "wino";
  n.op = "conv2d_winograd";
  n.inputs = {"x", "u"};
  n.outputs = {"y"};
  g.add_node(n);
  g.mark_output("y");
  CHECK_THROWS_WITH(g.validate(), doctest::Contains("'u' [4,4,8,32] must be [4, 4, 16, Cout]"));
  // In panels, only of kWeightPanel channels.
  g.tensor("u").shape = {4, 4, 4, 16, 32};
  CHECK_THROWS_WITH(g.validate(),
                    doctest::Contains("must be [4, 4, 16, Cout] or [4, 4, Cout / 64, 16, 64]"));
}
