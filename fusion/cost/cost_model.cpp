#include "fusion/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "fusion/cost/learned_model.h"
#include "fusion/graph/op_schema.h"

namespace opfuse::fusion {

using graph::IndexedGraph;
using graph::Node;

namespace {

// Registers a GPU thread needs for indexing and loop state before any value of the group.
constexpr int kGpuBaseRegisters = 16;
// Registers per value kept live in a GPU thread (f32 value plus address arithmetic).
constexpr int kGpuRegistersPerValue = 2;

double elements(const IndexedGraph& ig, const std::string& t) {
  return double(graph::num_elements(ig.graph().tensor(t).shape));
}

bool is_window_op(const std::string& op) { return graph::has_trait(op, graph::OpTrait::window); }

}  // namespace

const char* to_string(Bound b) { return b == Bound::compute ? "compute" : "memory"; }

double operational_intensity(double flops, double bytes) { return bytes > 0 ? flops / bytes : 0; }
double attainable_performance(double peak, double intensity, double bw) {
  return std::min(peak, intensity * bw);
}
double ridge_point(double peak, double bw) { return peak / bw; }
double bandwidth_saving(double boundary, double total) {
  return total > 0 ? 1.0 - boundary / total : 0;
}
int prefetch_distance(double latency_s, double per_iteration_s) {
  // Capped at half the lines of a 48 KiB L1 (768): further ahead, prefetched lines would be
  // evicted before their use.
  constexpr double kMaxPrefetchDistance = 384;
  if (!(per_iteration_s > 0)) return 1;
  return int(std::clamp(std::ceil(latency_s / per_iteration_s), 1.0, kMaxPrefetchDistance));
}

bool is_transcendental(const std::string& op) {
  return graph::has_trait(op, graph::OpTrait::transcendental);
}

OpStats op_stats(const IndexedGraph& ig, size_t i) {
  const Node& n = ig.node(i);
  const graph::Graph& g = ig.graph();
  OpStats s;
  std::set<std::string> seen;
  for (const auto& in : n.inputs) {
    if (!seen.insert(in).second) continue;
    (g.tensor(in).kind == graph::TensorKind::param ? s.param_bytes : s.act_in_bytes) +=
        ig.bytes(in);
  }
  const std::string& out = n.outputs[0];
  s.out_bytes = ig.bytes(out);
  const double out_elems = elements(ig, out);
  const std::string& op = n.op;
  if (op == "relu")
    s.flops = out_elems;
  else if (op == "leaky_relu" || op == "clamp" || op == "relu6")
    s.flops = 2 * out_elems;
  else if (op == "hard_sigmoid")
    s.flops = 3 * out_elems;  // multiply-add, clamp
  else if (op == "hard_swish")
    s.flops = 4 * out_elems;  // multiply-add, clamp, multiply
  else if (op == "sigmoid")
    s.flops = (kTranscendentalFlops + 2) * out_elems;
  else if (op == "tanh" || op == "exp")
    s.flops = kTranscendentalFlops * out_elems;
  else if (op == "gelu")
    s.flops = (kTranscendentalFlops + 4) * out_elems;
  else if (op == "erf" || op == "pow")
    s.flops = kTranscendentalFlops * out_elems;
  else if (op == "silu")
    s.flops = (kTranscendentalFlops + 2) * out_elems;
  else if (op == "sqrt" || op == "reciprocal")
    s.flops = kDividerFlops * out_elems;
  else if (op == "neg" || op == "where")
    s.flops = out_elems;
  else if (graph::has_trait(op, graph::OpTrait::axes_reduction))
    s.flops = elements(ig, n.inputs[0]);
  else if (op == "add" || op == "sub" || op == "mul" || op == "div" || op == "bias_add")
    s.flops = out_elems;
  else if (op == "batch_norm")
    s.flops = 3 * out_elems;  // sub, mul, add (factor precomputed)
  else if (op == "layer_norm")
    s.flops = 8 * out_elems;  // mean, var (2 passes), normalise, affine
  else if (op == "softmax")
    s.flops = (kTranscendentalFlops + 4) * out_elems;  // max, sub, exp, sum, div
  else if (op == "global_avg_pool")
    s.flops = elements(ig, n.inputs[0]);
  else if (op == "conv2d") {
    const auto& w = g.tensor(n.inputs[1]).shape;  // [Cout, Cin/groups, KH, KW]
    s.flops = 2.0 * out_elems * double(w[1] * w[2] * w[3]);
  } else if (op == "conv2d_winograd") {
    // F(2x2, 3x3): per 2x2 output tile, 16 products per channel pair (the GEMMs), 32 additions
    // per input channel (B^T d B) and 24 per output channel (A^T m A).
    const auto& x = g.tensor(n.inputs[0]).shape;  // [N, H, W, Cin]
    const graph::WinogradWeights u = graph::conv2d_winograd_weights(g.tensor(n.inputs[1]).shape);
    const double tiles = double(x[0] * ((x[1] + 1) / 2) * ((x[2] + 1) / 2));
    s.flops =
        tiles * (2.0 * 16 * double(u.cin * u.cout) + 32.0 * double(u.cin) + 24.0 * double(u.cout));
  } else if (op == "matmul") {
    s.flops = 2.0 * out_elems * double(g.tensor(n.inputs[0]).shape.back());
  } else if (op == "linear") {
    s.flops = 2.0 * out_elems * double(g.tensor(n.inputs[1]).shape[0]) +
              (n.inputs.size() == 3 ? out_elems : 0);
  } else if (op == "max_pool" || op == "avg_pool") {
    const auto k = graph::attr_ints(n, "kernel", {1, 1});
    s.flops = out_elems * double(k[0] * k[1]);
  } else {
    s.flops = 0;  // transpose, reshape, concat: data movement only
  }
  return s;
}

std::string anchor_class(const IndexedGraph& ig, size_t i) {
  const Node& n = ig.node(i);
  if (!graph::has_trait(n.op, graph::OpTrait::anchor)) return "";
  const graph::Graph& g = ig.graph();
  if (n.op == "conv2d") {
    const graph::Tensor& x = g.tensor(n.inputs[0]);
    const graph::Window2d w = graph::conv2d_window(n, x, g.tensor(n.inputs[1]));
    const int64_t channels = x.shape[w.layout == graph::Layout::NHWC ? 3 : 1];
    if (w.groups > 1 && w.groups == channels) return "conv_depthwise";
    if (w.kernel[0] == 1 && w.kernel[1] == 1) {
      // Of one pixel, N H W = 1 as a GEMV's one row (squeeze-and-excite's FCs on the pooled
      // [1, 1, 1, C] at batch 1; at batch 2 a GEMM of 2 rows, left pointwise): each
      // weight serves one multiply-add, a block's accumulators one row, the reduction a chain
      // of dependent FMAs. As a pointwise conv at 76% of the peak, EfficientNet-B0's were
      // predicted 2.3-3.8x under their measured 11-24 us (2 Zen 4 cores, AVX-512).
      const double cout = double(g.tensor(n.inputs[1]).shape[0]);
      return elements(ig, n.outputs[0]) <= cout ? "gemv" : "conv_pointwise";
    }
    return "conv_spatial";
  }
  if (n.op == "conv2d_winograd") return "conv_winograd";
  const bool weight = g.tensor(n.inputs[1]).kind == graph::TensorKind::param;
  if (n.op == "matmul" && !weight) return "matmul";
  // A linear's rows: every output element but the last axis's.
  const graph::Shape& out = g.tensor(n.outputs[0]).shape;
  const double rows = elements(ig, n.outputs[0]) / double(out.empty() ? 1 : out.back());
  return rows <= 1 ? "gemv" : "linear";
}

int CostModel::register_limit() const {
  return profile_.gpu ? profile_.registers_per_thread : profile_.vector_registers;
}

double CostModel::onchip_limit_bytes() const {
  if (profile_.gpu) return profile_.shared_memory_per_block_bytes;
  // Half of one core's L2: the other half keeps the streaming inputs and outputs.
  const MemoryLevel* l2 = profile_.level("L2");
  const double l2_bytes = l2 ? l2->size_bytes : profile_.levels.front().size_bytes;
  return l2_bytes / std::max(1, profile_.cores) / 2;
}

// 7.4.1 T = max(T_compute, T_memory) + T_overhead, corrected:
//   T_actual = T * (1 + a_cache + a_conflict + a_divergence).
// Each factor charges the groups its effect applies to: a_cache the memory-bound ones (their
// traffic misses the levels the model assumed), a_conflict the compute-bound ones (port and
// register conflicts keep them below the FMA peak), a_divergence every group on a GPU. The
// factors are fitted per profile from measurements: `opfuse explore calibrate` (a_cache and
// a_conflict from explored plans of one graph), `opfuse calibrate-anchors` (a_cache beside the
// anchor shares, into the host profile) and bench/networks/calibrate.py (from networks).
double corrected_time(const HardwareProfile& p, const GroupEstimate& e) {
  const double correction = 1 + (e.bound == Bound::memory ? p.alpha_cache : 0) +
                            (e.bound == Bound::compute ? p.alpha_conflict : 0) +
                            (p.gpu ? p.alpha_divergence : 0);
  return (std::max(e.t_compute_s, e.t_memory_s) + e.t_overhead_s) * correction;
}

GroupEstimate RooflineCostModel::estimate(const IndexedGraph& ig,
                                          const std::vector<size_t>& nodes) const {
  const graph::Graph& g = ig.graph();
  const std::unordered_set<size_t> in_group(nodes.begin(), nodes.end());
  GroupEstimate e;
  double flops = 0, params = 0;
  std::set<std::string> inputs_seen;
  double t_compute = 0;  // at each anchor class's attained share of the peak
  const bool all_f16 = std::all_of(nodes.begin(), nodes.end(), [&](size_t i) {
    return g.tensor(ig.node(i).outputs[0]).dtype == graph::DType::f16;
  });
  const double peak = all_f16 ? profile_.peak_flops_f16 : profile_.peak_flops_f32;
  // An output the group stores (read outside it) is a root of the schedule, computed whole
  // before the members that read it in the group run, so they read it back from memory like
  // a group input: EfficientNet-B0's squeeze-excite average pool reads the stored SiLU output
  // of its group after the tiles, a read that fusing does not remove.
  auto escapes = [&](const std::string& t) {
    bool out = ig.is_graph_output(t);
    for (size_t c : ig.consumers(t)) out = out || !in_group.count(c);
    return out;
  };
  for (size_t i : nodes) {
    const Node& n = ig.node(i);
    const OpStats s = op_stats(ig, i);
    flops += s.flops;
    const std::string cls = anchor_class(ig, i);
    e.flops_by_class[cls] += s.flops;
    t_compute += s.flops / (peak * profile_.efficiency(cls));
    // A layout move (gather, slice, transpose ...) reads at most what it writes: an embedding
    // lookup reads its rows, not the table.
    const bool moves = graph::has_trait(n.op, graph::OpTrait::moves_layout);
    for (const auto& in : n.inputs) {
      const int p = ig.producer(in);
      if ((p >= 0 && in_group.count(size_t(p)) && !escapes(in)) || !inputs_seen.insert(in).second) {
        continue;
      }
      // read once, however many members use it (7.1.2)
      const double bytes = moves ? std::min(ig.bytes(in), ig.bytes(n.outputs[0])) : ig.bytes(in);
      e.boundary_in_bytes += bytes;
      if (g.tensor(in).kind == graph::TensorKind::param) params += bytes;
    }
    const std::string& out = n.outputs[0];
    (escapes(out) ? e.boundary_out_bytes : e.intermediate_bytes) += ig.bytes(out);
  }

  // Tiling: a tile's intermediates must fit the on-chip budget beside the params.
  const double budget = onchip_limit_bytes();
  e.tile_fraction =
      e.intermediate_bytes > 0
          ? std::clamp((budget - std::min(params, budget / 2)) / e.intermediate_bytes, 1e-6, 1.0)
          : 1.0;
  e.working_set_bytes =
      params + (e.intermediate_bytes + e.boundary_bytes() - params) * e.tile_fraction;

  // Stencil recompute: a window op (conv, pool) computed over row tiles of T output rows
  // needs (T-1)*s + k input rows per tile instead of T*s, so in-group producers feeding it
  // are recomputed on the halo: factor ((T-1)*s + k) / (T*s) along H.
  double extra = 0;
  for (size_t i : nodes) {
    const Node& n = ig.node(i);
    if (!is_window_op(n.op)) continue;
    const int p = ig.producer(n.inputs[0]);
    if (p < 0 || !in_group.count(size_t(p))) continue;
    const graph::Tensor& x = g.tensor(n.inputs[0]);
    const graph::Window2d w = n.op == "conv2d" ? graph::conv2d_window(n, x, g.tensor(n.inputs[1]))
                                               : graph::pool_window(n, x);
    const double rows = double(g.tensor(n.outputs[0]).shape[w.h_axis()]);
    const double T = std::max(1.0, std::floor(rows * e.tile_fraction));
    const double s = double(w.strides[0]), k = double(w.dilations[0] * (w.kernel[0] - 1) + 1);
    const double factor = ((T - 1) * s + k) / (T * s);
    if (factor <= 1) continue;
    // The in-group producers upstream of the window's input, each counted once.
    std::vector<size_t> stack{size_t(p)};
    std::unordered_set<size_t> upstream;
    while (!stack.empty()) {
      const size_t u = stack.back();
      stack.pop_back();
      if (!in_group.count(u) || !upstream.insert(u).second) continue;
      for (size_t q : ig.preds(u)) stack.push_back(q);
    }
    for (size_t u : upstream) extra += op_stats(ig, u).flops * (factor - 1);
  }
  e.flops = flops + extra;
  e.recompute_factor = flops > 0 ? e.flops / flops : 1;

  // 7.3.1 roofline against the level that holds the group's traffic, the peak scaled by the
  // share the group's anchors attain on this machine (1 where not calibrated).
  const double bw = profile_.level_holding(e.boundary_bytes()).bandwidth_Bps;
  const double attained = t_compute > 0 ? flops / t_compute : peak;
  e.intensity = operational_intensity(e.flops, e.boundary_bytes());
  e.attainable_flops = attainable_performance(attained, e.intensity, bw);
  e.bound = e.intensity < ridge_point(attained, bw) ? Bound::memory : Bound::compute;

  // 7.4.1 T = max(T_compute, T_memory) + T_overhead, then the fitted correction.
  e.t_compute_s = e.flops / attained;
  e.t_memory_s = e.boundary_bytes() / bw;
  e.t_overhead_s = profile_.launch_overhead_s;
  e.t_total_s = corrected_time(profile_, e);

  // 7.3.4 prefetch distance for the innermost vector loop: one iteration consumes one cache
  // line (64 B) of each streamed input; its compute time is the group's FLOPs per line on one
  // core's share of the peak.
  const double lines = std::max(1.0, e.boundary_in_bytes / 64);
  const double per_iteration = (e.flops / lines) / (peak / std::max(1, profile_.cores));
  e.prefetch_distance = prefetch_distance(profile_.memory_latency_s, per_iteration);

  // Resources (R of 7.1.2): values that must stay live at once, and tiles held on chip.
  int anchors_live = 0, shared_values = 0;
  for (size_t i : nodes) {
    if (graph::has_trait(ig.node(i).op, graph::OpTrait::anchor)) {
      // Members run one after another within a tile: one anchor's block is live at a time,
      // sized as the schedules size it (on a GPU: a thread's one accumulator per value).
      anchors_live = profile_.gpu ? 1 : anchor_accumulator_registers(profile_.vector_registers);
    }
    int uses = 0;
    for (size_t c : ig.consumers(ig.node(i).outputs[0])) uses += in_group.count(c) ? 1 : 0;
    if (uses > 1) ++shared_values;
  }
  const int values = anchors_live + shared_values + 2;  // + the streamed input and result
  e.vector_registers =
      profile_.gpu ? kGpuBaseRegisters + kGpuRegistersPerValue * (values + int(nodes.size()))
                   : values;
  e.onchip_bytes = e.intermediate_bytes * e.tile_fraction;
  return e;
}

GroupEstimate NumaCostModel::estimate(const IndexedGraph& ig,
                                      const std::vector<size_t>& nodes) const {
  GroupEstimate e = RooflineCostModel::estimate(ig, nodes);
  if (profile_.numa_nodes < 2 || profile_.numa_local_latency_s <= 0 || nodes.empty()) return e;
  const int home = placement_.at(nodes.front());
  const std::unordered_set<size_t> in_group(nodes.begin(), nodes.end());
  double remote = 0;
  std::set<std::string> seen;
  for (size_t i : nodes) {
    for (const auto& in : ig.node(i).inputs) {
      const int p = ig.producer(in);
      if (p < 0 || in_group.count(size_t(p)) || !seen.insert(in).second) continue;
      if (placement_.at(size_t(p)) != home) remote += ig.bytes(in);
    }
  }
  // Remote bytes cost L_remote / L_local as much as local ones (exercise 7.5).
  const double ratio = profile_.numa_remote_latency_s / profile_.numa_local_latency_s;
  const double local = e.boundary_bytes() - remote;
  const double bw = profile_.level_holding(e.boundary_bytes()).bandwidth_Bps;
  e.t_memory_s = (local + remote * ratio) / bw;
  e.bound = e.t_memory_s > e.t_compute_s ? Bound::memory : Bound::compute;
  e.t_total_s = corrected_time(profile_, e);
  return e;
}

std::unique_ptr<CostModel> make_cost_model(const std::string& name, const HardwareProfile& p) {
  if (name == "roofline") return std::make_unique<RooflineCostModel>(p);
  const std::string learned = "learned:";
  if (name.rfind(learned, 0) == 0) {
    const std::string path = name.substr(learned.size());
    std::ifstream in(path);
    if (!in) throw std::runtime_error("learned cost model: cannot read '" + path + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    return std::make_unique<LearnedCostModel>(p, mlp_from_json(text, path));
  }
  throw std::runtime_error("unknown cost model '" + name +
                           "' (available: roofline, learned:WEIGHTS.json)");
}

}  // namespace opfuse::fusion
