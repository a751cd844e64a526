// Differential testing: random graphs (chains, diamonds, siblings, convs, pools, odd sizes,
// extents below the vector width) planned and scheduled three ways — fused, unfused, and a
// random legal plan (random rules switched off, local search on or off) — JIT-compiled on the
// host and compared with the reference executor. A failure prints a reproducer: the seed and
// the graph as JSON.
//
// OPFUSE_DIFF_GRAPHS / OPFUSE_DIFF_SEED (environment) run a longer soak from another seed.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <tuple>

#include "Halide.h"
#include "fusion/cost/cost_model.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/random_graph.h"
#include "fusion/graph/zoo.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/emitter.h"
#include "schedules/jit.h"
#include "tests/reshaped_anchor.h"

using namespace opfuse;

namespace {

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Tolerance: a handful of ops with f32 reductions of <= 8 * 9 = 72 terms and transcendental
// ops; the graph tolerance holds with margin.
constexpr reference::Tolerance kTolerance = reference::kGraphTolerance;

// Runs `plan` through the JIT on `in` and checks every output against `want` (the reference
// executor's outputs on `in`).
void check_plan_matches(const graph::Graph& g, const fusion::FusionPlan& plan,
                        const graph::TensorMap& in, const graph::TensorMap& want) {
  const graph::TensorMap got = schedules::realize_with_plan(g, plan, in);
  for (const auto& out : g.outputs()) {
    CAPTURE(out);
    const auto c = reference::compare(got.at(out).data, want.at(out).data, kTolerance);
    CHECK_MESSAGE(c.ok(), c.summary());
  }
}

// The plan for a user's partition of `g` (one group per entry of `groups`), run on random
// inputs from `seed` and checked against the reference executor; returned for more checks.
fusion::FusionPlan check_user_groups(const graph::Graph& g,
                                     const std::vector<fusion::UserGroup>& groups, uint64_t seed) {
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const fusion::FusionPlan plan = fusion::plan_from_user_groups(g, model, groups);
  REQUIRE(plan.groups.size() == groups.size());
  const graph::TensorMap in = graph::random_inputs(g, seed);
  check_plan_matches(g, plan, in, reference::run(g, in));
  return plan;
}

// The schedule the stage gives `plan` for the JIT's target (HL_JIT_TARGET) on 2 cores: what
// check_user_groups ran.
schedules::PipelineSchedule jit_schedule(const graph::Graph& g, const fusion::FusionPlan& plan) {
  return schedules::schedule_plan(
      g, plan, schedules::target_facts(Halide::get_jit_target_from_environment(), {}, 2));
}

// Swin's patch merging: the four 2x2-strided quarters of x [1, hw, hw, C] (even and odd rows
// and columns), to be joined along C.
std::vector<graph::GraphBuilder::T> patch_quarters(graph::GraphBuilder& b,
                                                   const graph::GraphBuilder::T& x, int64_t hw) {
  std::vector<graph::GraphBuilder::T> parts;
  for (int64_t h : {0, 1}) {
    for (int64_t w : {0, 1}) parts.push_back(b.slice(x, {h, w}, {hw, hw}, {1, 2}, {2, 2}));
  }
  return parts;
}

// Swin's window partition of x [1, 8, 8, C] into 2 x 2 windows of 4 x 4: the windows' dims
// brought together, [4, 16, C].
graph::GraphBuilder::T window_partition(graph::GraphBuilder& b, const graph::GraphBuilder::T& x,
                                        int64_t c) {
  return b.reshape(b.transpose(b.reshape(x, {1, 2, 4, 2, 4, c}), {0, 1, 3, 2, 4, 5}), {4, 16, c});
}

// Swin's cyclic shift of x along H (axis 1, of extent h): x[h - k : h] joined before x[0 : h - k].
graph::GraphBuilder::T roll_h(graph::GraphBuilder& b, const graph::GraphBuilder::T& x, int64_t h,
                              int64_t k) {
  return b.concat({b.slice(x, {h - k}, {h}, {1}), b.slice(x, {0}, {h - k}, {1})}, 1);
}

}  // namespace

TEST_CASE("a CPU target's ISA: vector width and register file, as the register blocks use it") {
  const fusion::Isa avx2 = schedules::isa_of(Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2"));
  CHECK(avx2.name == "avx2");
  CHECK(avx2.vector_bytes == 32);
  CHECK(avx2.vector_registers == 16);
  CHECK(fusion::anchor_accumulator_registers(avx2.vector_registers) == 8);
  const fusion::Isa avx512 = schedules::isa_of(
      Halide::Target("x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake"));
  CHECK(avx512.name == "avx512");
  CHECK(avx512.vector_bytes == 64);
  CHECK(avx512.vector_registers == 32);
  CHECK(fusion::anchor_accumulator_registers(avx512.vector_registers) == 16);
  CHECK(schedules::isa_of(Halide::Target("x86-64-linux-sse41")).name == "sse4");
  const fusion::Isa arm = schedules::isa_of(Halide::Target("arm-64-linux"));
  CHECK(arm.vector_registers == 32);
  CHECK(arm.vector_bytes == 16);
}

TEST_CASE("random graphs: fused, unfused and random legal plans equal the reference") {
  const uint64_t graphs = env_or("OPFUSE_DIFF_GRAPHS", 100);
  const uint64_t first = env_or("OPFUSE_DIFF_SEED", 1);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const std::vector<fusion::Rule>& rules = fusion::builtin_rules();
  int failures = 0;
  for (uint64_t seed = first; seed < first + graphs && failures < 3; ++seed) {
    std::mt19937_64 rng(seed);
    graph::RandomGraphOptions o;
    o.nodes = 3 + rng() % 10;
    o.window = 2 + rng() % 4;
    o.spatial = 1 + int64_t(rng() % 11);  // 1..11: 1-sized and odd extents
    o.channels = 1 + int64_t(rng() % 9);  // 1..9: below and around the vector width
    const graph::Graph g = graph::random_graph(seed, o);
    const graph::TensorMap inputs = graph::random_inputs(g, seed);
    const graph::TensorMap want = reference::run(g, inputs);

    fusion::PlannerOptions fused, unfused, random;
    unfused.enable_fusion = false;
    for (const auto& r : rules) {
      if (rng() % 2) random.disabled_rules.insert(r.name);
    }
    random.local_search = rng() % 2;
    for (const auto* opts : {&fused, &unfused, &random}) {
      const char* which = opts == &fused ? "fused" : opts == &unfused ? "unfused" : "random plan";
      const fusion::FusionPlan plan = fusion::plan_fusion(g, model, *opts);
      graph::TensorMap got;
      std::string error;
      try {
        got = schedules::realize_with_plan(g, plan, inputs);
      } catch (const std::exception& e) {
        error = e.what();
      }
      bool ok = error.empty();
      std::string detail = error;
      for (const auto& out : g.outputs()) {
        if (!ok) break;
        const auto c = reference::compare(got.at(out).data, want.at(out).data, kTolerance);
        if (!c.ok()) ok = false, detail = "output " + out + ": " + c.summary();
      }
      if (!ok) {
        ++failures;
        FAIL_CHECK("seed " << seed << " (" << which << "): " << detail << "\nreproducer:\n"
                           << graph::graph_to_json_string(g) << "\nplan:\n"
                           << fusion::plan_to_table(plan));
      }
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("the emitter honours a user's plan: an edited cbr_pool plan computes the same") {
  graph::GraphBuilder b("cbr");
  auto x = b.input("x", {1, 12, 12, 8}, graph::Layout::NHWC);
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  b.output(b.max_pool(b.relu(b.batch_norm(b.conv2d(x, b.param("w", {8, 8, 3, 3}), same))), 2, 2));
  const graph::Graph g = b.build();
  const auto groups = fusion::user_groups_from_plan_json(R"({"groups": [
      {"nodes": ["conv2d_0"]}, {"nodes": ["batch_norm_0", "relu_0", "max_pool_0"], "schedule": {"tile_fraction": 0.5}}]})",
                                                         "edited.json");
  REQUIRE(groups.size() == 2);
  check_user_groups(g, groups, 2);
}

TEST_CASE("regression: an anchor feeding a materialized transpose in its group is materialized") {
  // Found by `opfuse explore` on attention: merging {Q, K, V linears} with {transpose(K),
  // matmul, scale, softmax, matmul} put linear K per tile of the output while the transpose
  // it feeds is computed once before the tiles; Halide refused the schedule.
  const graph::Graph g = graph::zoo_model("attention", graph::ZooSize::cpu);
  std::vector<fusion::UserGroup> one(1);
  for (size_t i : g.topo_order()) one[0].nodes.push_back(g.nodes()[i].name);
  const fusion::FusionPlan plan = check_user_groups(g, one, 3);
  const schedules::PipelineSchedule records =
      schedules::schedule_plan(g, plan, schedules::facts_of(fusion::builtin_profile("epyc-avx512-2c")));
  const schedules::NodeSchedule* k = records.groups[0].find("linear_1");
  REQUIRE(k != nullptr);
  CHECK(k->placement == schedules::Placement::materialized);
}

TEST_CASE("every vector width the explorer tries computes the same") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const fusion::FusionPlan base = fusion::plan_fusion(g, model);
  const graph::TensorMap in = graph::random_inputs(g, 4);
  const graph::TensorMap want = reference::run(g, in);
  for (int lanes : {4, 8, 32, 64}) {
    CAPTURE(lanes);
    std::vector<fusion::UserGroup> groups;
    for (const auto& fg : base.groups) groups.push_back({fg.nodes, 0, lanes});
    const fusion::FusionPlan plan = fusion::plan_from_user_groups(g, model, groups);
    CHECK(plan.groups[0].request.vector_lanes == lanes);
    check_plan_matches(g, plan, in, want);
  }
}

TEST_CASE("NCHW convs of 12 and 6 channels under a flatten: tiles in chunks of the flat dim") {
  // A detection head's box and class convs: channel blocks that divide C (4 x 2 vectors,
  // 2 x 2), and roots of rank 2 with one row, whose tiles are chunks of the flat dim. A
  // flatten straight after the conv (no transpose) puts a chunk's edge inside a channel; the
  // conv then computes its channels whole in every tile, so no block reads a weight past the
  // end (which an AOT build asserts against; this JIT test checks the values).
  for (const bool transposed : {true, false}) {
    CAPTURE(transposed);
    graph::GraphBuilder b("head");
    auto x = b.input("x", {1, 16, 24, 24}, graph::Layout::NCHW);
    auto box = b.conv2d(x, b.param("wb", {12, 16, 1, 1}));
    auto cls = b.sigmoid(b.conv2d(x, b.param("wc", {6, 16, 1, 1})));
    auto flat_in = transposed ? b.transpose(box, {0, 2, 3, 1}) : box;
    b.output(b.reshape(flat_in, {1, -1}));
    b.output(cls);
    const graph::Graph g = b.build();
    std::vector<fusion::UserGroup> groups(2);
    groups[0].nodes = {"conv2d_0", "reshape_0"};
    if (transposed) groups[0].nodes.insert(groups[0].nodes.begin() + 1, "transpose_0");
    groups[1].nodes = {"conv2d_1", "sigmoid_0"};
    check_user_groups(g, groups, 5);
  }
}

TEST_CASE("weight-bound convs tiled by output channels: a 3x3 and a strided one, a residual") {
  // More weights than input (as ResNet's last stage): tiles are chunks of whole channel
  // blocks, each with every pixel, the blocks' channel loop outside their pixel loops; 5x5
  // pixels, so every block touches the padding. 160 channels: chunks of 64 on 2 cores with
  // AVX-512's 32-wide blocks, the last one narrower (GuardWithIf in the root).
  graph::GraphBuilder b("weight_bound");
  auto x = b.input("x", {1, 10, 10, 96}, graph::Layout::NHWC);
  graph::Conv2dOptions down;
  down.strides = {2, 2};
  down.pads = {1, 1, 1, 1};
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto y = b.relu(b.conv2d(x, b.param("w0", {160, 96, 3, 3}), down));
  auto z = b.add(b.conv2d(y, b.param("w1", {160, 160, 3, 3}), same), y);
  b.output(b.relu(z));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"conv2d_0", "relu_0"};
  groups[1].nodes = {"conv2d_1", "add_0", "relu_1"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 8);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  for (const auto& grp : s.groups) {
    CAPTURE(grp.group);
    for (const auto& n : grp.nodes) {
      if (n.node == "relu_0" || n.node == "relu_1") {
        CHECK(n.tiling.kind == schedules::Tiling::Kind::column_chunks);
      }
    }
  }
}

TEST_CASE("pools over H and W of NHWC tensors summed in parallel slices of rows") {
  // One output point per channel: the sum is split along H (4 slices on 2 cores), with
  // H = 30 and 13 no multiple of the slices (the last slice guarded), as a squeeze-and-excite
  // mean after a conv and as a global pool, unless the channels already make a tile per core
  // (on AVX2, 8 lanes, the stage tiles H = 13's mean in 4 chunks of 16 channels). The conv's
  // ReLU is a graph output that the mean in its group reads: stored, and copied to the output.
  int sliced = 0;
  for (const int64_t h : {30, 13}) {
    CAPTURE(h);
    graph::GraphBuilder b("pools");
    auto x = b.input("x", {1, h, 40, 64}, graph::Layout::NHWC);  // 128 KB or more
    graph::Conv2dOptions same;
    same.pads = {1, 1, 1, 1};
    auto y = b.relu(b.conv2d(x, b.param("w", {64, 64, 3, 3}), same));
    b.output(y);
    b.output(b.reduce("reduce_mean", y, {1, 2}));
    b.output(b.global_avg_pool(x));
    const graph::Graph g = b.build();
    std::vector<fusion::UserGroup> groups(2);
    groups[0].nodes = {"conv2d_0", "relu_0", "reduce_mean_0"};
    groups[1].nodes = {"global_avg_pool_0"};
    const fusion::FusionPlan plan = check_user_groups(g, groups, 12);
    const schedules::PipelineSchedule s = jit_schedule(g, plan);
    for (const std::string pool : {"reduce_mean_0", "global_avg_pool_0"}) {
      CAPTURE(pool);
      const schedules::NodeSchedule* n = nullptr;
      for (const auto& grp : s.groups) n = n ? n : grp.find(pool);
      REQUIRE(n != nullptr);
      if (n->tiling.tiles >= 2) {
        CHECK(n->reduction_slices == 0);
        continue;
      }
      ++sliced;
      CHECK(n->reduction_slices == 4);
      CHECK(n->reduction_slice_rows * 3 < h);
      CHECK(n->reduction_slice_rows * 4 >= h);
    }
  }
  CHECK(sliced >= 3);  // on AVX-512 all four; the slices are run on every ISA
}

TEST_CASE("squeeze-and-excite: the sigmoid that a broadcast product reads is computed per tile") {
  // Inlined into the product x * s, the sigmoid of s's 64 channels was evaluated for each of
  // x's 14 x 14 x 64 elements; computed at the product's tile, once per channel a tile.
  graph::GraphBuilder b("excite");
  auto x = b.input("x", {1, 14, 14, 64}, graph::Layout::NHWC);
  auto pooled = b.reduce("reduce_mean", x, {1, 2});
  auto scale = b.sigmoid(b.conv2d(pooled, b.param("w", {64, 64, 1, 1})));
  b.output(b.mul(x, scale));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"reduce_mean_0"};
  groups[1].nodes = {"conv2d_0", "sigmoid_0", "mul_0"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 13);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  const schedules::NodeSchedule* sigmoid = s.groups[1].find("sigmoid_0");
  REQUIRE(sigmoid != nullptr);
  CHECK(sigmoid->placement == schedules::Placement::at_tile);
  CHECK(s.groups[1].find("mul_0")->placement == schedules::Placement::root);
}

TEST_CASE("a classifier's GEMV in chunks of columns that are no multiple of its block") {
  // One row, more weights than input: tiles of columns, on this host's blocks (64 columns
  // with AVX-512, 16 with AVX2). 330 and 1000 columns are multiples of neither, so the last
  // chunk's last block shifts inwards; the last chunk holds at least one block.
  for (const int64_t n : {330, 1000}) {
    CAPTURE(n);
    graph::GraphBuilder b("gemv");
    auto x = b.input("x", {1, 96});
    b.output(b.linear(x, b.param("w", {96, n}), b.param("b", {n})));
    const graph::Graph g = b.build();
    std::vector<fusion::UserGroup> one(1);
    one[0].nodes = {"linear_0"};
    const fusion::FusionPlan plan = check_user_groups(g, one, 11);
    const schedules::PipelineSchedule s = jit_schedule(g, plan);
    const schedules::NodeSchedule& fc = *s.groups[0].find("linear_0");
    REQUIRE(fc.block);
    const int64_t width = int64_t(fc.block->lanes) * fc.block->vectors;
    CHECK(fc.tiling.kind == schedules::Tiling::Kind::column_chunks);
    CHECK(fc.tiling.tiles >= 2);
    CHECK(n - fc.tiling.factor * (fc.tiling.tiles - 1) >= width);
  }
}

TEST_CASE("an NHWC conv's input channels and a linear's K in chunks; blocks of rows that divide W") {
  // The stage's own choice on an AVX-512 profile (48 KB of L1 a core), whose 3x3 convs of 64
  // channels or more take wide blocks (4 vectors x 7 rows): ResNet's 7x7x512 3x3 conv, whose
  // pixel block reads 55 KB of input, passes over its tile in chunks of 32 input channels; at
  // 14x14x256 (28 KB) and 28x28x128 (14 KB) the input fits L1 and is not chunked. Blocks of
  // 7 rows where W is 7, 14, 28 or 56.
  const schedules::TargetFacts avx512 = schedules::facts_of(fusion::builtin_profile("epyc-avx512-2c"));
  REQUIRE(avx512.l1_bytes == 48 * 1024);
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  // The block the stage gives the anchor (nodes[0]) of `g`, planned as one group, for target
  // `t` (anchor_block: for AVX-512).
  auto anchor_block_for = [&](const graph::Graph& g, const std::vector<std::string>& nodes,
                              const schedules::TargetFacts& t) {
    std::vector<fusion::UserGroup> groups(1);
    groups[0].nodes = nodes;
    const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
    const schedules::PipelineSchedule s =
        schedules::schedule_plan(g, fusion::plan_from_user_groups(g, model, groups), t);
    const schedules::NodeSchedule* anchor = s.groups[0].find(nodes[0]);
    REQUIRE(anchor != nullptr);
    REQUIRE(anchor->block);
    return *anchor->block;
  };
  auto anchor_block = [&](const graph::Graph& g, const std::vector<std::string>& nodes) {
    return anchor_block_for(g, nodes, avx512);
  };
  auto conv_block = [&](int64_t hw, int64_t c) {
    graph::GraphBuilder b("conv");
    auto x = b.input("x", {1, hw, hw, c}, graph::Layout::NHWC);
    b.output(b.relu(b.conv2d(x, b.param("w", {c, c, 3, 3}), same)));
    return anchor_block(b.build(), {"conv2d_0", "relu_0"});
  };
  CHECK(conv_block(7, 512).reduction_chunk == 32);
  CHECK(conv_block(7, 512).rows == 7);
  CHECK(conv_block(7, 512).vectors == 4);
  CHECK(conv_block(14, 256).reduction_chunk == 0);
  CHECK(conv_block(14, 256).rows == 7);
  CHECK(conv_block(28, 128).reduction_chunk == 0);
  CHECK(conv_block(28, 128).rows == 7);
  CHECK(conv_block(56, 64).rows == 7);
  CHECK(conv_block(56, 64).vectors == 4);
  // A patch embedding (ViT's 16x16 conv, stride 16, 3 -> 192 channels): its windows do not
  // overlap, so 2 weight vectors over more rows, not a wide block, though its weight slice
  // (768 a channel) is as far past L1.
  {
    graph::GraphBuilder b("patches");
    graph::Conv2dOptions patch;
    patch.strides = {16, 16};
    auto x = b.input("x", {1, 224, 224, 3}, graph::Layout::NHWC);
    b.output(b.conv2d(x, b.param("w", {192, 3, 16, 16}), patch));
    const schedules::RegisterBlock pb = anchor_block(b.build(), {"conv2d_0"});
    CHECK(pb.vectors == 2);
    CHECK(pb.rows == 7);
    // Dilated by 2, 2x2 windows at stride 2 span 3 inputs and share one: still wide.
    graph::GraphBuilder d("dilated");
    graph::Conv2dOptions dilated;
    dilated.strides = {2, 2};
    dilated.dilations = {2, 2};
    auto y = d.input("y", {1, 57, 57, 128}, graph::Layout::NHWC);
    d.output(d.conv2d(y, d.param("w", {128, 128, 2, 2}), dilated));
    CHECK(anchor_block(d.build(), {"conv2d_0"}).vectors == 4);
  }
  // 144 channels (9 vectors of 16 lanes, not a multiple of 2): MobileNetV2's expanding 1x1
  // conv 24 -> 144 and the depthwise conv after it take blocks of 3 vectors x 8 rows, none
  // moved back over another; on AVX2 (18 vectors of 8) 2 vectors as before.
  auto expand_dw = [&](const schedules::TargetFacts& t) {
    graph::GraphBuilder e("expand");
    auto x = e.input("x", {1, 56, 56, 24}, graph::Layout::NHWC);
    e.output(e.conv2d(x, e.param("w", {144, 24, 1, 1})));
    graph::GraphBuilder d("depthwise");
    auto y = d.input("y", {1, 56, 56, 144}, graph::Layout::NHWC);
    graph::Conv2dOptions dw = same;
    dw.groups = 144;
    d.output(d.conv2d(y, d.param("w", {144, 1, 3, 3}), dw));
    const schedules::RegisterBlock eb = anchor_block_for(e.build(), {"conv2d_0"}, t);
    const schedules::RegisterBlock db = anchor_block_for(d.build(), {"conv2d_0"}, t);
    return std::make_tuple(eb.vectors, eb.rows, db.vectors, db.rows);
  };
  CHECK(expand_dw(avx512) == std::make_tuple(3, 8, 3, 8));
  const schedules::TargetFacts avx2_8 = schedules::facts_of(fusion::builtin_profile("x86-avx2-8c"));
  CHECK(std::get<0>(expand_dw(avx2_8)) == 2);
  CHECK(std::get<2>(expand_dw(avx2_8)) == 2);
  // 40 channels (2.5 vectors of 16): one-vector blocks compute 48, 2-vector ones 64; so 1 x 14
  // rows on AVX-512. AVX2's 16 registers keep 2 vectors (40 in 48).
  auto project = [&](const schedules::TargetFacts& t) {
    graph::GraphBuilder b("project");
    auto x = b.input("x", {1, 28, 28, 240}, graph::Layout::NHWC);
    b.output(b.conv2d(x, b.param("w", {40, 240, 1, 1})));
    const schedules::RegisterBlock pb = anchor_block_for(b.build(), {"conv2d_0"}, t);
    return std::make_pair(pb.vectors, pb.rows);
  };
  CHECK(project(avx512) == std::make_pair(1, 14));
  CHECK(project(avx2_8).first == 2);

  // Requested chunks on this host, against the reference: one that divides Cin (96 in 3
  // passes), one that does not (40: the last pass of 16 guarded), with a strided conv whose
  // W of 3 is one block, and W = 6, whose block on AVX2 (4 rows) runs past the tile into the
  // accumulators' rounded-up buffer.
  graph::GraphBuilder b("chunks");
  auto x = b.input("x", {1, 6, 6, 96}, graph::Layout::NHWC);
  graph::Conv2dOptions down;
  down.strides = {2, 2};
  down.pads = {1, 1, 1, 1};
  auto y = b.relu(b.conv2d(x, b.param("w0", {48, 96, 3, 3}), same));
  auto z = b.relu(b.conv2d(x, b.param("w1", {40, 96, 3, 3}), down));
  b.output(y);
  b.output(z);
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"conv2d_0", "relu_0"};
  groups[0].blocks["conv2d_0"].reduction_chunk = 32;
  groups[1].nodes = {"conv2d_1", "relu_1"};
  groups[1].blocks["conv2d_1"].reduction_chunk = 40;
  const fusion::FusionPlan plan = check_user_groups(g, groups, 9);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  CHECK(s.groups[0].find("conv2d_0")->block->reduction_chunk == 32);
  CHECK(s.groups[1].find("conv2d_1")->block->reduction_chunk == 40);

  // A linear layer's K in chunks too (the stage's choice where its weights outweigh its
  // input and a block's rows of input pass half of L1: GPT-2's c_proj), here 3 passes of 40
  // over K = 100, the last one guarded.
  graph::GraphBuilder lb("linear_chunks");
  auto h = lb.input("h", {12, 100});
  lb.output(lb.relu(lb.linear(h, lb.param("wl", {100, 72}), lb.param("bl", {72}))));
  const graph::Graph lg = lb.build();
  std::vector<fusion::UserGroup> lin(1);
  lin[0].nodes = {"linear_0", "relu_0"};
  lin[0].blocks["linear_0"].reduction_chunk = 40;
  const fusion::FusionPlan lplan = check_user_groups(lg, lin, 4);
  const schedules::PipelineSchedule ls = jit_schedule(lg, lplan);
  CHECK(ls.groups[0].find("linear_0")->block->reduction_chunk == 40);
  CHECK(ls.groups[0].find("linear_0")->block->channel_blocks_outside);
  // GPT-2's c_proj on a graph input: 128 rows, K = 3072 in chunks, in column chunks (its
  // weights outweigh its input) whose tile holds every row. A block's rows may not run past
  // the input's last row: on AVX-512, 6 rows fit the registers but do not divide 128.
  graph::GraphBuilder ob("c_proj_on_input");
  auto ho = ob.input("h", {128, 3072});
  ob.output(ob.linear(ho, ob.param("wl", {3072, 768}), ob.param("bl", {768})));
  const graph::Graph og = ob.build();
  lin[0].nodes = {"linear_0"};
  lin[0].blocks.clear();
  const fusion::FusionPlan oplan = check_user_groups(og, lin, 5);
  const schedules::PipelineSchedule os = jit_schedule(og, oplan);
  CHECK(os.groups[0].find("linear_0")->block->reduction_chunk > 0);
  CHECK(128 % os.groups[0].find("linear_0")->block->rows == 0);
  auto fc_block = [&](int64_t k, int64_t n) {
    graph::GraphBuilder gb("fc");
    auto t = gb.input("t", {128, k});
    gb.output(gb.linear(t, gb.param("w", {k, n})));
    return anchor_block(gb.build(), {"linear_0"});
  };
  CHECK(fc_block(3072, 768).reduction_chunk == 1024);  // 6 rows x 1024 floats: half of L1
  CHECK(fc_block(3072, 768).rows == 4);  // 6 fit, but do not divide the input's 128 rows
  CHECK(fc_block(768, 3072).reduction_chunk == 0);
  CHECK(fc_block(768, 3072).channel_blocks_outside);
  // Swin-T's tokens [1, H, W, C]: at W = 7, 6-row blocks of 2 vectors overlap to 12 rows, so
  // 7 rows (28 zmm accumulators beside 4 of B); at W = 14, 28 and 56, whose 7 or 6-row blocks
  // fill the registers or overlap, one vector x 14 rows (28 accumulators beside 2 of B). BERT's
  // 128 rows keep 2 vectors (one vector of 8 rows, the most that divide 128, would hold fewer
  // accumulators). With AVX2's 16 registers there is no room for a row more.
  auto token_block = [&](int64_t w, const schedules::TargetFacts& t, int64_t n = 3072) {
    graph::GraphBuilder gb("tokens");
    auto x = gb.input("x", {1, w, w, 768});
    gb.output(gb.linear(x, gb.param("w", {768, n})));
    const schedules::RegisterBlock block = anchor_block_for(gb.build(), {"linear_0"}, t);
    return std::make_pair(block.rows, block.vectors);
  };
  CHECK(token_block(7, avx512) == std::make_pair(7, 2));
  CHECK(token_block(14, avx512) == std::make_pair(14, 1));
  CHECK(token_block(28, avx512) == std::make_pair(14, 1));
  CHECK(token_block(56, avx512) == std::make_pair(14, 1));
  {  // ... which go over K in one pass, where 2-vector blocks of as many rows of K would chunk
    graph::GraphBuilder gb("tokens_k");
    auto x = gb.input("x", {1, 14, 14, 1536});
    gb.output(gb.linear(x, gb.param("w", {1536, 384})));
    const schedules::RegisterBlock tall = anchor_block_for(gb.build(), {"linear_0"}, avx512);
    CHECK(tall.vectors == 1);
    CHECK(tall.channel_blocks_outside);
    CHECK(tall.reduction_chunk == 0);
  }
  CHECK(fc_block(768, 3072).vectors == 2);
  // 96 columns (3 vectors of 32 lanes, not 2): blocks of 3 vectors x 4 rows, none moved back.
  CHECK(token_block(56, avx512, 96) == std::make_pair(4, 3));
  CHECK(token_block(56, avx512, 128) == std::make_pair(14, 1));
  const schedules::TargetFacts avx2 = schedules::facts_of(fusion::builtin_profile("x86-avx2-8c"));
  REQUIRE(avx2.vector_registers == 16);
  CHECK(token_block(7, avx2).first < 7);
  // Swin-T's window attention, scores of 49 tokens by 49 (one vector of 32 lanes, 2 zmm): 12
  // rows (24 accumulators) overlap to 60 of 49, so 7 rows, which divide 49; over 128 rows
  // (132) 12 stay.
  auto scores_block = [&](int64_t rows) {
    graph::GraphBuilder gb("scores");
    auto q = gb.input("q", {192, rows, 32});
    auto k = gb.input("k", {192, 32, 49});
    gb.output(gb.matmul(q, k));
    return anchor_block(gb.build(), {"matmul_0"}).rows;
  };
  CHECK(scores_block(49) == 7);
  CHECK(scores_block(128) == 12);

  // A chunk for an anchor whose reduction is neither is refused, naming the node.
  graph::GraphBuilder mb("mm");
  auto a = mb.input("a", {8, 32});
  auto bm = mb.input("b", {32, 16});
  mb.output(mb.matmul(a, bm));
  const graph::Graph mg = mb.build();
  std::vector<fusion::UserGroup> one(1);
  one[0].nodes = {"matmul_0"};
  one[0].blocks["matmul_0"].reduction_chunk = 8;
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  CHECK_THROWS_WITH_AS(
      schedules::schedule_plan(mg, fusion::plan_from_user_groups(mg, model, one), avx512),
      doctest::Contains("'matmul_0' (matmul): reduction_chunk"), std::invalid_argument);
}

TEST_CASE("tiles balanced over the cores") {
  // 56 rows in tiles of 8: 7 tiles, 4 on one of 2 cores; 7 rows make 8, 4 each.
  CHECK(schedules::balanced_tile_factor(56, 8, 1, 1, 1, 2) == 7);
  // 192 channels in chunks of 64 (blocks of 32): 3 chunks; 6 of 32 end sooner.
  CHECK(schedules::balanced_tile_factor(192, 64, 32, 1, 0, 2) == 32);
  // 14 rows by 4 (4 tiles, 2 a core): 1-row tiles would end no sooner once each pays a row.
  CHECK(schedules::balanced_tile_factor(14, 4, 1, 1, 1, 2) == 4);
  // Already balanced: kept; 3 images of 10 rows each on 2 cores: 5 rows a tile balance them.
  CHECK(schedules::balanced_tile_factor(56, 14, 1, 1, 1, 2) == 14);
  CHECK(schedules::balanced_tile_factor(10, 10, 1, 3, 1, 2) == 5);
}

TEST_CASE("regression: a weight-bound conv into a channel concat keeps tiles of rows") {
  // DenseNet's dense layer: its last conv (32 channels) fills the top of the next concat,
  // read through BN and ReLU. Chunks of the concat's channels would ask the conv for one
  // clamped channel in most tiles, and its 32-wide block, shifted inwards, for channels from
  // -31: the weights read before their first (the whole network failed so, in the JIT).
  graph::GraphBuilder b("dense_layer");
  auto x = b.input("x", {1, 5, 5, 224}, graph::Layout::NHWC);
  auto y = b.input("y", {1, 5, 5, 96}, graph::Layout::NHWC);
  graph::Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto c = b.conv2d(y, b.param("w", {32, 96, 3, 3}), same);
  b.output(b.relu(b.concat({x, c}, 3)));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(1);
  groups[0].nodes = {"conv2d_0", "concat_0", "relu_0"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 6);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  const schedules::NodeSchedule* root = s.groups[0].find("relu_0");
  REQUIRE(root != nullptr);
  CHECK(root->rule.channel_chunks == 0);
  CHECK(root->tiling.kind == schedules::Tiling::Kind::rows);
}

TEST_CASE("regression: two anchors joined by a residual add, one root: one runs its loops") {
  // A bottleneck's last 1x1 conv and its downsample conv, added and rectified in one group.
  // Both sit at the root's tile and both fit its loops; the first takes them as its blocks,
  // the second keeps its own loops there (both splitting the root's loops was a Halide error:
  // "can't create var bo1 ... already used in this Func's schedule").
  graph::GraphBuilder b("residual_join");
  auto x = b.input("x", {1, 14, 14, 32}, graph::Layout::NHWC);
  auto y = b.input("y", {1, 14, 14, 16}, graph::Layout::NHWC);
  auto main_path = b.conv2d(x, b.param("w1", {64, 32, 1, 1}));
  auto shortcut = b.conv2d(y, b.param("w2", {64, 16, 1, 1}));
  b.output(b.relu(b.add(main_path, shortcut)));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(1);
  groups[0].nodes = {"conv2d_0", "conv2d_1", "add_0", "relu_0"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 8);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  int in_root_loops = 0;
  for (const char* conv : {"conv2d_0", "conv2d_1"}) {
    const schedules::NodeSchedule* n = s.groups[0].find(conv);
    REQUIRE(n != nullptr);
    REQUIRE(n->block);
    CHECK(n->placement == schedules::Placement::at_tile);
    in_root_loops += n->block->in_root_loops;
  }
  CHECK(in_root_loops == 1);
}

TEST_CASE("regression: an anchor under a transposing root computes its blocks whole") {
  // Found by `opfuse explore` on attention: {Q, K, V linears, transpose(K)} stores K^T, so
  // linear K is computed per tile of the transpose, whose tiles split K's columns. Its
  // 64-column blocks, shifted inwards over a 16-column region, read the weights at -48.
  const graph::Graph g = graph::zoo_model("attention", graph::ZooSize::cpu);
  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"linear_0", "linear_1", "linear_2", "transpose_0"};
  groups[1].nodes = {"matmul_0", "mul_0", "softmax_0", "matmul_1"};
  check_user_groups(g, groups, 6);
}

TEST_CASE("token ids and a mask: an embedding lookup fused into its consumers, and alone") {
  // A transformer's first layer in miniature: embedding(ids) + positions, layer norm, a
  // linear, scores masked by (1 - mask) * -1e9.
  graph::GraphBuilder b("tokens");
  auto ids = b.input("ids", {2, 9}, graph::Layout::none, graph::DType::i64);
  auto mask = b.input("mask", {2, 1, 9}, graph::Layout::none, graph::DType::i64);
  auto x = b.add(b.gather(b.param("table", {40, 16}), ids, 0), b.param("pos", {9, 16}));
  x = b.linear(b.layer_norm(x), b.param("w", {16, 16}));
  auto scores = b.matmul(x, b.transpose(x, {0, 2, 1}));  // [2, 9, 9]
  auto bias = b.mul(b.sub(b.param("one", {1}, {1, 1}), b.cast(mask)), b.param("big", {1}, {-1e9, -1e9}));
  b.output(b.softmax(b.add(scores, bias), -1));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> one(1), each;
  for (size_t i : g.topo_order()) {
    one[0].nodes.push_back(g.nodes()[i].name);
    each.push_back({{g.nodes()[i].name}});
  }
  check_user_groups(g, each, 3);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const fusion::FusionPlan planned = fusion::plan_fusion(g, model);
  const graph::TensorMap in = graph::random_inputs(g, 5);
  check_plan_matches(g, planned, in, reference::run(g, in));
}

TEST_CASE("anchors under reshapes: blocked in the root's tiles, or computed once in their own") {
  // transformers' Conv1D (reshape -> linear -> reshape back), and a head split (linear ->
  // reshape -> transpose), each fused into one group, against the reference.
  // Heads of 16 columns (narrower than an AVX-512 block: stored whole) and of 64, 3 of them
  // (at the tiles of rows of the transpose) and 4 (at its tiles of one head, on 2 cores).
  for (auto [head_split, head, heads] : std::initializer_list<std::tuple<bool, int, int>>{
           {false, 16, 3}, {true, 16, 3}, {true, 64, 3}, {true, 64, 4}}) {
    CAPTURE(head_split);
    CAPTURE(head);
    CAPTURE(heads);
    const graph::Graph g = testing::reshaped_anchor_graph(head_split, head, heads);
    std::vector<fusion::UserGroup> one(1);
    for (size_t i : g.topo_order()) one[0].nodes.push_back(g.nodes()[i].name);
    check_user_groups(g, one, 11);
  }
}

TEST_CASE("a timed run's time per group: each root Func's production goes to its node's group") {
  const graph::Graph g = graph::zoo_model("mixed", graph::ZooSize::cpu);
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  const fusion::FusionPlan plan = fusion::plan_fusion(g, model);
  REQUIRE(plan.groups.size() == 2);
  // Helpers and wrappers map by name prefix; Funcs of no node go to the last slot.
  const std::map<std::string, double> seconds{{"conv2d_0_acc", 2e-3},
                                              {"w_src_in_conv2d_0_acc$0", 0.1e-3},
                                              {"relu_0", 1e-3},
                                              {"avg_pool_0_sum", 0.4e-3},
                                              {"max_pool_0_out", 0.2e-3}};
  const auto t = schedules::times_by_group(g, plan, seconds);
  REQUIRE(t.size() == 3);
  CHECK(t[0].measured_s == doctest::Approx(3e-3));
  CHECK(t[1].measured_s == doctest::Approx(0.6e-3));  // the pools
  CHECK(t[2].group == -1);
  CHECK(t[2].measured_s == doctest::Approx(0.1e-3));  // w_src...: no node's
  CHECK(t[0].predicted_s == plan.groups[0].estimate.t_total_s);
  // A real timed run: every group's production is stamped, and the stamps fit in the run.
  schedules::CompiledPlan k(g, plan, graph::random_inputs(g, 1), {}, true);
  const auto start = std::chrono::steady_clock::now();
  k.run();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto real = schedules::times_by_group(g, plan, k.root_seconds());
  double sum = 0;
  for (const auto& x : real) {
    CAPTURE(x.group);
    if (x.group >= 0) CHECK(x.measured_s > 0);
    sum += x.measured_s;
  }
  CHECK(sum <= wall);
  // An untimed plan stamps nothing.
  schedules::CompiledPlan plain(g, plan, graph::random_inputs(g, 1));
  plain.run();
  CHECK(plain.root_seconds().empty());
}

TEST_CASE("Swin's patch merging: a concat along the innermost axis copies its parts") {
  // The four 2x2-strided slices of a [1, 8, 8, 24] map joined along C (96 columns, not a
  // multiple of AVX-512's 32-lane vectors), a layer norm and a linear, in one group. The
  // concat's parts are a helper, an update each (dense copies, not the clamped gathers of
  // one select); a concat along another axis keeps its select. JIT against the reference.
  graph::GraphBuilder b("patch_merging");
  auto x = b.input("x", {1, 8, 8, 24});
  const std::vector<graph::GraphBuilder::T> parts = patch_quarters(b, x, 8);
  auto merged = b.concat(parts, 3);
  auto normed = b.layer_norm(merged);
  b.output(b.linear(normed, b.param("w", {96, 48})));
  b.output(b.concat({parts[0], parts[1]}, 1));
  const graph::Graph g = b.build();

  std::vector<Halide::Buffer<>> keep;
  const ops::LoweredGraph lowered = ops::lower(
      g, ops::buffer_sources(g, graph::random_inputs(g, 3), graph::param_values(g), keep));
  for (const ops::LoweredNode& n : lowered.nodes) {
    if (n.node != "concat_0" && n.node != "concat_1") continue;
    CAPTURE(n.node);
    const bool helper = n.roles.size() == 2 && n.roles[0] == "parts";
    CHECK(helper == (n.node == "concat_0"));
    if (helper) CHECK(n.funcs[0].num_update_definitions() == 4);
  }

  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"slice_0",  "slice_1",      "slice_2", "slice_3",
                     "concat_0", "layer_norm_0", "linear_0"};
  groups[1].nodes = {"concat_1"};
  check_user_groups(g, groups, 12);
}

TEST_CASE("a row statistic read through a window partition is computed once, not in every tile") {
  // Swin-T's stem: patch merging's concat and layer norm, then the window partition
  // ([1, 8, 8, 32] -> [1, 2, 4, 2, 4, 32], the windows' dims together, [4, 16, 32]) in one
  // group. The partition's rows map to the norm's through / and %, so a tile of windows
  // would need the whole norm: it is materialized, and the concat's parts (inlined into it)
  // are computed at it. JIT against the reference.
  graph::GraphBuilder b("windows");
  auto x = b.input("x", {1, 16, 16, 8});
  const std::vector<graph::GraphBuilder::T> parts = patch_quarters(b, x, 16);
  auto normed = b.layer_norm(b.concat(parts, 3));
  auto windows = window_partition(b, normed, 32);
  b.output(b.relu(windows));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(1);
  groups[0].nodes = {"slice_0",      "slice_1",   "slice_2",     "slice_3",   "concat_0",
                     "layer_norm_0", "reshape_0", "transpose_0", "reshape_1", "relu_0"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 13);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  const schedules::NodeSchedule* norm = s.groups[0].find("layer_norm_0");
  const schedules::NodeSchedule* concat = s.groups[0].find("concat_0");
  REQUIRE(norm != nullptr);
  REQUIRE(concat != nullptr);
  CHECK(norm->placement == schedules::Placement::materialized);
  CHECK(concat->placement == schedules::Placement::inlined);
  CHECK(concat->root == "layer_norm_0");
}

TEST_CASE("a row statistic read through a roll is computed once, not in every tile") {
  // Swin-T's shifted block's cyclic shift: the residual, its layer norm, then a roll (its last
  // rows joined along H before its first). A tile of the roll's rows reads both ends of the
  // norm, and Halide bounds the norm by their hull: computed at the tile it would be computed
  // whole in each. It is materialized; a concat along H of slices of two tensors is no roll,
  // and the norm it reads stays at the tile. JIT against the reference.
  graph::GraphBuilder b("roll");
  auto x = b.input("x", {1, 16, 8, 32});
  auto y = b.input("y", {1, 16, 8, 32});
  auto normed = b.layer_norm(b.add(x, y));
  b.output(roll_h(b, normed, 16, 3));
  auto other = b.layer_norm(b.add(y, x));
  b.output(b.concat({b.slice(other, {13}, {16}, {1}), b.slice(x, {0}, {13}, {1})}, 1));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(2);
  groups[0].nodes = {"add_0", "layer_norm_0", "slice_0", "slice_1", "concat_0"};
  groups[1].nodes = {"add_1", "layer_norm_1", "slice_2", "slice_3", "concat_1"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 15);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  const schedules::NodeSchedule* rolled = s.groups[0].find("layer_norm_0");
  const schedules::NodeSchedule* joined = s.groups[1].find("layer_norm_1");
  REQUIRE(rolled != nullptr);
  REQUIRE(joined != nullptr);
  CHECK(rolled->placement == schedules::Placement::materialized);
  CHECK(joined->placement != schedules::Placement::materialized);
}

TEST_CASE("a window partition a linear reads is materialized, not inlined into its blocks") {
  // Swin-T's shifted windows: a roll (slices joined along H), the partition's reshapes and
  // permute, then the qkv linear, in one group. Inlined, the partition's / and % and the
  // roll's selects ran for every element the linear's blocks broadcast. JIT against the
  // reference.
  graph::GraphBuilder b("shifted_windows");
  auto x = b.input("x", {1, 8, 8, 16});
  auto rolled = roll_h(b, x, 8, 6);
  auto windows = window_partition(b, rolled, 16);
  b.output(b.linear(windows, b.param("w", {16, 48}), b.param("bias", {48})));
  const graph::Graph g = b.build();
  std::vector<fusion::UserGroup> groups(1);
  groups[0].nodes = {"slice_0",     "slice_1",   "concat_0", "reshape_0",
                     "transpose_0", "reshape_1", "linear_0"};
  const fusion::FusionPlan plan = check_user_groups(g, groups, 14);
  const schedules::PipelineSchedule s = jit_schedule(g, plan);
  const schedules::NodeSchedule* partition = s.groups[0].find("reshape_1");
  REQUIRE(partition != nullptr);
  CHECK(partition->placement == schedules::Placement::materialized);
  CHECK(s.groups[0].find("reshape_0")->placement == schedules::Placement::inlined);
}
