// The cost model: what a group of operators costs when it runs as one fused kernel.
//
//   per op        FLOPs, activation bytes in, param bytes, bytes out         (op_stats)
//   per group     boundary bytes (read from / written to global memory once), intermediate
//                 bytes kept on chip, working set per tile, stencil recompute under compute_at
//   roofline      I = FLOPs / bytes, P = min(P_peak, I * B), ridge I_c = P_peak / B   (7.3.1)
//   time          T = max(T_compute, T_memory) + T_overhead                           (7.4.1)
//                 T_actual = T * (1 + a_cache + a_conflict + a_divergence)            (7.4.1)
//   prefetch      d = ceil(L_mem / T_compute) iterations ahead                        (7.3.4)
//   resources     vector registers / on-chip bytes of the group (over-fusion guard, pitfall 1)
//
// The planner receives a CostModel (an interface): the analytic RooflineCostModel, its NUMA
// variant (exercise 7.5), and later calibrated or learned models.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusion/graph/indexed_graph.h"
#include "fusion/hardware/profile.h"

namespace opfuse::fusion {

struct OpStats {
  double flops = 0;
  double act_in_bytes = 0;  // activation inputs, each distinct tensor once
  double param_bytes = 0;   // weights and other params
  double out_bytes = 0;
  double total_bytes() const { return act_in_bytes + param_bytes + out_bytes; }
};

// Cost of one vectorised exp/tanh/erf/sqrt evaluation, in FLOPs: a degree ~7 polynomial plus
// range reduction (Halide's and libm's f32 versions are 10-20 instructions).
inline constexpr double kTranscendentalFlops = 10;
// The ops op_stats charges kTranscendentalFlops per element for (exp, tanh, sigmoid, erf ...).
bool is_transcendental(const std::string& op);
// Cost of a vector square root or reciprocal, in FLOPs: the divider unit's throughput is a
// fraction of the FMA pipes' (several cycles per vector against two FMAs per cycle).
inline constexpr double kDividerFlops = 4;

OpStats op_stats(const graph::IndexedGraph& ig, size_t node);

// The shape class of an anchor, whose attained share of the peak the host profile may know
// (HardwareProfile::anchor_efficiency): "conv_depthwise" (one channel a group),
// "conv_pointwise" (1x1, a GEMM over pixels), "conv_spatial" (any other window: 3x3, 7x7,
// strided, a patch embedding), "conv_winograd" (a 3x3 conv as F(2x2, 3x3): its FLOPs are the
// transformed ones), "gemv" (a linear of one row, a 1x1 conv of one pixel), "linear" (a weight
// known at compile time: linear, or matmul by a param), "matmul" (two activations: attention). ""
// for an op that is no anchor.
std::string anchor_class(const graph::IndexedGraph& ig, size_t node);

enum class Bound { memory, compute };
const char* to_string(Bound b);

struct GroupEstimate {
  double flops = 0;               // including stencil recompute
  // The members' FLOPs by anchor_class ("" for the rest), without stencil recompute: what
  // a calibration fits the classes' efficiencies on.
  std::map<std::string, double> flops_by_class;
  double recompute_factor = 1;    // flops / flops without halo recompute
  double boundary_in_bytes = 0;   // inputs, params and stored outputs read back, once each
  double boundary_out_bytes = 0;  // outputs consumed outside the group or graph outputs
  double intermediate_bytes = 0;  // produced and consumed inside: stays on chip
  double working_set_bytes = 0;   // per tile
  double tile_fraction = 1;       // share of the outermost loop one tile covers
  double intensity = 0;           // FLOP per boundary byte
  double attainable_flops = 0;    // roofline P
  Bound bound = Bound::memory;
  double t_compute_s = 0, t_memory_s = 0, t_overhead_s = 0, t_total_s = 0;
  int prefetch_distance = 1;  // in vector-loop iterations (one cache line each)
  int vector_registers = 0;   // CPU live vector registers, or GPU registers per thread
  double onchip_bytes = 0;    // tiles held at once (R in 7.1.2)
  double boundary_bytes() const { return boundary_in_bytes + boundary_out_bytes; }
};

// --- the text's formulas, one function each ---------------------------------------------
// 7.3.1 roofline: I = FLOPs / bytes
double operational_intensity(double flops, double bytes);
// 7.3.1 roofline: P = min(P_peak, I * B)
double attainable_performance(double peak_flops, double intensity, double bandwidth_Bps);
// 7.3.1 ridge point: I_c = P_peak / B
double ridge_point(double peak_flops, double bandwidth_Bps);
// 7.3.2 bandwidth saving: eta = 1 - M_boundary / M_total
double bandwidth_saving(double boundary_bytes, double total_bytes);
// 7.3.4 prefetch distance: d = ceil(L_mem / T_compute)
int prefetch_distance(double memory_latency_s, double compute_per_iteration_s);
// 7.4.1 T_actual = (max(T_compute, T_memory) + T_overhead) * (1 + a_cache + a_conflict +
// a_divergence), each factor charged to the groups its effect applies to (see the .cpp).
double corrected_time(const HardwareProfile& p, const GroupEstimate& e);

class CostModel {
 public:
  explicit CostModel(HardwareProfile profile) : profile_(std::move(profile)) {}
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  // `nodes`: indices into ig.graph().nodes(), run as one kernel.
  virtual GroupEstimate estimate(const graph::IndexedGraph& ig,
                                 const std::vector<size_t>& nodes) const = 0;
  const HardwareProfile& profile() const { return profile_; }
  // Resource limit of a group (R_max of 7.1.2): registers and on-chip bytes.
  int register_limit() const;
  double onchip_limit_bytes() const;

 protected:
  HardwareProfile profile_;
};

class RooflineCostModel : public CostModel {
 public:
  using CostModel::CostModel;
  std::string name() const override { return "roofline"; }
  GroupEstimate estimate(const graph::IndexedGraph& ig,
                         const std::vector<size_t>& nodes) const override;
};

// Exercise 7.5: groups placed on NUMA nodes; bytes a group reads from a tensor produced on
// another node cost L_remote / L_local times as much (100 ns vs 150 ns: 1.5x).
class NumaCostModel : public RooflineCostModel {
 public:
  // placement[node index] = NUMA node the node's group runs on.
  NumaCostModel(HardwareProfile profile, std::vector<int> placement)
      : RooflineCostModel(std::move(profile)), placement_(std::move(placement)) {}
  std::string name() const override { return "roofline-numa"; }
  GroupEstimate estimate(const graph::IndexedGraph& ig,
                         const std::vector<size_t>& nodes) const override;

 private:
  std::vector<int> placement_;
};

std::unique_ptr<CostModel> make_cost_model(const std::string& name, const HardwareProfile& p);

}  // namespace opfuse::fusion
