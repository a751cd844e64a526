// Each anchor class's attained share of the FMA peak on this machine
// (HardwareProfile::anchor_efficiency) and the memory-bound groups' correction a_cache (7.4.1),
// measured on layers at the shapes of the networks users bring, and kept in the host profile's
// cache so that every plan for the host uses them.
//
// Why: the plain roofline puts every anchor at the FMA peak, and opfuse's kernels do not get
// there alike (a depthwise conv makes two loads a multiply-add, a GEMV streams its weights, a
// Winograd conv's transforms are adds). Without the shares a plan's predicted group times are
// off by up to 10x on a real network, and the planner weighs fusions blind.
//
// How: one graph of independent layers, each as a network has it (NHWC convolutions with
// their bias and activation, transformer linears, attention's two matmuls, a classifier's
// GEMV), 3x3 convs rewritten as a model's are (Winograd), each layer's input written by a
// small group of its own first (as a network's previous group would), and a second graph of
// residual joins that only stream, each planned for the host, JIT-compiled with each group's
// productions timed. Per anchor class, eta = F / (P (T_measured - T_overhead - F_other / P)) of
// each of its groups, their median in log space (groups whose measured time the memory model
// already covers say nothing about eta and are left out); a_cache is the median excess of the
// residual joins over their prediction, timed in a graph of their own (their inputs one run of
// the joins old, in the last-level cache where it holds them, as a network's activations are).
// `bench/networks/calibrate.py` fits the same two from a breakdown of whole networks instead, and
// `opfuse explore calibrate` a_cache and a_conflict from explored plans of one graph.
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"
#include "fusion/hardware/profile.h"

namespace opfuse::tools {

// One timed group of the calibration graph.
struct AnchorSample {
  std::string layer;         // the layer (its first graph input) the group computes
  std::string anchor_class;  // "" for a group without an anchor
  double anchor_flops = 0;   // the class's FLOPs with stencil recompute
  double other_flops = 0;    // everything else the group computes
  double t_memory_s = 0, t_overhead_s = 0;
  double predicted_s = 0;  // by the profile the graph was planned with
  double measured_s = 0;
};

// The calibration layers, batch 1: ResNet-50's, MobileNetV2's and EfficientNet-B0's convs
// (NHWC, the layout the channels-last pass gives them), BERT-base's linears and attention at
// 128 tokens, and the classifier GEMVs.
graph::Graph calibration_graph();
// ResNet's residual joins (memory-bound, for a_cache), in a graph of their own.
graph::Graph join_calibration_graph();

// Plans the two calibration graphs with `profile`, compiles them with Halide's JIT for the
// environment's target (HL_JIT_TARGET), and times each group over `seconds` of runs (medians).
std::vector<AnchorSample> time_calibration_graph(const fusion::HardwareProfile& profile,
                                                 double seconds = 1.0);
// The same two graphs planned with `profile`, every group's prediction and nothing measured
// (measured_s 0): how a fitted profile predicts the layers another profile's run measured.
std::vector<AnchorSample> predict_calibration_graph(const fusion::HardwareProfile& profile);

// The share of the peak one sample shows (as above), at least kMinShare, above 1 where the
// layer outran the profile's peak (the fit takes 1); 0 where it shows none (no anchor, two
// classes, or measured within the memory model's time).
inline constexpr double kMinShare = 0.02;
double layer_share(const AnchorSample& s, double peak);

// `profile` with anchor_efficiency and alpha_cache fitted to `samples` (as above), and
// alpha_conflict 0.
fusion::HardwareProfile fit_anchor_efficiency(fusion::HardwareProfile profile,
                                              const std::vector<AnchorSample>& samples);

}  // namespace opfuse::tools
