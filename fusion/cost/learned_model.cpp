#include "fusion/graph/op_schema.h"
#include "fusion/cost/learned_model.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace opfuse::fusion {

using graph::FusionKind;

const std::vector<std::string>& group_feature_names() {
  static const std::vector<std::string> names = {"log10_flops",
                                                 "log10_boundary_bytes",
                                                 "log10_intermediate_bytes",
                                                 "log10_intensity",
                                                 "ops",
                                                 "frac_elementwise",
                                                 "frac_broadcast",
                                                 "frac_injective",
                                                 "frac_reduction",
                                                 "frac_anchor",
                                                 "has_window_op",
                                                 "has_row_statistics",
                                                 "has_transpose",
                                                 "recompute_factor",
                                                 "memory_bound",
                                                 "log_analytic_benefit"};
  return names;
}

namespace {

// The analytic model's view of a group: its estimate and its ops' time run one kernel each.
struct Analytic {
  GroupEstimate fused;
  double unfused_s = 0;
};

Analytic analytic_view(const graph::IndexedGraph& ig, const std::vector<size_t>& nodes,
                       const RooflineCostModel& analytic) {
  Analytic a{analytic.RooflineCostModel::estimate(ig, nodes), 0};
  for (size_t i : nodes) a.unfused_s += analytic.RooflineCostModel::estimate(ig, {i}).t_total_s;
  return a;
}

std::vector<double> features_of(const graph::IndexedGraph& ig, const std::vector<size_t>& nodes,
                                const Analytic& a) {
  const GroupEstimate& e = a.fused;
  int kinds[6] = {0, 0, 0, 0, 0, 0};
  bool window = false, rowstat = false, transpose = false;
  for (size_t i : nodes) {
    const FusionKind k = ig.kind(i);
    const int slot = k == FusionKind::elementwise               ? 0
                     : k == FusionKind::broadcast               ? 1
                     : k == FusionKind::injective               ? 2
                     : k == FusionKind::reduction               ? 3
                     : k == FusionKind::out_elementwise_fusable ? 4
                                                                : 5;
    ++kinds[slot];
    const std::string& op = ig.node(i).op;
    window = window || graph::has_trait(op, graph::OpTrait::window);
    rowstat = rowstat || graph::has_trait(op, graph::OpTrait::row_statistic);
    transpose = transpose || op == "transpose";
  }
  const double n = double(nodes.size());
  return {std::log10(e.flops + 1),
          std::log10(e.boundary_bytes() + 1),
          std::log10(e.intermediate_bytes + 1),
          std::log10(e.intensity + 1e-3),
          n,
          kinds[0] / n,
          kinds[1] / n,
          kinds[2] / n,
          kinds[3] / n,
          kinds[4] / n,
          window ? 1.0 : 0.0,
          rowstat ? 1.0 : 0.0,
          transpose ? 1.0 : 0.0,
          e.recompute_factor,
          e.bound == Bound::memory ? 1.0 : 0.0,
          std::log(std::max(1e-12, a.unfused_s) / std::max(1e-12, e.t_total_s))};
}

}  // namespace

std::vector<double> group_features(const graph::IndexedGraph& ig, const std::vector<size_t>& nodes,
                                   const RooflineCostModel& analytic) {
  return features_of(ig, nodes, analytic_view(ig, nodes, analytic));
}

double benefit_target(double t_unfused_s, double t_fused_s) {
  return t_unfused_s / (t_unfused_s + t_fused_s);
}

double benefit_ratio(double y) {
  y = std::clamp(y, 1e-6, 1 - 1e-6);
  return y / (1 - y);
}

namespace {
double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }
}  // namespace

double Mlp::forward(const std::vector<double>& f) const {
  if (int(f.size()) != inputs) {
    throw std::invalid_argument("learned model: " + std::to_string(f.size()) +
                                " features given, the model takes " + std::to_string(inputs));
  }
  double z = b2;
  for (int h = 0; h < hidden; ++h) {
    double a = b1[size_t(h)];
    for (int i = 0; i < inputs; ++i) {
      a += w1[size_t(h * inputs + i)] * (f[size_t(i)] - mean[size_t(i)]) / stdev[size_t(i)];
    }
    z += w2[size_t(h)] * std::max(0.0, a);  // ReLU
  }
  return sigmoid(z);
}

Mlp train_mlp(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
              const TrainOptions& o) {
  if (x.empty() || x.size() != y.size()) {
    throw std::invalid_argument("train_mlp: " + std::to_string(x.size()) + " samples and " +
                                std::to_string(y.size()) + " targets");
  }
  Mlp m;
  m.inputs = int(x[0].size());
  m.hidden = o.hidden;
  const size_t n = x.size(), d = size_t(m.inputs), H = size_t(m.hidden);
  m.mean.assign(d, 0);
  m.stdev.assign(d, 0);
  for (const auto& r : x) {
    for (size_t i = 0; i < d; ++i) m.mean[i] += r[i] / double(n);
  }
  for (const auto& r : x) {
    for (size_t i = 0; i < d; ++i)
      m.stdev[i] += (r[i] - m.mean[i]) * (r[i] - m.mean[i]) / double(n);
  }
  for (auto& s : m.stdev) s = s > 1e-12 ? std::sqrt(s) : 1;  // constant features: left as is
  std::vector<std::vector<double>> xs(n, std::vector<double>(d));
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < d; ++i) xs[k][i] = (x[k][i] - m.mean[i]) / m.stdev[i];
  }
  // He initialisation, seeded: the same data trains the same weights.
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> n1(0, std::sqrt(2.0 / double(d))),
      n2(0, std::sqrt(1.0 / double(H)));
  m.w1.resize(H * d);
  for (auto& w : m.w1) w = n1(rng);
  m.b1.assign(H, 0);
  m.w2.resize(H);
  for (auto& w : m.w2) w = n2(rng);
  m.b2 = 0;

  // Adam over all parameters, flattened: w1, b1, w2, b2.
  const size_t P = H * d + H + H + 1;
  std::vector<double> mom(P, 0), vel(P, 0), grad(P);
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<double> a(H);
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::fill(grad.begin(), grad.end(), 0);
    for (size_t k = 0; k < n; ++k) {
      double z = m.b2;
      for (size_t h = 0; h < H; ++h) {
        double s = m.b1[h];
        for (size_t i = 0; i < d; ++i) s += m.w1[h * d + i] * xs[k][i];
        a[h] = s;
        z += m.w2[h] * std::max(0.0, s);
      }
      const double yh = sigmoid(z);
      const double dz = 2 * (yh - y[k]) * yh * (1 - yh) / double(n);  // d MSE / dz
      for (size_t h = 0; h < H; ++h) {
        grad[H * d + H + h] += dz * std::max(0.0, a[h]);
        if (a[h] <= 0) continue;
        const double da = dz * m.w2[h];
        for (size_t i = 0; i < d; ++i) grad[h * d + i] += da * xs[k][i];
        grad[H * d + h] += da;
      }
      grad[P - 1] += dz;
    }
    for (size_t i = 0; i < H * d; ++i) grad[i] += o.l2 * m.w1[i];
    for (size_t h = 0; h < H; ++h) grad[H * d + H + h] += o.l2 * m.w2[h];
    const double c1 = 1 - std::pow(beta1, epoch), c2 = 1 - std::pow(beta2, epoch);
    for (size_t p = 0; p < P; ++p) {
      mom[p] = beta1 * mom[p] + (1 - beta1) * grad[p];
      vel[p] = beta2 * vel[p] + (1 - beta2) * grad[p] * grad[p];
      const double step = o.learning_rate * (mom[p] / c1) / (std::sqrt(vel[p] / c2) + eps);
      double& w = p < H * d           ? m.w1[p]
                  : p < H * d + H     ? m.b1[p - H * d]
                  : p < H * d + 2 * H ? m.w2[p - H * d - H]
                                      : m.b2;
      w -= step;
    }
  }
  return m;
}

std::string mlp_to_json(const Mlp& m) {
  nlohmann::ordered_json j = {{"format", "opfuse.mlp"},
                              {"version", 1},
                              {"features", group_feature_names()},
                              {"inputs", m.inputs},
                              {"hidden", m.hidden},
                              {"mean", m.mean},
                              {"stdev", m.stdev},
                              {"w1", m.w1},
                              {"b1", m.b1},
                              {"w2", m.w2},
                              {"b2", m.b2}};
  return j.dump(2) + "\n";
}

Mlp mlp_from_json(const std::string& text, const std::string& source) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.value("format", "") != "opfuse.mlp") {
      throw std::invalid_argument("not an opfuse.mlp file");
    }
    Mlp m;
    m.inputs = j.at("inputs").get<int>();
    m.hidden = j.at("hidden").get<int>();
    m.mean = j.at("mean").get<std::vector<double>>();
    m.stdev = j.at("stdev").get<std::vector<double>>();
    m.w1 = j.at("w1").get<std::vector<double>>();
    m.b1 = j.at("b1").get<std::vector<double>>();
    m.w2 = j.at("w2").get<std::vector<double>>();
    m.b2 = j.at("b2").get<double>();
    const size_t d = size_t(m.inputs), H = size_t(m.hidden);
    if (m.inputs != int(group_feature_names().size()) || m.mean.size() != d ||
        m.stdev.size() != d || m.w1.size() != H * d || m.b1.size() != H || m.w2.size() != H) {
      throw std::invalid_argument("weights do not match " +
                                  std::to_string(group_feature_names().size()) +
                                  " features and the stated hidden size");
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(source + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
}

GroupEstimate LearnedCostModel::estimate(const graph::IndexedGraph& ig,
                                         const std::vector<size_t>& nodes) const {
  if (nodes.size() < 2) return RooflineCostModel::estimate(ig, nodes);
  const Analytic a = analytic_view(ig, nodes, *this);  // once: the planner's hot path
  GroupEstimate e = a.fused;
  e.t_total_s = a.unfused_s / benefit_ratio(mlp_.forward(features_of(ig, nodes, a)));
  return e;
}

}  // namespace opfuse::fusion
