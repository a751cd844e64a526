// 7.2.4 learned benefit model: features of a group -> a small MLP predicting the benefit of
// running it as one fused kernel,
//
//   y_hat = sigma(W2 ReLU(W1 f + b1) + b2),     y = T_unfused / (T_unfused + T_fused)
//
// so y = 0.5 is "fusion neither helps nor hurts" and the benefit ratio is R = y / (1 - y).
// Features (group_feature_names): sizes (log FLOPs, boundary and intermediate bytes),
// compute intensity, op-type mix by fusion kind, memory pattern (window ops, row statistics,
// transposes, stencil recompute), and the analytic model's own predicted benefit. They are
// standardised with the training set's mean and deviation, stored with the weights.
//
// The MLP is plain C++ (one hidden layer, Adam, full batch): Debian's ML libraries (mlpack,
// ...) are far larger than this 16x16 network needs. Training data and weights live in
// files (`opfuse explore learn` writes both); nothing is trained at build time.
#pragma once

#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"

namespace opfuse::fusion {

const std::vector<std::string>& group_feature_names();
std::vector<double> group_features(const graph::IndexedGraph& ig, const std::vector<size_t>& nodes,
                                   const RooflineCostModel& analytic);

// y = T_unfused / (T_unfused + T_fused) and back to R = T_unfused / T_fused.
double benefit_target(double t_unfused_s, double t_fused_s);
double benefit_ratio(double y);

struct Mlp {
  int inputs = 0, hidden = 0;
  std::vector<double> mean, stdev;  // feature standardisation
  std::vector<double> w1, b1;       // hidden x inputs, hidden
  std::vector<double> w2;           // hidden
  double b2 = 0;
  double forward(const std::vector<double>& features) const;
};

struct TrainOptions {
  int hidden = 16;
  int epochs = 4000;
  double learning_rate = 0.01;
  double l2 = 1e-3;
  uint64_t seed = 1;
};
// Minimises the mean squared error of y_hat against y (each in (0, 1)).
Mlp train_mlp(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
              const TrainOptions& o = {});

std::string mlp_to_json(const Mlp& m);
Mlp mlp_from_json(const std::string& text, const std::string& source);

// The roofline model, with a multi-op group's time replaced by its members' unfused time over
// the learned benefit ratio. Single ops keep the roofline estimate.
class LearnedCostModel : public RooflineCostModel {
 public:
  LearnedCostModel(HardwareProfile profile, Mlp mlp)
      : RooflineCostModel(std::move(profile)), mlp_(std::move(mlp)) {}
  std::string name() const override { return "learned"; }
  GroupEstimate estimate(const graph::IndexedGraph& ig,
                         const std::vector<size_t>& nodes) const override;

 private:
  Mlp mlp_;
};

}  // namespace opfuse::fusion
