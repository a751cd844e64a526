// The schedule stage without Halide: each group's record from plan x target facts. What the
// records say is what is emitted (test_loop_nests reads the loop nests against them); here,
// the choices themselves: placements and their reasons, tiles per target, register blocks
// per ISA, the requests a plan may make and the ones refused, and that a plan written with
// its records reads back to the same records.
#include <algorithm>
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "fusion/graph/builder.h"
#include "fusion/graph/zoo.h"
#include "fusion/planner/planner.h"
#include "schedules/group_schedule.h"
#include "tests/reshaped_anchor.h"

using namespace opfuse::fusion;
using namespace opfuse::schedules;
using namespace opfuse::graph;

namespace {

const HardwareProfile& avx512_profile() {
  static const HardwareProfile p = builtin_profile("epyc-avx512-2c");
  return p;
}

// An AVX2 target (8 lanes, 16 ymm) and an AVX-512 one (16 lanes, 32 zmm), 2 cores.
TargetFacts avx2() {
  TargetFacts t;
  t.lanes = 8;
  t.vector_registers = 16;
  t.cores = 2;
  return t;
}
TargetFacts avx512() {
  TargetFacts t;
  t.lanes = 16;
  t.vector_registers = 32;
  t.cores = 2;
  return t;
}

struct Planned {
  Graph g;
  FusionPlan plan;
};

Planned planned(const std::string& model, const std::vector<UserGroup>* user = nullptr) {
  Planned p{zoo_model(model, ZooSize::cpu), {}};
  const RooflineCostModel cost(avx512_profile());
  p.plan = user ? plan_from_user_groups(p.g, cost, *user) : plan_fusion(p.g, cost);
  return p;
}

const NodeSchedule& record_of(const PipelineSchedule& s, const std::string& node) {
  for (const auto& g : s.groups) {
    if (const NodeSchedule* n = g.find(node)) return *n;
  }
  FAIL("no record for " << node);
  throw std::logic_error("unreachable");
}

std::vector<std::string> placed(const GroupSchedule& g, Placement p) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes) {
    if (n.placement == p) out.push_back(n.node);
  }
  return out;
}

// A plan's groups as a user would hand them back, with one group's requests changed.
std::vector<UserGroup> user_groups(const FusionPlan& p) {
  std::vector<UserGroup> out;
  for (const auto& g : p.groups) {
    UserGroup u;
    u.nodes = g.nodes;
    u.tile_fraction = g.request.tile_fraction;
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace

TEST_CASE("records: a CBR group inlines BN and ReLU, blocks the conv at the pool's tile") {
  const Planned p = planned("cbr_pool");
  const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
  REQUIRE(s.groups.size() == 1);
  const GroupSchedule& g = s.groups[0];
  CHECK(g.anchor == "conv2d_0");
  CHECK(placed(g, Placement::inlined) == std::vector<std::string>{"batch_norm_0", "relu_0"});
  CHECK(placed(g, Placement::at_tile) == std::vector<std::string>{"conv2d_0"});
  CHECK(placed(g, Placement::root) == std::vector<std::string>{"max_pool_0"});
  const NodeSchedule& pool = *g.find("max_pool_0");
  CHECK(pool.output == 0);  // the graph's output: the pipeline's output computes it
  CHECK(pool.tiling.kind == Tiling::Kind::rows);
  CHECK(pool.tiling.tiles >= 2 * 2);  // at least two tiles per core
  const NodeSchedule& conv = *g.find("conv2d_0");
  CHECK(conv.root == "max_pool_0");
  REQUIRE(conv.block.has_value());
  CHECK(conv.block->pack_weights);  // NHWC: Cout-innermost weights
  CHECK_FALSE(conv.block->whole_dims);
  CHECK_FALSE(conv.block->in_root_loops);  // the pool reads a window of it: a tile buffer
  CHECK(!g.prefetch.emitted);
  CHECK(g.prefetch.distance == p.plan.groups[0].request.prefetch_distance);
  CHECK(!g.prefetch.why.empty());
}

TEST_CASE("records: an inlined expression holds one transcendental, cut per tile") {
  // ew_chain_N: (mul, add, tanh, leaky_relu) x N/4. The value feeding each tanh after the
  // first is computed per tile; a chain with one tanh stays inlined whole.
  auto at_tile = [](const std::string& model) {
    const Planned p = planned(model);
    return placed(schedule_plan(p.g, p.plan, avx512()).groups[0], Placement::at_tile);
  };
  CHECK(at_tile("ew_chain_8") == std::vector<std::string>{"add_1"});
  CHECK(at_tile("ew_chain_16") == std::vector<std::string>{"add_1", "add_2", "add_3"});
  CHECK(at_tile("ew_chain_4").empty());
  // Layer norm (inlined into its elementwise consumer) then GELU: one transcendental.
  const Planned ln = planned("layernorm");
  const PipelineSchedule s = schedule_plan(ln.g, ln.plan, avx512());
  CHECK(placed(s.groups[0], Placement::at_tile).empty());
  CHECK(record_of(s, "layer_norm_0").placement == Placement::inlined);
  CHECK(record_of(s, "layer_norm_0").vectorize_row_reduction);
}

TEST_CASE("records: attention's K transpose is materialised for the score matmul") {
  const Planned p = planned("attention");
  const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
  const NodeSchedule& t = record_of(s, "transpose_0");
  CHECK(t.placement == Placement::materialized);
  CHECK(t.reason.find("transpose") != std::string::npos);
  CHECK(record_of(s, "mul_0").placement == Placement::inlined);
  CHECK(record_of(s, "matmul_1").placement == Placement::root);
}

TEST_CASE("records: register blocks fit the registers of each ISA") {
  for (const auto& name : zoo_names()) {
    CAPTURE(name);
    const Planned p = planned(name);
    for (const TargetFacts& t : {avx2(), avx512()}) {
      CAPTURE(t.vector_registers);
      const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
      for (const auto& g : s.groups) {
        for (const auto& n : g.nodes) {
          if (!n.block) continue;
          CAPTURE(n.node);
          // A conv's accumulators take at most half the registers, or with 32 of them a wide
          // block's 4 vectors x 7 rows, its weight vectors beside them (AVX-512's FMA reads
          // its broadcast input from memory); a matmul's or linear layer's at most 3/4, with
          // its row of B (the block's vectors) and a broadcast of A beside them.
          const int acc = n.block->accumulators(t.lanes);
          const bool conv = std::any_of(p.g.nodes().begin(), p.g.nodes().end(), [&](const auto& x) {
            return x.name == n.node && x.op.rfind("conv2d", 0) == 0;
          });
          if (conv && n.block->vectors == 4) {
            CHECK(t.vector_registers == 32);
            CHECK(acc + n.block->vectors <= t.vector_registers);
          } else if (conv) {
            CHECK(acc <= t.vector_registers / 2);
          } else {
            const int b_regs = acc / n.block->rows;
            CHECK(acc + b_regs + 1 <= t.vector_registers);
            CHECK(acc <= 3 * t.vector_registers / 4);
          }
          CHECK(n.block->lanes <= g.vector_lanes);
        }
      }
    }
  }
  // mlp's linears: 2 vectors of 2 zmm x 6 rows on AVX-512 (32 lanes), 2 ymm x 6 rows on AVX2
  // (the natural 8 lanes: 2-register vectors would leave 2 rows): 24 zmm and 12 ymm of
  // accumulators, the row of B and a broadcast beside them.
  const Planned mlp = planned("mlp");
  const PipelineSchedule s512 = schedule_plan(mlp.g, mlp.plan, avx512()),
                         s2 = schedule_plan(mlp.g, mlp.plan, avx2());
  const NodeSchedule& l512 = record_of(s512, "linear_0");
  const NodeSchedule& l2 = record_of(s2, "linear_0");
  REQUIRE(l512.block.has_value());
  REQUIRE(l2.block.has_value());
  CHECK(l512.block->lanes == 32);
  CHECK(l512.block->accumulators(16) == 24);
  CHECK(l2.block->lanes == 8);
  CHECK(l2.block->accumulators(8) == 12);
  CHECK(l2.block->rows == 6);
}

TEST_CASE("records: tiles respect their rule and cover the root, on 1, 2 and 8 cores") {
  for (const auto& name : zoo_names()) {
    CAPTURE(name);
    const Planned p = planned(name);
    for (int cores : {1, 2, 8}) {
      TargetFacts t = avx512();
      t.cores = cores;
      const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
      for (const auto& g : s.groups) {
        for (const auto& n : g.nodes) {
          if (n.placement != Placement::root && n.placement != Placement::materialized) continue;
          CAPTURE(n.node);
          const Tiling& tl = n.tiling;
          CHECK(tl.tiles >= 1);
          CHECK(tl.vector_lanes <= std::max<int64_t>(1, n.extents[0]));
          if (tl.kind != Tiling::Kind::rows) continue;
          const int j = tl.split_dim;
          REQUIRE(j >= 1);
          REQUIRE(j < int(n.extents.size()));
          CHECK(tl.factor <= n.extents[size_t(j)]);
          CHECK((j >= n.rule.min_dim || j == int(n.extents.size()) - 1));
          CHECK(n.rule.whole.count(j) == 0);
          if (j == n.rule.min_dim && n.rule.multiple > 1) {
            CHECK((tl.factor % n.rule.multiple == 0 || tl.factor == n.extents[size_t(j)]));
          }
          // Every core gets a tile where the rows allow it (the target is two per core; the
          // split dim's granularity can leave fewer: 28 rows in pieces of 2 for 16).
          int64_t outer = 1;
          for (size_t d = 1; d < n.extents.size(); ++d) {
            if (!n.rule.whole.count(int(d))) outer *= n.extents[d];
          }
          if (outer >= 2 * cores * n.rule.row_multiple * n.rule.multiple && n.rule.whole.empty()) {
            CAPTURE(cores);
            CAPTURE(outer);
            CHECK(tl.tiles >= cores);
          }
        }
      }
    }
  }
}

TEST_CASE("records: on a GPU each root is one kernel, row statistics their own kernels") {
  const Graph g = zoo_model("layernorm", ZooSize::gpu);
  const RooflineCostModel cost(builtin_profile("h200"));
  const FusionPlan plan = plan_fusion(g, cost);
  const PipelineSchedule s = schedule_plan(g, plan, facts_of(builtin_profile("h200")));
  CHECK(s.target.gpu);
  int kernels = 0, rows = 0;
  for (const auto& grp : s.groups) {
    for (const auto& n : grp.nodes) {
      CHECK_FALSE(n.block.has_value());  // no register blocks on a GPU
      rows += n.row_kernels;
      if (n.placement != Placement::root && n.placement != Placement::materialized) continue;
      CHECK(n.tiling.kind == Tiling::Kind::gpu);
      CHECK(n.tiling.gpu_threads == 256);
      ++kernels;
    }
  }
  CHECK(kernels >= 1);
  CHECK(rows == 1);  // the layer norm's statistics
  // A plan may ask for other block sizes; the written plan carries them back.
  std::vector<UserGroup> u = user_groups(plan);
  for (auto& grp : u) grp.gpu_threads = 128;
  const FusionPlan asked = plan_from_user_groups(g, cost, u);
  const PipelineSchedule s128 = schedule_plan(g, asked, facts_of(builtin_profile("h200")));
  for (const auto& grp : s128.groups) {
    for (const auto& n : grp.nodes) {
      if (n.tiling.kind == Tiling::Kind::gpu) CHECK(n.tiling.gpu_threads == 128);
    }
  }
  const auto back = user_groups_from_plan_json(plan_to_json(asked, s128), "gpu.plan.json");
  CHECK(back[0].gpu_threads == 128);
  TargetFacts small = facts_of(builtin_profile("h200"));
  small.gpu_max_threads = 64;
  CHECK_THROWS_WITH_AS(schedule_plan(g, asked, small),
                       doctest::Contains("128 GPU threads per block, but the device allows 64"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      user_groups_from_plan_json(R"({"groups": [{"nodes": ["x"], "schedule": {"gpu_threads": 100}}]})",
                                 "bad.json"),
      doctest::Contains("gpu_threads must be 0 (the stage's) or a multiple of 32"),
      std::invalid_argument);
}

TEST_CASE("records: a plan's requests set blocks and placements, or are refused by name") {
  const Planned base = planned("cbr_pool");
  std::vector<UserGroup> u = user_groups(base.plan);
  SUBCASE("a smaller block; the tiles follow it") {
    u[0].blocks["conv2d_0"] = {2, 1};
    const Planned p = planned("cbr_pool", &u);
    const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
    const NodeSchedule& conv = record_of(s, "conv2d_0");
    REQUIRE(conv.block.has_value());
    CHECK(conv.block->rows == 2);
    CHECK(conv.block->vectors == 1);
    CHECK(record_of(s, "max_pool_0").rule.multiple % 2 == 0);
  }
  SUBCASE("a member computed per tile instead of inlined") {
    u[0].placements["relu_0"] = "compute_at";
    const Planned p = planned("cbr_pool", &u);
    const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
    CHECK(record_of(s, "relu_0").placement == Placement::at_tile);
    CHECK(record_of(s, "relu_0").reason == "requested by the plan");
  }
  SUBCASE("refused: an anchor inlined") {
    u[0].placements["conv2d_0"] = "inline";
    const Planned p = planned("cbr_pool", &u);
    CHECK_THROWS_WITH_AS(schedule_plan(p.g, p.plan, avx512()),
                         doctest::Contains("conv2d_0' (conv2d): an anchor cannot be inlined"),
                         std::invalid_argument);
  }
  SUBCASE("refused: a stored node placed elsewhere") {
    u[0].placements["max_pool_0"] = "inline";
    const Planned p = planned("cbr_pool", &u);
    CHECK_THROWS_WITH_AS(schedule_plan(p.g, p.plan, avx512()),
                         doctest::Contains("read outside the group, so it is stored"),
                         std::invalid_argument);
  }
  SUBCASE("refused: a placement that does not exist, or of a node outside the group") {
    u[0].placements["relu_0"] = "somewhere";
    const Planned p = planned("cbr_pool", &u);
    CHECK_THROWS_WITH_AS(schedule_plan(p.g, p.plan, avx512()),
                         doctest::Contains("'somewhere' is none of inline, compute_at"),
                         std::invalid_argument);
    std::vector<UserGroup> v = user_groups(base.plan);
    v[0].placements["nowhere_7"] = "inline";
    const Planned q = planned("cbr_pool", &v);
    CHECK_THROWS_WITH_AS(schedule_plan(q.g, q.plan, avx512()),
                         doctest::Contains("'nowhere_7', which is not in the group"),
                         std::invalid_argument);
  }
  SUBCASE("refused: a block larger than the register file, or than the tensor") {
    u[0].blocks["conv2d_0"] = {32, 2};  // 64 accumulators
    const Planned p = planned("cbr_pool", &u);
    CHECK_THROWS_WITH_AS(schedule_plan(p.g, p.plan, avx512()),
                         doctest::Contains("accumulator registers, but the target has 32"),
                         std::invalid_argument);
    std::vector<UserGroup> v = user_groups(base.plan);
    v[0].blocks["conv2d_0"] = {64, 1};
    const Planned q = planned("cbr_pool", &v);
    CHECK_THROWS_AS(schedule_plan(q.g, q.plan, avx512()), std::invalid_argument);
    std::vector<UserGroup> w = user_groups(base.plan);
    w[0].blocks["relu_0"] = {2, 1};
    const Planned r = planned("cbr_pool", &w);
    CHECK_THROWS_WITH_AS(schedule_plan(r.g, r.plan, avx512()),
                         doctest::Contains("only anchors have register blocks"),
                         std::invalid_argument);
  }
}

TEST_CASE("records: a plan JSON written with its records reads back to the same records") {
  for (const auto& name : zoo_names()) {
    CAPTURE(name);
    for (const TargetFacts& t : {avx2(), avx512()}) {
      const Planned p = planned(name);
      const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
      const std::string text = plan_to_json(p.plan, s);
      const std::vector<UserGroup> back = user_groups_from_plan_json(text, name + ".plan.json");
      const Planned q = planned(name, &back);
      const std::string again = plan_to_json(q.plan, schedule_plan(q.g, q.plan, t));
      const auto a = nlohmann::json::parse(text), b = nlohmann::json::parse(again);
      REQUIRE(a["groups"].size() == b["groups"].size());
      for (size_t i = 0; i < a["groups"].size(); ++i) {
        CHECK(a["groups"][i]["record"] == b["groups"][i]["record"]);
        CHECK(a["groups"][i]["schedule"] == b["groups"][i]["schedule"]);
      }
    }
  }
}

namespace {

// tests/reshaped_anchor.h's graphs, each as one group.
// Every node of `g` in one user group.
Planned as_one_group(Graph g) {
  Planned p{std::move(g), {}};
  std::vector<UserGroup> one(1);
  for (size_t i : p.g.topo_order()) one[0].nodes.push_back(p.g.nodes()[i].name);
  p.plan = plan_from_user_groups(p.g, RooflineCostModel(avx512_profile()), one);
  return p;
}

Planned one_group(bool head_split) {
  return as_one_group(opfuse::testing::reshaped_anchor_graph(head_split));
}

}  // namespace

TEST_CASE("records: an anchor under reshapes that keep its last two axes is blocked in the tiles") {
  const Planned p = one_group(false);
  const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
  const NodeSchedule& lin = record_of(s, "linear_0");
  CHECK(lin.placement == Placement::at_tile);
  REQUIRE(lin.block.has_value());
  CHECK_FALSE(lin.block->whole_dims);
  CHECK(record_of(s, "relu_0").tiling.tiles > 1);
  // The block's rows (dim 1, the 64 rows) are what the tiles split, in multiples of the block.
  CHECK(record_of(s, "relu_0").rule.min_dim == 1);
  CHECK(record_of(s, "relu_0").rule.multiple == lin.block->rows);
}

TEST_CASE(
    "records: an anchor under a head split narrower than its block is computed once in "
    "its own tiles") {
  const Planned p = one_group(true);  // heads of 16 columns, blocks of 2 vectors of 16
  const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
  const NodeSchedule& lin = record_of(s, "linear_0");
  CHECK(lin.placement == Placement::materialized);
  CHECK(lin.reason.find("do not align") != std::string::npos);
  CHECK(lin.tiling.tiles > 1);
  REQUIRE(lin.block.has_value());
  CHECK_FALSE(lin.block->whole_dims);  // its own root: aligned with itself
}

TEST_CASE("records: an anchor under a head split of whole blocks is computed in tiles of heads") {
  // [1, 64, H * 64] split into H heads of 64: a tile of the transpose, rows of one head, reads
  // 64 columns of the linear, whole blocks on either ISA. Its weights (32 x H * 64) outweigh
  // its input (64 x 32): with 2 heads a core each tile is one head, all rows, and reads its
  // columns' weights once; with fewer, tiles of rows.
  for (int64_t heads : {4, 3}) {
    const Planned p = as_one_group(opfuse::testing::reshaped_anchor_graph(true, 64, heads));
    for (const TargetFacts& t : {avx2(), avx512()}) {
      CAPTURE(heads);
      CAPTURE(t.vector_registers);
      const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
      const NodeSchedule& lin = record_of(s, "linear_0");
      const NodeSchedule& root = record_of(s, "transpose_0");
      CHECK(lin.placement == Placement::at_tile);
      CHECK(lin.root == "transpose_0");
      REQUIRE(lin.block.has_value());
      CHECK_FALSE(lin.block->whole_dims);
      CHECK(64 % (lin.block->lanes * lin.block->vectors) == 0);
      CHECK(root.rule.head_chunks);
      CHECK(root.tiling.kind == Tiling::Kind::rows);
      if (heads >= 2 * t.cores) {
        CHECK(root.tiling.split_dim == 2);
        CHECK(root.tiling.factor == 1);
        CHECK(root.tiling.tiles == heads);
      } else {
        CHECK(root.tiling.split_dim == 1);  // rows of S, in whole blocks
        CHECK(root.tiling.factor % lin.block->rows == 0);
      }
    }
  }
}

TEST_CASE("records: a weight-bound linear under a layer norm is computed once in tiles of columns") {
  // A transformer block's last linear: 64 rows of 256 into 512 columns (more weights than
  // input), a residual add and a layer norm over the columns, as one group. The norm's tiles
  // are rows; inside them each tile would read all the weights.
  GraphBuilder b("proj_norm");
  auto x = b.input("x", {1, 64, 256});
  auto res = b.input("res", {1, 64, 512});
  b.output(b.layer_norm(b.add(b.linear(x, b.param("w", {256, 512})), res)));
  const Planned p = as_one_group(b.build());
  for (const TargetFacts& t : {avx2(), avx512()}) {
    const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
    REQUIRE(s.groups.size() == 1);
    const NodeSchedule& norm = record_of(s, "layer_norm_0");
    const NodeSchedule& lin = record_of(s, "linear_0");
    CHECK(norm.placement == Placement::root);
    CHECK(norm.tiling.kind == Tiling::Kind::rows);
    CHECK(norm.tiling.tiles > 1);
    CHECK(lin.placement == Placement::materialized);
    CHECK(lin.reason.find("weight-bound") != std::string::npos);
    // Its own tiles are chunks of whole column blocks, each with every row.
    REQUIRE(lin.block.has_value());
    CHECK(lin.tiling.kind == Tiling::Kind::column_chunks);
    CHECK(lin.tiling.factor % (int64_t(lin.block->lanes) * lin.block->vectors) == 0);
    CHECK(lin.tiling.tiles >= 2 * t.cores);
    CHECK(lin.block->channel_blocks_outside);
    CHECK(record_of(s, "add_0").placement == Placement::inlined);
  }
}

namespace {
// conv (3x3, pad 1) + ReLU at HxWxC, NHWC, one group.
Planned conv_relu(int64_t hw, int64_t c) {
  GraphBuilder b("conv_relu");
  auto x = b.input("x", {1, hw, hw, c}, Layout::NHWC);
  Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  b.output(b.relu(b.conv2d(x, b.param("w", {c, c, 3, 3}), same)));
  Planned p{b.build(), {}};
  p.plan = plan_fusion(p.g, RooflineCostModel(avx512_profile()));
  return p;
}
}  // namespace

TEST_CASE("records: a conv with more weights than input is tiled by output channels") {
  for (const TargetFacts& t : {avx2(), avx512()}) {
    // ResNet's last stage: 9.4 MB of weights, a 100 KB input. Tiles are chunks of whole
    // channel blocks, each holding every pixel; the block is the whole 7-pixel row.
    const Planned p = conv_relu(7, 512);
    const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
    const NodeSchedule& root = record_of(s, "relu_0");
    const NodeSchedule& conv = record_of(s, "conv2d_0");
    REQUIRE(conv.block.has_value());
    const int64_t width = int64_t(conv.block->lanes) * conv.block->vectors;
    CHECK(root.rule.channel_chunks == width);
    CHECK(root.tiling.kind == Tiling::Kind::column_chunks);
    CHECK(root.tiling.factor % width == 0);
    CHECK(root.tiling.tiles >= 2 * t.cores);
    CHECK(root.tiling.factor * (root.tiling.tiles - 1) < 512);
    CHECK(conv.block->channel_blocks_outside);
    // 7 rows where the ISA wants 8 (AVX-512) or more than 4; AVX2 wants 4.
    CHECK(conv.block->rows == (t.vector_registers == 32 ? 7 : 4));
  }
  // ResNet's first stage: 147 KB of weights, a 800 KB input: tiles of rows.
  const Planned p = conv_relu(56, 64);
  const PipelineSchedule s = schedule_plan(p.g, p.plan, avx512());
  CHECK(record_of(s, "relu_0").rule.channel_chunks == 0);
  CHECK(record_of(s, "relu_0").tiling.kind == Tiling::Kind::rows);
  CHECK(record_of(s, "conv2d_0").block->channel_blocks_outside);
}

TEST_CASE(
    "records: an NHWC conv whose weight slice outgrows L1 has 4-vector blocks on 32 registers") {
  // The block the schedule gives conv2d_0 of `p` on target `t`.
  auto block_of = [](const Planned& p, const TargetFacts& t) {
    const PipelineSchedule s = schedule_plan(p.g, p.plan, t);
    const NodeSchedule& conv = record_of(s, "conv2d_0");
    REQUIRE(conv.block.has_value());
    return *conv.block;
  };
  // A 1x1 conv + ReLU at 14x14, as one group.
  auto pointwise = [](int64_t cin, int64_t cout) {
    GraphBuilder b("pointwise");
    auto x = b.input("x", {1, 14, 14, cin}, Layout::NHWC);
    b.output(b.relu(b.conv2d(x, b.param("w", {cout, cin, 1, 1}))));
    return as_one_group(b.build());
  };
  // 3x3, 128 channels: a 2-vector block's slice is 9 x 128 x 32 floats (147 KB), past L1.
  const Planned p = conv_relu(28, 128);
  const RegisterBlock wide = block_of(p, avx512());
  CHECK(wide.vectors == 4);
  CHECK(wide.rows == 7);
  CHECK(wide.accumulators(16) == 28);
  // AVX2's 16 ymm keep their 2-vector block.
  CHECK(block_of(p, avx2()).vectors == 2);
  // 7x7x512, chunked: 32 input channels a pass, not the 16 whose slice at 4 vectors fits L1.
  const RegisterBlock chunked = block_of(conv_relu(7, 512), avx512());
  CHECK(chunked.vectors == 4);
  CHECK(chunked.reduction_chunk == 32);
  // A 1x1 conv of 1024 input channels: wide, and unchunked, since its input (7 pixels x 1024
  // channels, 28 KB) fits L1 by itself.
  const RegisterBlock unchunked = block_of(pointwise(1024, 256), avx512());
  CHECK(unchunked.vectors == 4);
  CHECK(unchunked.reduction_chunk == 0);
  // A 1x1 conv of 128 input channels: its 2-vector slice (16 KB) fits L1, and stays.
  CHECK(block_of(pointwise(128, 512), avx512()).vectors == 2);
}

TEST_CASE(
    "records: a squeeze-excite scale tiles its multiply in rows unless its weights weigh more") {
  // x * sigmoid(fc(s)): the FC's [1,1,1,C] output is broadcast over x's pixels and computed
  // in each of the multiply's tiles. EfficientNet-B0's 144-channel SE at 28x28 (864 weights,
  // 113k pixels x channels): tiles of rows. Its 1152-channel ones at 7x7 (55k weights, 56k
  // elements): each tile of rows would read all the weights; chunks of channels read them
  // once.
  struct Case {
    int64_t hw, c, squeezed;
    Tiling::Kind kind;
  };
  for (const Case& k :
       {Case{28, 144, 6, Tiling::Kind::rows}, Case{7, 1152, 48, Tiling::Kind::column_chunks}}) {
    CAPTURE(k.c);
    GraphBuilder b("se");
    auto x = b.input("x", {1, k.hw, k.hw, k.c}, Layout::NHWC);
    auto s = b.input("s", {1, 1, 1, k.squeezed}, Layout::NHWC);
    b.output(b.mul(x, b.sigmoid(b.conv2d(s, b.param("w", {k.c, k.squeezed, 1, 1})))));
    const Planned p = as_one_group(b.build());
    for (const TargetFacts& t : {avx2(), avx512()}) {
      const PipelineSchedule sched = schedule_plan(p.g, p.plan, t);
      const NodeSchedule& root = record_of(sched, "mul_0");
      CHECK(root.tiling.kind == k.kind);
      CHECK(root.tiling.tiles >= 2 * t.cores);
      CHECK(record_of(sched, "conv2d_0").placement == Placement::at_tile);
    }
  }
}

TEST_CASE("records: an anchor runs in its root's loops where its epilogue is elementwise") {
  for (const TargetFacts& t : {avx2(), avx512()}) {
    CAPTURE(t.vector_registers);
    // conv -> ReLU: the ReLU's loops are the conv's blocks, no tile buffer between them.
    const Planned cr = conv_relu(56, 64);
    const PipelineSchedule s = schedule_plan(cr.g, cr.plan, t);
    CHECK(record_of(s, "conv2d_0").placement == Placement::at_tile);
    CHECK(record_of(s, "conv2d_0").block->in_root_loops);
    // Unfused, the conv is its own root: its loops are its blocks, no wrapper.
    PlannerOptions no_fusion;
    no_fusion.enable_fusion = false;
    const FusionPlan unfused = plan_fusion(cr.g, RooflineCostModel(avx512_profile()), no_fusion);
    const PipelineSchedule su = schedule_plan(cr.g, unfused, t);
    CHECK(record_of(su, "conv2d_0").placement == Placement::root);
    CHECK(record_of(su, "conv2d_0").block->in_root_loops);
    // Input channels in chunks (ResNet's last stage): the accumulators are a tile buffer.
    const Planned deep = conv_relu(7, 512);
    const PipelineSchedule sd = schedule_plan(deep.g, deep.plan, t);
    const NodeSchedule& dc = record_of(sd, "conv2d_0");
    CHECK(dc.block->reduction_chunk > 0);
    CHECK_FALSE(dc.block->in_root_loops);
  }
  // Columns in chunks whose last one is shorter (an if guards it): not in the root's loops;
  // with chunks that divide the columns, it is.
  for (const int64_t c : {160, 512}) {
    CAPTURE(c);
    GraphBuilder b("chunks");
    auto x = b.input("x", {1, 10, 10, 96}, Layout::NHWC);
    Conv2dOptions down;
    down.strides = {2, 2};
    down.pads = {1, 1, 1, 1};
    b.output(b.relu(b.conv2d(x, b.param("w", {c, 96, 3, 3}), down)));
    const Graph g = b.build();
    const PipelineSchedule s =
        schedule_plan(g, plan_fusion(g, RooflineCostModel(avx512_profile())), avx512());
    const NodeSchedule& root = record_of(s, "relu_0");
    REQUIRE(root.tiling.kind == Tiling::Kind::column_chunks);
    CHECK(record_of(s, "conv2d_0").block->in_root_loops == (c % root.tiling.factor == 0));
  }
  // A layer norm between a linear layer and its root needs whole rows of it: a tile buffer.
  GraphBuilder b("linear_norm");
  auto x = b.input("x", {256, 32});
  b.output(b.relu(b.layer_norm(b.linear(x, b.param("w", {32, 32})))));
  const Graph g = b.build();
  std::vector<UserGroup> one(1);
  one[0].nodes = {"linear_0", "layer_norm_0", "relu_0"};
  const PipelineSchedule sn = schedule_plan(
      g, plan_from_user_groups(g, RooflineCostModel(avx512_profile()), one), avx512());
  CHECK(record_of(sn, "linear_0").placement == Placement::at_tile);
  CHECK_FALSE(record_of(sn, "linear_0").block->in_root_loops);
  // No register blocks on a GPU, so nothing runs in its root's loops there.
  TargetFacts gpu = avx512();
  gpu.gpu = true;
  gpu.gpu_max_threads = 1024;
  const Planned cr = conv_relu(56, 64);
  const PipelineSchedule sg = schedule_plan(cr.g, cr.plan, gpu);
  for (const auto& g : sg.groups) {
    for (const auto& n : g.nodes) CHECK_FALSE(n.block.has_value());
  }
}
