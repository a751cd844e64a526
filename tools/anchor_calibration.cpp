#include "tools/anchor_calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "fusion/cost/cost_model.h"
#include "fusion/frontend/winograd.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/op_schema.h"
#include "fusion/planner/planner.h"
#include "schedules/jit.h"

namespace opfuse::tools {
namespace {

using graph::GraphBuilder;
using T = GraphBuilder::T;

constexpr const char* kWarmUp = "warm_up";

// A layer's input as a network hands it over: just written by the group before, in the caches
// it fits (a graph input was last touched a whole run of the other layers ago). ReLU stays a
// group of its own before an anchor (an elementwise op never fuses into an anchor's operand).
T feed(GraphBuilder& g, const T& input) { return g.relu(input); }

// A feeder group (feed()): timed, not fitted. Its members are ReLUs of graph inputs read by
// anchors only.
bool is_feeder(const graph::IndexedGraph& ig, const std::map<std::string, size_t>& index,
               const std::vector<std::string>& nodes) {
  const graph::Graph& g = ig.graph();
  return std::all_of(nodes.begin(), nodes.end(), [&](const std::string& name) {
    const graph::Node& n = ig.node(index.at(name));
    if (n.op != "relu" || g.tensor(n.inputs[0]).kind != graph::TensorKind::input) return false;
    const auto& readers = ig.consumers(n.outputs[0]);
    return std::all_of(readers.begin(), readers.end(), [&](size_t c) {
      return graph::has_trait(ig.node(c).op, graph::OpTrait::anchor);
    });
  });
}

// A conv layer as the channels-last pass leaves a network's: NHWC, bias, activation.
void conv_layer(GraphBuilder& g, const std::string& name, int64_t hw, int64_t cin, int64_t cout,
                int64_t k, int64_t stride, int64_t groups = 1) {
  const T x = feed(g, g.input(name, {1, hw, hw, cin}, graph::Layout::NHWC));
  graph::Conv2dOptions o;
  o.strides = {stride, stride};
  o.pads = {k / 2, k / 2, k / 2, k / 2};
  o.groups = groups;
  const double a = 1.0 / std::sqrt(double(cin / groups * k * k));
  const T w = g.param(name + "_w", {cout, cin / groups, k, k}, {-a, a});
  g.output(g.relu(g.conv2d(x, w, o, g.param(name + "_b", {cout}, {-0.1, 0.1}))));
}

// A transformer linear of `rows` tokens, with its bias (and GELU: the FFN's first).
void linear_layer(GraphBuilder& g, const std::string& name, int64_t rows, int64_t din, int64_t dout,
                  bool gelu) {
  const T x = feed(g, g.input(name, {1, rows, din}));
  const double a = 1.0 / std::sqrt(double(din));
  T y = g.linear(x, g.param(name + "_w", {din, dout}, {-a, a}),
                 g.param(name + "_b", {dout}, {-0.1, 0.1}));
  g.output(gelu ? g.gelu(y) : y);
}

// The label of the layer each node belongs to: the graph input it descends from.
std::map<std::string, std::string> layer_of_nodes(const graph::Graph& g) {
  std::map<std::string, std::string> of_tensor, of_node;
  for (const auto& in : g.inputs()) of_tensor[in] = in;
  for (const auto& n : g.nodes()) {
    for (const auto& in : n.inputs) {
      if (auto it = of_tensor.find(in); it != of_tensor.end()) {
        of_node[n.name] = it->second;
        break;
      }
    }
    for (const auto& out : n.outputs) {
      if (of_node.count(n.name)) of_tensor[out] = of_node[n.name];
    }
  }
  return of_node;
}

// The middle value (the mean of the two middle ones for an even count).
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// First in each graph, a group that is not fitted: the run's first production also wakes the
// thread pool (measured: a 1x1 conv first in the graph took 1.6x its time later in it).
void warm_up(GraphBuilder& g) {
  g.output(g.relu(g.input(std::string(kWarmUp), {1, 8, 8, 64}, graph::Layout::NHWC)));
}

}  // namespace

graph::Graph calibration_graph() {
  GraphBuilder g("anchor_calibration");
  warm_up(g);
  // conv_pointwise: ResNet-50's bottleneck 1x1s at each stage, MobileNetV2's expansion.
  conv_layer(g, "pw56_256_64", 56, 256, 64, 1, 1);
  conv_layer(g, "pw28_128_512", 28, 128, 512, 1, 1);
  conv_layer(g, "pw14_1024_256", 14, 1024, 256, 1, 1);
  conv_layer(g, "pw7_512_2048", 7, 512, 2048, 1, 1);
  conv_layer(g, "pw28_32_192", 28, 32, 192, 1, 1);
  // conv_spatial: the 7x7 stem, a strided 3x3, the last stage's 3x3 (left direct at 7x7).
  conv_layer(g, "stem224_3_64", 224, 3, 64, 7, 2);
  conv_layer(g, "s2_56_128", 56, 128, 128, 3, 2);
  conv_layer(g, "sp7_512", 7, 512, 512, 3, 1);
  // conv_winograd: 3x3 stride 1 convs (rewritten by the Winograd pass).
  conv_layer(g, "wino56_64", 56, 64, 64, 3, 1);
  conv_layer(g, "wino28_128", 28, 128, 128, 3, 1);
  conv_layer(g, "wino14_256", 14, 256, 256, 3, 1);
  // conv_depthwise: MobileNetV2's 3x3 and EfficientNet-B0's 5x5.
  conv_layer(g, "dw56_144", 56, 144, 144, 3, 1, 144);
  conv_layer(g, "dw14_384", 14, 384, 384, 3, 1, 384);
  conv_layer(g, "dw14_480_k5", 14, 480, 480, 5, 1, 480);
  // linear: BERT-base's at 128 tokens.
  linear_layer(g, "ffn1_128_768_3072", 128, 768, 3072, true);
  linear_layer(g, "ffn2_128_3072_768", 128, 3072, 768, false);
  linear_layer(g, "proj_128_768_768", 128, 768, 768, false);
  // gemv: the classifiers of ResNet-50 and MobileNetV2.
  linear_layer(g, "fc_2048_1000", 1, 2048, 1000, false);
  linear_layer(g, "fc_1280_1000", 1, 1280, 1000, false);
  linear_layer(g, "fc_512_1000", 1, 512, 1000, false);
  // matmul: attention's two products, 12 heads of 64 at 128 tokens.
  {
    const T q = feed(g, g.input("qk_12_128_64", {1, 12, 128, 64}));
    const T kt = feed(g, g.input("qk_12_128_64_kt", {1, 12, 64, 128}));
    g.output(g.matmul(q, kt));
    const T p = feed(g, g.input("pv_12_128_128", {1, 12, 128, 128}));
    const T v = feed(g, g.input("pv_12_128_128_v", {1, 12, 128, 64}));
    g.output(g.matmul(p, v));
    // ViT-Tiny's: 3 heads at 197 tokens.
    const T q3 = feed(g, g.input("qk_3_197_64", {1, 3, 197, 64}));
    const T k3 = feed(g, g.input("qk_3_197_64_kt", {1, 3, 64, 197}));
    g.output(g.matmul(q3, k3));
  }
  graph::Graph out = g.build();
  // Built in the layout the channels-last pass gives a network, with the library's ops:
  // of a model's rewrites (fusion/frontend/load_model.h) only Winograd's is left.
  fusion::to_winograd(out);
  return out;
}

graph::Graph join_calibration_graph() {
  GraphBuilder g("join_calibration");
  warm_up(g);
  // a_cache: residual joins (add, ReLU) at ResNet's first three stages, groups that only
  // stream. Pools, LayerNorm and softmax are left out: their time goes to strided loads,
  // reductions and exp, not to the traffic a_cache corrects. A graph of their own: their
  // inputs are then one run of the joins old (17 MB), in the last-level cache where it holds
  // that much, as a network's activations between groups are. Timed after the layers, a run
  // of the layers' weights (100+ MB) old, the same joins read DRAM: 56x56x256 299 us against
  // 72 us on their own (2 Zen 4 cores, 32 MB L3), and a_cache came out 4 (now 0.15-0.31),
  // over-predicting EfficientNet-B0's memory-bound groups (median measured / predicted 0.59,
  // down to 0.04). Where the last-level cache is smaller, they read DRAM again.
  for (const auto& [hw, c] : {std::pair<int64_t, int64_t>{56, 256}, {28, 512}, {14, 1024}}) {
    const std::string name = "residual" + std::to_string(hw) + "_" + std::to_string(c);
    const T a = g.input(name, {1, hw, hw, c}, graph::Layout::NHWC);
    const T b = g.input(name + "_b", {1, hw, hw, c}, graph::Layout::NHWC);
    g.output(g.relu(g.add(a, b)));
  }
  return g.build();
}

namespace {

// Plans `g` with `profile` and appends a sample per group (the warm-up group and the feeders
// left out) to `out`. With `seconds` > 0 the plan is JIT-compiled with each group's
// productions timed, and only the timed groups are sampled; otherwise nothing is measured.
void sample_graph(const graph::Graph& g, const fusion::HardwareProfile& profile, double seconds,
                  std::vector<AnchorSample>& out) {
  const fusion::RooflineCostModel model(profile);
  const fusion::FusionPlan plan = fusion::plan_fusion(g, model);
  std::vector<std::vector<double>> runs(plan.groups.size());
  if (seconds > 0) {
    schedules::CompiledPlan jit(g, plan, graph::random_inputs(g, 1), {}, /*timed=*/true);
    jit.run();  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0;
         r < 10 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds;
         ++r) {
      jit.run();
      for (const auto& t : schedules::times_by_group(g, plan, jit.root_seconds())) {
        if (t.group >= 0) runs[size_t(t.group)].push_back(t.measured_s);
      }
    }
  }
  const graph::IndexedGraph ig(g);
  std::map<std::string, size_t> index;  // node name -> index
  for (size_t i = 0; i < ig.size(); ++i) index[ig.node(i).name] = i;
  const auto layer = layer_of_nodes(g);
  for (const auto& grp : plan.groups) {
    if (seconds > 0 && runs[size_t(grp.id)].empty()) continue;
    if (layer.count(grp.nodes.front()) && layer.at(grp.nodes.front()) == kWarmUp) continue;
    if (is_feeder(ig, index, grp.nodes)) continue;
    const fusion::GroupEstimate& e = grp.estimate;
    AnchorSample s;
    s.layer = layer.count(grp.nodes.front()) ? layer.at(grp.nodes.front()) : grp.nodes.front();
    for (const auto& [cls, f] : e.flops_by_class) {
      if (cls.empty() || f <= 0) {
        s.other_flops += f * e.recompute_factor;
      } else if (s.anchor_class.empty() || s.anchor_class == cls) {
        s.anchor_class = cls;
        s.anchor_flops += f * e.recompute_factor;
      } else {
        s.anchor_class = "mixed";  // two classes in one group: says nothing about either
      }
    }
    s.t_memory_s = e.t_memory_s;
    s.t_overhead_s = e.t_overhead_s;
    s.predicted_s = e.t_total_s;
    if (seconds > 0) s.measured_s = median_of(runs[size_t(grp.id)]);
    out.push_back(s);
  }
}

}  // namespace

std::vector<AnchorSample> time_calibration_graph(const fusion::HardwareProfile& profile,
                                                 double seconds) {
  std::vector<AnchorSample> out;
  sample_graph(calibration_graph(), profile, seconds, out);
  sample_graph(join_calibration_graph(), profile, seconds, out);
  return out;
}

std::vector<AnchorSample> predict_calibration_graph(const fusion::HardwareProfile& profile) {
  return time_calibration_graph(profile, 0);
}

double layer_share(const AnchorSample& s, double peak) {
  if (s.anchor_class.empty() || s.anchor_class == "mixed" || s.anchor_flops <= 0) return 0;
  // Measured within the memory model's time: the model predicts it whatever the share.
  if (s.measured_s - s.t_overhead_s <= s.t_memory_s) return 0;
  // 7.4.1 T = max(T_compute, T_memory) + T_overhead, T_compute = F / (P eta) + F_other / P:
  // the compute time the measurement leaves for the anchor.
  const double t = s.measured_s - s.t_overhead_s - s.other_flops / peak;
  // Above 1 when the layer outran the measured peak (a peak measured low): the fit caps it.
  return t > 0 ? std::max(s.anchor_flops / (peak * t), kMinShare) : 1.0;
}

fusion::HardwareProfile fit_anchor_efficiency(fusion::HardwareProfile profile,
                                              const std::vector<AnchorSample>& samples) {
  const double peak = profile.peak_flops_f32;
  std::map<std::string, std::vector<double>> log_eta;
  std::vector<double> excess;
  for (const auto& s : samples) {
    if (s.anchor_class.empty()) {
      // 7.4.1 a_cache: T_measured = T_predicted (1 + a_cache) for the memory-bound groups.
      const double plain = std::max(s.other_flops / peak, s.t_memory_s) + s.t_overhead_s;
      if (plain > 0) excess.push_back(s.measured_s / plain - 1);
    } else if (const double eta = layer_share(s, peak); eta > 0) {
      log_eta[s.anchor_class].push_back(std::log(std::min(eta, 1.0)));
    }
  }
  // The median over a class's layers: one layer that ran slow in this process (measured: a
  // 3072 -> 768 linear at 2.3 to 7.9 ms from one process to the next) does not move it.
  for (auto& [cls, v] : log_eta) profile.anchor_efficiency[cls] = std::exp(median_of(v));
  if (!excess.empty()) profile.alpha_cache = std::clamp(median_of(excess), 0.0, 4.0);
  profile.alpha_conflict = 0;  // the shares take the compute-bound groups' correction
  return profile;
}

}  // namespace opfuse::tools
