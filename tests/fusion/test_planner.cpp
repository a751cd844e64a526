// The planner on the zoo (what an expert would do), switches, latency bounds, legality.
#include <doctest/doctest.h>

#include "fusion/graph/builder.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/random_graph.h"
#include "fusion/planner/planner.h"

using namespace opfuse::fusion;
using namespace opfuse::graph;

namespace {

Graph load(const std::string& model, const char* size = "cpu") {
  return load_graph_json(std::string(OPFUSE_MODELS_DIR) + "/" + size + "/" + model + ".json");
}

// Groups as lists of node names, in plan order.
std::vector<std::vector<std::string>> groups(const FusionPlan& p) {
  std::vector<std::vector<std::string>> out;
  for (const auto& g : p.groups) out.push_back(g.nodes);
  return out;
}

FusionPlan plan(const Graph& g, const PlannerOptions& o = {},
                const char* profile = "epyc-avx512-2c") {
  const RooflineCostModel model(builtin_profile(profile));
  return plan_fusion(g, model, o);
}

}  // namespace

TEST_CASE("zoo plans are what an expert would do") {
  for (const char* profile : {"epyc-avx512-2c", "h200"}) {
    CAPTURE(profile);
    const char* size = std::string(profile) == "h200" ? "gpu" : "cpu";
    SUBCASE("cbr_pool: one group") {
      const FusionPlan p = plan(load("cbr_pool", size), {}, profile);
      CHECK(groups(p) == std::vector<std::vector<std::string>>{
                             {"conv2d_0", "batch_norm_0", "relu_0", "max_pool_0"}});
      CHECK(p.groups[0].kind == GroupKind::vertical);
      CHECK(p.groups[0].rule == "cba");
    }
    SUBCASE("mixed: Conv-BN-ReLU vertical, the two pools horizontal") {
      const FusionPlan p = plan(load("mixed", size), {}, profile);
      CHECK(groups(p) == std::vector<std::vector<std::string>>{
                             {"conv2d_0", "batch_norm_0", "relu_0"}, {"max_pool_0", "avg_pool_0"}});
      CHECK(p.groups[0].kind == GroupKind::vertical);
      CHECK(p.groups[1].kind == GroupKind::horizontal);
    }
    SUBCASE("attention: QKV horizontal, then score-softmax-AV") {
      const FusionPlan p = plan(load("attention", size), {}, profile);
      CHECK(groups(p) == std::vector<std::vector<std::string>>{
                             {"linear_0", "linear_1", "linear_2"},
                             {"transpose_0", "matmul_0", "mul_0", "softmax_0", "matmul_1"}});
      CHECK(p.groups[0].kind == GroupKind::horizontal);
      CHECK(p.groups[1].kind == GroupKind::vertical);
    }
    SUBCASE("mlp: first linear with its bias and GELU, second linear alone") {
      const FusionPlan p = plan(load("mlp", size), {}, profile);
      CHECK(groups(p) == std::vector<std::vector<std::string>>{{"linear_0", "bias_add_0", "gelu_0"},
                                                               {"linear_1"}});
    }
    SUBCASE("elementwise chains, layer norm and softmax: one group each") {
      for (const char* m :
           {"ew_chain_2", "ew_chain_4", "ew_chain_8", "ew_chain_16", "layernorm", "softmax"}) {
        CAPTURE(m);
        const Graph g = load(m, size);
        const FusionPlan p = plan(g, {}, profile);
        REQUIRE(p.groups.size() == 1);
        CHECK(p.groups[0].nodes.size() == g.nodes().size());
      }
    }
  }
}

TEST_CASE("every group of a zoo plan explains itself, and fewer kernels cost less") {
  for (const auto& name : {"cbr_pool", "mixed", "attention", "mlp", "perception", "layernorm"}) {
    CAPTURE(name);
    const Graph g = load(name);
    const FusionPlan p = plan(g);
    CHECK(p.fused_time_s < p.unfused_time_s);
    CHECK(p.fused_bytes < p.unfused_bytes);
    CHECK(p.bandwidth_saving > 0);
    CHECK(p.kernels_fused() < int(g.nodes().size()));
    for (const auto& grp : p.groups) {
      CHECK(!grp.reasons.empty());
      CHECK(grp.request.tile_fraction > 0);
      CHECK(grp.request.tile_fraction <= 1);
    }
    const std::string json = plan_to_json(p);
    CHECK(json.find("\"reasons\"") != std::string::npos);
    CHECK(plan_to_dot(p, g).find("subgraph cluster_0") != std::string::npos);
  }
}

TEST_CASE("switches: fusion off globally, or one rule off") {
  const Graph g = load("cbr_pool");
  PlannerOptions off;
  off.enable_fusion = false;
  const FusionPlan p = plan(g, off);
  CHECK(p.groups.size() == g.nodes().size());
  CHECK(p.fused_time_s == doctest::Approx(p.unfused_time_s));
  CHECK(p.groups[0].reasons[0] == "fusion disabled");

  PlannerOptions no_cba;
  no_cba.disabled_rules = {"cba", "anchor_epilogue"};
  no_cba.local_search = false;
  const FusionPlan q = plan(g, no_cba);
  CHECK(q.group_of("conv2d_0")->nodes.size() == 1);
  bool logged = false;
  for (const auto& l : q.log) logged = logged || l == "rule cba: disabled by option";
  CHECK(logged);
}

TEST_CASE("a user rule from a file takes effect") {
  GraphBuilder b("custom");
  auto x = b.input("x", {64, 64});
  b.output(b.softmax(b.transpose(x, {1, 0})));
  const Graph g = b.build();
  PlannerOptions o;
  o.rules = parse_rules("transpose_softmax: Transpose -> Softmax @ 5");
  o.local_search = false;
  const FusionPlan p = plan(g, o);
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].rule == "transpose_softmax");
}

TEST_CASE("latency bound on the critical path (7.1.4)") {
  const Graph g = load("perception");
  PlannerOptions loose, tight;
  loose.latency_bound_s = 1.0;
  tight.latency_bound_s = 1e-9;
  const FusionPlan a = plan(g, loose), b = plan(g, tight);
  CHECK(a.latency_bound_met);
  CHECK(!b.latency_bound_met);
  CHECK(a.critical_path_s > 0);
  CHECK(a.critical_path_s <= a.fused_time_s);
  bool critical = false;
  for (const auto& grp : a.groups) critical = critical || grp.on_critical_path;
  CHECK(critical);
  bool logged = false;
  for (const auto& l : b.log) logged = logged || l.find("NOT met") != std::string::npos;
  CHECK(logged);
}

TEST_CASE("legality: stateful nodes are never fused, convexity, window inputs, resources") {
  // relu -> (stateful) tanh -> sigmoid: the stateful node stays alone.
  Graph g;
  g.name = "stateful";
  g.add_tensor(Tensor{"x", {1024}, DType::f32, Layout::none, TensorKind::input, {}, {}});
  g.add_node(Node{"a", "relu", {"x"}, {"a"}, {}});
  g.add_node(Node{"b", "tanh", {"a"}, {"b"}, {{"stateful", int64_t{1}}}});
  g.add_node(Node{"c", "sigmoid", {"b"}, {"c"}, {}});
  g.mark_output("c");
  g.validate();
  const FusionPlan p = plan(g);
  CHECK(p.group_of("b")->nodes == std::vector<std::string>{"b"});

  const IndexedGraph ig(g);
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  const Legality legal(ig, model, kDefaultMaxGroupOps);
  // {a, c} without b: a -> b -> c leaves and re-enters the group.
  const FusionDecision d = legal.is_convex({0, 2});
  CHECK(!d);
  CHECK(d.reason.find("not convex") != std::string::npos);
  CHECK(legal.is_convex({0, 1, 2}));
  CHECK(!legal.has_no_side_effects({0, 1}));
  CHECK(!legal.fits_resources({0, 1, 2}, [] {
    GroupEstimate e;
    e.vector_registers = 1000;  // the over-fusion guard (pitfall 1)
    return e;
  }()));
  const Legality tiny(ig, model, 2);
  CHECK(!tiny.fits_resources({0, 1, 2}, GroupEstimate{}));

  // A pool may not be computed at the tile of a producer with another consumer.
  const Graph mixed = load("mixed");
  const IndexedGraph im(mixed);
  const Legality lm(im, model, kDefaultMaxGroupOps);
  std::vector<size_t> relu_and_max;
  for (size_t i = 0; i < mixed.nodes().size(); ++i) {
    if (mixed.nodes()[i].name == "relu_0" || mixed.nodes()[i].name == "max_pool_0")
      relu_and_max.push_back(i);
  }
  CHECK(!lm.windows_read_private_inputs(relu_and_max));
}

TEST_CASE("a user's plan overrides the planner's groups, and illegal ones are refused") {
  const Graph g = load("cbr_pool");
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  // The planner's own plan JSON is a valid input and gives back the same groups.
  const FusionPlan mine = plan_fusion(g, model);
  const FusionPlan same =
      plan_from_user_groups(g, model, user_groups_from_plan_json(plan_to_json(mine), "p.json"));
  CHECK(groups(same) == groups(mine));
  // Pool kept apart, a smaller tile for the CBR group.
  const auto edited = user_groups_from_plan_json(R"({"groups": [
      {"nodes": ["conv2d_0", "batch_norm_0", "relu_0"], "schedule": {"tile_fraction": 0.25}},
      {"nodes": ["max_pool_0"]}]})",
                                                 "edited.json");
  const FusionPlan p = plan_from_user_groups(g, model, edited);
  CHECK(groups(p) == std::vector<std::vector<std::string>>{{"conv2d_0", "batch_norm_0", "relu_0"},
                                                           {"max_pool_0"}});
  CHECK(p.groups[0].request.tile_fraction == 0.25);
  CHECK(p.groups[0].rule == "user");
  // A non-convex group: conv and relu without the batch norm between them.
  CHECK_THROWS_WITH_AS(plan_from_user_groups(g, model,
                                             user_groups_from_plan_json(R"({"groups": [
      {"nodes": ["conv2d_0", "relu_0"]}, {"nodes": ["batch_norm_0"]}, {"nodes": ["max_pool_0"]}]})",
                                                                        "bad.json")),
                       doctest::Contains("not legal"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(plan_from_user_groups(g, model,
                                             user_groups_from_plan_json(R"({"groups": [
      {"nodes": ["conv2d_0", "batch_norm_0", "relu_0"]}]})",
                                                                        "short.json")),
                       doctest::Contains("'max_pool_0' is in no group"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(user_groups_from_plan_json("{}", "empty.json"),
                       doctest::Contains("\"groups\""), std::invalid_argument);
}

TEST_CASE("the planner's time limit keeps a legal plan and says so") {
  RandomGraphOptions o;
  o.nodes = 2000;
  const Graph g = random_graph(7, o);
  PlannerOptions limited;
  limited.time_limit_s = 1e-9;  // out of time at once: the unfused plan, explained
  const FusionPlan p = plan(g, limited);
  CHECK(p.fused_time_s <= p.unfused_time_s * (1 + 1e-12));
  size_t nodes = 0;
  for (const auto& grp : p.groups) nodes += grp.nodes.size();
  CHECK(nodes == g.nodes().size());
  bool logged = false;
  for (const auto& l : p.log)
    logged = logged || l.find("time limit: planning stopped") != std::string::npos;
  CHECK(logged);
}

TEST_CASE("a group whose working set exceeds the profile's memory is refused") {
  // Tiles keep activations small; weights are read whole by every tile.
  GraphBuilder b("big");
  auto x = b.input("x", {64, 1024});
  b.output(b.relu(b.linear(x, b.param("w", {1024, 1024}))));  // 4 MiB of weights
  const Graph g = b.build();
  HardwareProfile tiny = builtin_profile("epyc-avx512-2c");
  tiny.levels.back().size_bytes = 1 << 20;  // 1 MiB of memory
  const FusionPlan p = plan_fusion(g, RooflineCostModel(tiny));
  CHECK(p.groups.size() == 2);
  bool logged = false;
  for (const auto& l : p.log)
    logged = logged || l.find("exceeds the profile's memory") != std::string::npos;
  CHECK(logged);
  CHECK(plan_fusion(g, RooflineCostModel(builtin_profile("epyc-avx512-2c"))).groups.size() == 1);
}

TEST_CASE("legality: elementwise ops fuse after an anchor, never before it") {
  // perception's normalise (sub, div) before its first conv stays out of the conv's group,
  // and a user plan that puts it there is refused with the reason.
  const Graph g = load("perception");
  const FusionPlan p = plan(g);
  const FusedGroup* conv = p.group_of("conv2d_0");
  REQUIRE(conv != nullptr);
  for (const auto& n : conv->nodes) {
    CHECK(n != "sub_0");
    CHECK(n != "div_0");
  }
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  std::vector<UserGroup> groups;
  for (const auto& grp : p.groups) {
    if (&grp == conv) continue;
    bool normalise = false;
    for (const auto& n : grp.nodes) normalise = normalise || n == "div_0";
    if (!normalise) groups.push_back({grp.nodes, 0, 0});
  }
  std::vector<std::string> merged = {"sub_0", "div_0"};
  merged.insert(merged.end(), conv->nodes.begin(), conv->nodes.end());
  groups.push_back({merged, 0, 0});
  CHECK_THROWS_WITH_AS(plan_from_user_groups(g, model, groups),
                       doctest::Contains("fuses after an anchor, not before"),
                       std::invalid_argument);
}
