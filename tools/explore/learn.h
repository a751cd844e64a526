// `opfuse explore learn`: training data for the 7.2.4 learned benefit model, from the groups
// that explorations formed, each measured on its own (fused as one kernel vs its ops one
// kernel each), then the MLP trained on a split and scored on the held-out part beside the
// analytic model.
#pragma once

#include <string>
#include <vector>

#include "fusion/cost/learned_model.h"
#include "tools/explore/explore.h"

namespace opfuse::explore {

struct GroupSample {
  std::string graph;
  std::vector<std::string> nodes;
  std::vector<double> features;           // fusion::group_features, on the group's own subgraph
  double t_unfused_s = 0, t_fused_s = 0;  // measured p50
  bool held_out = false;
};

// Every distinct multi-op group of the measured candidates in `dirs` (each an exploration
// folder whose meta.json names its graph file), measured through the JIT.
std::vector<GroupSample> collect_group_samples(const std::vector<std::string>& dirs,
                                               const Options& o);

void write_samples_csv(const std::vector<GroupSample>& s, const std::string& path);
std::vector<GroupSample> read_samples_csv(const std::string& path);

struct LearnReport {
  int train = 0, held_out = 0;
  double learned_mdape = 0, learned_spearman = 0;    // held-out benefit ratio R
  double analytic_mdape = 0, analytic_spearman = 0;  // the same samples, roofline R
};

// Trains on the samples not held out; scores both models on the held-out ones.
LearnReport train_and_score(const std::vector<GroupSample>& samples, const fusion::TrainOptions& t,
                            fusion::Mlp& trained);

}  // namespace opfuse::explore
