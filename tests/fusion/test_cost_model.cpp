// Hardware profiles and the cost model, checked against the text's exercises with exact figures.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "fusion/cost/cost_model.h"
#include "fusion/cost/learned_model.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/hardware/calibrate.h"
#include "fusion/hardware/host.h"
#include "fusion/planner/planner.h"

using namespace opfuse::fusion;
using namespace opfuse::graph;

namespace {

HardwareProfile flat_profile(double peak_flops, double bandwidth, double launch = 0) {
  HardwareProfile p;
  p.name = "test";
  p.peak_flops_f32 = p.peak_flops_f16 = peak_flops;
  p.levels = {{"DRAM", 1e15, bandwidth}};  // one level: every byte at this bandwidth
  p.launch_overhead_s = launch;
  p.memory_latency_s = 100e-9;
  p.vector_registers = 32;
  return p;
}

std::vector<size_t> all_nodes(const IndexedGraph& ig) { return ig.topo(); }

}  // namespace

TEST_CASE("exercise 7.1: Conv -> BN -> ReLU -> MaxPool traffic, 256x112x112x32 NHWC fp16") {
  // Counting convention: activation traffic of the chain after the conv's input (the conv's
  // input and all weights are read the same way fused and unfused, so they are left out).
  // Unfused: conv writes T; BN reads and writes T; ReLU reads and writes T; MaxPool reads T
  // and writes T/4: 6.25 T. Fused: only the pooled T/4 is written.
  GraphBuilder b("ex71");
  auto x = b.input("x", {256, 112, 112, 32}, Layout::NHWC, DType::f16);
  Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto y = b.max_pool(b.relu(b.batch_norm(b.conv2d(x, b.param("w", {32, 32, 3, 3}), same))), 2, 2);
  b.output(y);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const double T = 256.0 * 112 * 112 * 32 * 2;  // conv output, bytes
  CHECK(T == 205520896.0);

  double unfused = 0;
  for (size_t n : ig.topo()) {
    const OpStats s = op_stats(ig, n);
    unfused += s.act_in_bytes + s.out_bytes;
  }
  const double conv_input = ig.bytes("x");
  unfused -= conv_input;
  CHECK(unfused == 6.25 * T);  // 1,284,505,600 bytes = 1.28 GB

  const RooflineCostModel model(flat_profile(1e15, 900e9));
  const GroupEstimate fused = model.estimate(ig, all_nodes(ig));
  const double params = fused.boundary_in_bytes - conv_input;  // weights and BN statistics
  const double fused_traffic = fused.boundary_bytes() - conv_input - params;
  CHECK(fused_traffic == 0.25 * T);  // 51,380,224 bytes
  CHECK(bandwidth_saving(fused_traffic, unfused) == doctest::Approx(0.96).epsilon(1e-12));
  // At 900 GB/s: 1.427 ms of activation traffic unfused, 0.057 ms fused.
  CHECK(unfused / 900e9 == doctest::Approx(1.42723e-3).epsilon(1e-5));
  CHECK(fused_traffic / 900e9 == doctest::Approx(5.70892e-5).epsilon(1e-5));
}

TEST_CASE("exercise 7.2: roofline of C = A x B, 1024x768 x 768x512, 312 TFLOPS fp16, 2 TB/s") {
  GraphBuilder b("ex72");
  auto a = b.input("a", {1024, 768}, Layout::none, DType::f16);
  auto w = b.input("b", {768, 512}, Layout::none, DType::f16);
  b.output(b.matmul(a, w));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const RooflineCostModel model(flat_profile(312e12, 2e12));
  const GroupEstimate e = model.estimate(ig, all_nodes(ig));
  CHECK(e.flops == 2.0 * 1024 * 768 * 512);
  CHECK(e.boundary_bytes() == 2.0 * (1024 * 768 + 768 * 512 + 1024 * 512));
  CHECK(e.intensity == doctest::Approx(236.3).epsilon(1e-3));  // FLOP/B
  CHECK(ridge_point(312e12, 2e12) == doctest::Approx(156.0));  // I_c
  CHECK(e.bound == Bound::compute);                            // I > I_c
  CHECK(e.attainable_flops == 312e12);                         // P = min(P_peak, I*B)
}

TEST_CASE("7.1.1: an n-op elementwise chain speeds up by S = n under the model") {
  for (int n : {1, 2, 4, 8, 16}) {
    CAPTURE(n);
    GraphBuilder b("chain");
    auto x = b.input("x", {1 << 24});
    for (int i = 0; i < n; ++i) x = b.relu(x);
    b.output(x);
    const Graph g = b.build();
    const IndexedGraph ig(g);
    // Bandwidth-bound (compute peak far above), no launch overhead: T = 2Nb/B per kernel.
    const RooflineCostModel model(flat_profile(1e18, 100e9));
    double unfused = 0;
    for (size_t k : ig.topo()) unfused += model.estimate(ig, {k}).t_total_s;
    const double fused = model.estimate(ig, all_nodes(ig)).t_total_s;
    CHECK(fused == doctest::Approx(2.0 * (1 << 24) * 4 / 100e9));
    CHECK(unfused / fused == doctest::Approx(double(n)));
  }
}

TEST_CASE("roofline, prefetch distance and bandwidth saving formulas") {
  CHECK(operational_intensity(100, 50) == 2);
  CHECK(attainable_performance(1e12, 2, 100e9) == 200e9);  // bandwidth-bound
  CHECK(attainable_performance(1e12, 20, 100e9) == 1e12);  // compute-bound
  CHECK(prefetch_distance(100e-9, 30e-9) == 4);            // ceil(100 / 30)
  CHECK(prefetch_distance(100e-9, 200e-9) == 1);
  CHECK(bandwidth_saving(2, 8) == 0.75);
}

TEST_CASE("fusing raises compute density, so the prefetch distance shrinks (7.3.4)") {
  GraphBuilder b("chain");
  auto x = b.input("x", {1 << 22});
  auto y = b.tanh(b.tanh(b.tanh(x)));
  b.output(y);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  const int alone = model.estimate(ig, {ig.topo()[0]}).prefetch_distance;
  const int fused = model.estimate(ig, ig.topo()).prefetch_distance;
  CHECK(fused < alone);
}

TEST_CASE("stencil recompute under compute_at: a 3x3 conv fed by an in-group producer") {
  GraphBuilder b("halo");
  auto x = b.input("x", {1, 16, 64, 64}, Layout::NCHW);
  Conv2dOptions same;
  same.pads = {1, 1, 1, 1};
  auto y = b.conv2d(b.relu(x), b.param("w", {16, 16, 3, 3}), same);
  b.output(y);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  const GroupEstimate e = model.estimate(ig, ig.topo());
  // relu is recomputed on each tile's 2-row halo: more FLOPs than the sum of the ops.
  const double plain = op_stats(ig, ig.topo()[0]).flops + op_stats(ig, ig.topo()[1]).flops;
  CHECK(e.flops > plain);
  CHECK(e.recompute_factor > 1.0);
  CHECK(e.recompute_factor < 1.1);
}

TEST_CASE("exercise 7.5: NUMA-aware cost, remote reads cost 150/100 of local ones") {
  GraphBuilder b("numa");
  auto x = b.input("x", {1 << 22});
  auto y = b.relu(x);
  auto z = b.tanh(y);
  b.output(z);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  HardwareProfile p = flat_profile(1e18, 100e9);
  p.numa_nodes = 2;
  p.numa_local_latency_s = 100e-9;
  p.numa_remote_latency_s = 150e-9;
  const size_t relu = ig.topo()[0], tanh = ig.topo()[1];
  std::vector<int> same(2, 0), split(2, 0);
  split[tanh] = 1;  // tanh runs on the other node: it reads y remotely
  const NumaCostModel local(p, same), remote(p, split);
  const double bytes = 4.0 * (1 << 22);
  CHECK(local.estimate(ig, {tanh}).t_memory_s == doctest::Approx(2 * bytes / 100e9));
  CHECK(remote.estimate(ig, {tanh}).t_memory_s == doctest::Approx((1.5 * bytes + bytes) / 100e9));
  // Fused on one node, nothing crosses: the NUMA penalty is one more reason to fuse.
  CHECK(remote.estimate(ig, {relu, tanh}).t_memory_s == doctest::Approx(2 * bytes / 100e9));
}

TEST_CASE("correction factors scale the prediction, each on the groups it applies to (7.4.1)") {
  GraphBuilder b("c");
  const auto x = b.input("x", {1 << 20});
  const auto w = b.param("w", {64, 64});
  b.output(b.relu(x));
  b.output(b.matmul(b.input("a", {256, 64}), w));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  HardwareProfile p = flat_profile(1e12, 100e9, 1e-6);
  const std::vector<size_t> mem{0}, comp{1};  // relu (memory-bound), matmul (compute-bound)
  const GroupEstimate m0 = RooflineCostModel(p).estimate(ig, mem);
  const GroupEstimate c0 = RooflineCostModel(p).estimate(ig, comp);
  REQUIRE(m0.bound == Bound::memory);
  REQUIRE(c0.bound == Bound::compute);
  p.alpha_cache = 0.2;
  p.alpha_conflict = 0.5;
  p.alpha_divergence = 0.05;  // a CPU profile: no warps diverge
  CHECK(RooflineCostModel(p).estimate(ig, mem).t_total_s == doctest::Approx(m0.t_total_s * 1.2));
  CHECK(RooflineCostModel(p).estimate(ig, comp).t_total_s == doctest::Approx(c0.t_total_s * 1.5));
  p.gpu = true;
  CHECK(RooflineCostModel(p).estimate(ig, mem).t_total_s == doctest::Approx(m0.t_total_s * 1.25));
}

TEST_CASE("anchor classes: each anchor's calibrated share of the peak scales its compute time") {
  GraphBuilder b("classes");
  const auto x = b.input("x", {1, 32, 28, 28}, Layout::NCHW);
  const Conv2dOptions same{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  Conv2dOptions dw = same;
  dw.groups = 32;
  b.output(b.conv2d(x, b.param("w3", {32, 32, 3, 3}), same));  // 0: 3x3
  b.output(b.conv2d(x, b.param("w1", {64, 32, 1, 1})));        // 1: 1x1
  b.output(b.conv2d(x, b.param("wd", {32, 1, 3, 3}), dw));     // 2: depthwise
  const auto a = b.input("a", {128, 64});
  b.output(b.linear(a, b.param("wl", {64, 256})));                      // 3
  b.output(b.linear(b.input("v", {1, 64}), b.param("wv", {64, 256})));  // 4: one row
  b.output(b.matmul(a, b.input("bt", {64, 128})));                      // 5: two activations
  b.output(b.relu(x));                                                  // 6
  // 7: a 1x1 conv of one pixel (a squeeze-and-excite FC) is a GEMV, not a pointwise conv.
  b.output(b.conv2d(b.input("se", {1, 32, 1, 1}, Layout::NCHW), b.param("we", {64, 32, 1, 1})));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const std::vector<std::string> want{
      "conv_spatial", "conv_pointwise", "conv_depthwise", "linear", "gemv", "matmul", "", "gemv"};
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(anchor_class(ig, g.topo_order()[i]) == want[i]);
  }
  // Compute-bound on a flat profile: a class at a quarter of the peak takes 4x as long; the
  // other classes are unchanged, and the group's FLOPs are listed by class.
  HardwareProfile p = flat_profile(1e12, 1e15);
  const size_t conv3 = g.topo_order()[0], lin = g.topo_order()[3];
  const GroupEstimate c0 = RooflineCostModel(p).estimate(ig, {conv3});
  const GroupEstimate l0 = RooflineCostModel(p).estimate(ig, {lin});
  REQUIRE(c0.bound == Bound::compute);
  CHECK(c0.flops_by_class.at("conv_spatial") == c0.flops);
  p.anchor_efficiency["conv_spatial"] = 0.25;
  const GroupEstimate c1 = RooflineCostModel(p).estimate(ig, {conv3});
  CHECK(c1.t_compute_s == doctest::Approx(4 * c0.t_compute_s));
  CHECK(c1.attainable_flops == doctest::Approx(0.25e12));
  CHECK(RooflineCostModel(p).estimate(ig, {lin}).t_compute_s == doctest::Approx(l0.t_compute_s));
  // Round trip, and a share outside (0, 1] is refused by name.
  const HardwareProfile back = profile_from_json(profile_to_json(p), "cal.json");
  CHECK(back.efficiency("conv_spatial") == 0.25);
  CHECK(back.efficiency("linear") == 1.0);
  std::string bad = profile_to_json(p);
  bad.replace(bad.find("0.25"), 4, "1.5");
  CHECK_THROWS_WITH_AS(profile_from_json(bad, "cal.json"),
                       doctest::Contains("anchor_efficiency.conv_spatial must be in (0, 1]"),
                       std::runtime_error);
}

TEST_CASE("an embedding lookup reads the rows it gathers, not its table") {
  GraphBuilder b("embed");
  const auto table = b.param("table", {30000, 256});
  const auto ids = b.input("ids", {1, 64}, Layout::none, DType::i64);
  b.output(b.gather(table, ids, 0));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const GroupEstimate e = RooflineCostModel(flat_profile(1e12, 1e11)).estimate(ig, all_nodes(ig));
  // 64 rows of 256 floats read (and written), the indices' 512 bytes: not the 30 MB table.
  CHECK(e.boundary_in_bytes == doctest::Approx(64 * 256 * 4 + 64 * 8));
  CHECK(e.boundary_out_bytes == doctest::Approx(64 * 256 * 4));
}

TEST_CASE("profiles: built-ins, JSON round trip, clear errors") {
  for (const auto& name : builtin_profile_names()) {
    CAPTURE(name);
    const HardwareProfile p = builtin_profile(name);
    const HardwareProfile back = profile_from_json(profile_to_json(p), name);
    CHECK(back.name == p.name);
    CHECK(back.peak_flops_f32 == p.peak_flops_f32);
    CHECK(back.levels.size() == p.levels.size());
    CHECK(back.main_memory().bandwidth_Bps == p.main_memory().bandwidth_Bps);
    CHECK(profile_to_json(back) == profile_to_json(p));
  }
  const HardwareProfile h = builtin_profile("h200");
  CHECK(h.gpu);
  CHECK(h.cores == 132);
  CHECK(h.main_memory().bandwidth_Bps == 4.8e12);
  CHECK(h.shared_memory_per_block_bytes == 227 * 1024);
  CHECK_THROWS_WITH_AS(builtin_profile("tpu"),
                       doctest::Contains("no built-in hardware profile 'tpu'"), std::runtime_error);
  CHECK_THROWS_WITH_AS(profile_from_json(R"({"format": "opfuse.profile", "levels": []})", "p.json"),
                       doctest::Contains("peak_flops_f32"), std::runtime_error);
}

TEST_CASE("calibrate (quick) measures a usable profile") {
  // Only structure and signs are asserted: timings on a shared machine are not a test.
  CalibrationOptions o;
  o.quick = true;
  const HardwareProfile p = calibrate(builtin_profile("epyc-avx512-2c"), o);
  CHECK(p.peak_flops_f32 > 0);
  REQUIRE(p.levels.size() == 4);
  for (size_t i = 0; i < p.levels.size(); ++i) {
    CHECK(p.levels[i].bandwidth_Bps > 0);
    if (i) CHECK(p.levels[i].size_bytes > p.levels[i - 1].size_bytes);
  }
  CHECK(p.memory_latency_s > 0);
  CHECK(profile_from_json(profile_to_json(p), "measured").peak_flops_f32 == p.peak_flops_f32);
}

TEST_CASE("the host profile: the CPU's ISA, measured once, cached, read back") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("opfuse_test_profiles_" +
                                                     std::to_string(::getpid()));
  fs::remove_all(dir);
  ::setenv("OPFUSE_PROFILE_CACHE", dir.c_str(), 1);
  const Isa isa = host_isa();
  CHECK((isa.name == "avx512" || isa.name == "avx2" || isa.name == "sse4"));
  CHECK(isa.vector_registers == (isa.name == "avx512" ? 32 : 16));
  CHECK(host_runs(isa));
  const std::string path = host_profile_cache_path(isa);
  CHECK(path.rfind(dir.string(), 0) == 0);
  CHECK(path.find(isa.name) != std::string::npos);
  CHECK(!fs::exists(path));
  if (isa.name != "sse4") {
    const HardwareProfile a = host_profile(isa, /*quick=*/true);
    CHECK(fs::exists(path));
    CHECK(a.vector_bytes == isa.vector_bytes);
    CHECK(a.vector_registers == isa.vector_registers);
    CHECK(a.cores == int(sysconf(_SC_NPROCESSORS_ONLN)));
    CHECK(a.peak_flops_f32 > 0);
    // Read back, not measured again: the same numbers to the bit.
    const HardwareProfile b = host_profile(isa, true);
    CHECK(b.peak_flops_f32 == a.peak_flops_f32);
    CHECK(b.main_memory().bandwidth_Bps == a.main_memory().bandwidth_Bps);
    // "host" by name is the same profile.
    CHECK(load_profile("host").peak_flops_f32 == a.peak_flops_f32);
    // A damaged cache entry is measured again and replaced.
    std::ofstream(path) << "{\"format\": \"opfuse.pro";
    const HardwareProfile c = host_profile(isa, true);
    CHECK(c.peak_flops_f32 > 0);
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    CHECK_NOTHROW(profile_from_json(text, path));
  }
  // Another ISA's profile has that ISA's registers (scaled from the host's measurement where
  // the CPU cannot run it, and named so).
  const Isa other = isa_named(isa.name == "avx512" ? "avx2" : "avx512");
  const HardwareProfile o = host_profile(other, true);
  CHECK(o.vector_registers == other.vector_registers);
  CHECK((host_runs(other) || o.name.find("scaled-to-avx512") != std::string::npos));
  CHECK_THROWS_WITH_AS(isa_named("mmx"), doctest::Contains("unknown ISA 'mmx'"),
                       std::runtime_error);
  ::unsetenv("OPFUSE_PROFILE_CACHE");
  fs::remove_all(dir);
}

TEST_CASE("the FMA peak is measured on the ISA asked for, and refused where the CPU lacks it") {
  const Isa avx2 = isa_named("avx2"), avx512 = isa_named("avx512");
  if (host_runs(avx2)) CHECK(measure_fma_peak_flops(1, 0.01, avx2) > 0);
  if (host_runs(avx512)) {
    CHECK(measure_fma_peak_flops(1, 0.01, avx512) > 0);
  } else {
    CHECK_THROWS_WITH_AS(measure_fma_peak_flops(1, 0.01, avx512),
                         doctest::Contains("no FMA kernel for avx512"), std::runtime_error);
  }
  CHECK_THROWS_AS(measure_fma_peak_flops(1, 0.01, isa_named("sse4")), std::runtime_error);
}

TEST_CASE("7.2.4 learned benefit model: trains, round-trips, and plugs into the planner") {
  // A benefit that depends on two features: the MLP must fit it far better than a constant.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  const size_t d = group_feature_names().size();
  for (int i = 0; i < 200; ++i) {
    std::vector<double> f(d);
    for (auto& v : f) v = u(rng);
    x.push_back(f);
    y.push_back(1 / (1 + std::exp(-(2 * f[0] - 1.5 * f[4] * f[4] + 0.5))));
  }
  TrainOptions t;
  t.epochs = 1500;
  const Mlp m = train_mlp(x, y, t);
  double err = 0, err_const = 0, mean = 0;
  for (double v : y) mean += v / double(y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    err += std::fabs(m.forward(x[i]) - y[i]);
    err_const += std::fabs(mean - y[i]);
  }
  CHECK(err < 0.3 * err_const);
  // Weights live in files: the JSON round trip predicts the same.
  const Mlp back = mlp_from_json(mlp_to_json(m), "mlp.json");
  CHECK(back.forward(x[7]) == doctest::Approx(m.forward(x[7])));
  CHECK_THROWS_WITH_AS(mlp_from_json("{\"format\": \"opfuse.mlp\", \"inputs\": 3}", "bad.json"),
                       doctest::Contains("bad.json"), std::invalid_argument);
  CHECK(benefit_ratio(benefit_target(3e-3, 1e-3)) == doctest::Approx(3));

  // Selectable as the planner's cost model; a multi-op group costs unfused / R.
  const std::string path = "/tmp/opfuse_test_mlp.json";
  std::ofstream(path) << mlp_to_json(m);
  const auto learned = make_cost_model("learned:" + path, builtin_profile("epyc-avx512-2c"));
  CHECK(learned->name() == "learned");
  GraphBuilder b("chain");
  b.output(b.tanh(b.relu(b.input("x", {1 << 16}))));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const RooflineCostModel roofline(builtin_profile("epyc-avx512-2c"));
  const double unfused =
      roofline.estimate(ig, {0}).t_total_s + roofline.estimate(ig, {1}).t_total_s;
  const double R = benefit_ratio(m.forward(group_features(ig, {0, 1}, roofline)));
  CHECK(learned->estimate(ig, {0, 1}).t_total_s == doctest::Approx(unfused / R));
  CHECK(learned->estimate(ig, {0}).t_total_s ==
        doctest::Approx(roofline.estimate(ig, {0}).t_total_s));
  CHECK_NOTHROW(plan_fusion(g, *learned));
  CHECK_THROWS_AS(make_cost_model("learned:/nonexistent.json", builtin_profile("h200")),
                  std::runtime_error);
}

TEST_CASE("a member reading an output the group stores reads it back from memory") {
  // relu's output is a graph output, so it is stored (a root of the schedule, computed whole
  // before its readers): the sigmoid reading it reads 4 MB back, as a separate kernel would.
  GraphBuilder b("stored");
  const auto x = b.input("x", {1, 1024, 1024});
  const auto r = b.relu(x);
  b.output(r);
  b.output(b.sigmoid(r));
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const GroupEstimate e = RooflineCostModel(flat_profile(1e12, 1e11)).estimate(ig, all_nodes(ig));
  const double tensor = 1024.0 * 1024 * 4;
  CHECK(e.boundary_in_bytes == doctest::Approx(2 * tensor));  // x, and r read back
  CHECK(e.boundary_out_bytes == doctest::Approx(2 * tensor));
  CHECK(e.intermediate_bytes == 0);
}
