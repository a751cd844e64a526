#include "tools/explore/learn.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fusion/frontend/load_model.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/hardware/profile.h"
#include "tools/explore/measure.h"

namespace opfuse::explore {

namespace {

// A stable 1-in-4 held-out split by the group's identity, so new data never reshuffles it.
bool held_out_of(const std::string& graph, const std::vector<std::string>& nodes) {
  std::string key;
  for (const auto& s : nodes) key += graph + "/" + s;
  return (stable_hash(key) >> 7) % 4 == 0;
}

std::string join(const std::vector<std::string>& v, char sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? std::string(1, sep) : "") + v[i];
  return s;
}

}  // namespace

std::vector<GroupSample> collect_group_samples(const std::vector<std::string>& dirs,
                                               const Options& o) {
  const fusion::RooflineCostModel model(fusion::load_profile(o.profile));
  std::vector<GroupSample> out;
  for (const auto& dir : dirs) {
    std::ifstream meta_in(dir + "/meta.json");
    if (!meta_in) throw std::invalid_argument("explore learn: no " + dir + "/meta.json");
    const auto meta = nlohmann::json::parse(meta_in);
    const std::string path = meta.value("graph_path", "");
    if (path.empty()) throw std::invalid_argument(dir + "/meta.json names no graph file");
    const graph::Graph g = fusion::load_model(path);
    std::set<std::vector<std::string>> groups;
    for (const auto& r : merge_results({dir + "/results.jsonl"})) {
      if (!r.m.ok) continue;
      for (const auto& u : r.candidate.groups) {
        if (u.nodes.size() < 2) continue;
        std::vector<std::string> key = u.nodes;
        std::sort(key.begin(), key.end());
        groups.insert(key);
      }
    }
    size_t k = 0;
    for (const auto& key : groups) {
      const graph::Graph sub = graph::subgraph(g, key, g.name + "_group" + std::to_string(k++));
      const graph::IndexedGraph ig(sub);
      GroupSample s;
      s.graph = g.name;
      for (size_t i : sub.topo_order()) s.nodes.push_back(sub.nodes()[i].name);
      s.features = fusion::group_features(ig, ig.topo(), model);
      s.held_out = held_out_of(s.graph, key);
      const MeasureFn m = jit_measure(sub, model, o);
      std::vector<fusion::UserGroup> fused{{s.nodes, 0, 0}}, unfused;
      for (const auto& n : s.nodes) unfused.push_back({{n}, 0, 0});
      const Measurement mf = m({"", "fused", 0, fused}), mu = m({"", "unfused", 0, unfused});
      if (!mf.ok || !mu.ok) {
        std::cerr << "explore learn: " << s.graph << " {" << join(s.nodes, ' ')
                  << "} skipped: " << (mf.ok ? mu.error : mf.error) << "\n";
        continue;
      }
      s.t_fused_s = mf.p50_s;
      s.t_unfused_s = mu.p50_s;
      if (o.progress) {
        std::cerr << "  " << s.graph << " {" << join(s.nodes, ' ')
                  << "}: R = " << s.t_unfused_s / s.t_fused_s << "\n";
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

void write_samples_csv(const std::vector<GroupSample>& samples, const std::string& path) {
  std::ofstream f(path);
  f << "graph,nodes,held_out,t_unfused_s,t_fused_s";
  for (const auto& n : fusion::group_feature_names()) f << "," << n;
  f << "\n";
  f.precision(9);
  for (const auto& s : samples) {
    f << s.graph << "," << join(s.nodes, ' ') << "," << (s.held_out ? 1 : 0) << "," << s.t_unfused_s
      << "," << s.t_fused_s;
    for (double v : s.features) f << "," << v;
    f << "\n";
  }
}

std::vector<GroupSample> read_samples_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument("explore learn: cannot read " + path);
  std::string line;
  std::getline(f, line);  // header
  std::vector<GroupSample> out;
  size_t n = 1;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    const size_t want = 5 + fusion::group_feature_names().size();
    if (cells.size() != want) {
      throw std::invalid_argument(path + ":" + std::to_string(n) + ": " +
                                  std::to_string(cells.size()) + " cells, expected " +
                                  std::to_string(want));
    }
    GroupSample s;
    s.graph = cells[0];
    std::stringstream ns(cells[1]);
    for (std::string x; ns >> x;) s.nodes.push_back(x);
    s.held_out = cells[2] == "1";
    s.t_unfused_s = std::stod(cells[3]);
    s.t_fused_s = std::stod(cells[4]);
    for (size_t i = 5; i < cells.size(); ++i) s.features.push_back(std::stod(cells[i]));
    out.push_back(std::move(s));
  }
  return out;
}

LearnReport train_and_score(const std::vector<GroupSample>& samples, const fusion::TrainOptions& t,
                            fusion::Mlp& trained) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& s : samples) {
    if (s.held_out) continue;
    x.push_back(s.features);
    y.push_back(fusion::benefit_target(s.t_unfused_s, s.t_fused_s));
  }
  LearnReport r;
  r.train = int(x.size());
  if (x.empty()) throw std::invalid_argument("explore learn: no training samples");
  trained = fusion::train_mlp(x, y, t);
  std::vector<double> measured, learned, analytic;
  const size_t benefit = fusion::group_feature_names().size() - 1;  // log analytic benefit
  for (const auto& s : samples) {
    if (!s.held_out) continue;
    measured.push_back(s.t_unfused_s / s.t_fused_s);
    learned.push_back(fusion::benefit_ratio(trained.forward(s.features)));
    analytic.push_back(std::exp(s.features[benefit]));
  }
  r.held_out = int(measured.size());
  r.learned_mdape = median_abs_pct_error(learned, measured);
  r.analytic_mdape = median_abs_pct_error(analytic, measured);
  r.learned_spearman = spearman(learned, measured);
  r.analytic_spearman = spearman(analytic, measured);
  return r;
}

}  // namespace opfuse::explore
