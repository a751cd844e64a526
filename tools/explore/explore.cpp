#include "tools/explore/explore.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

#include "fusion/graph/indexed_graph.h"
#include "fusion/hardware/profile.h"
#include "schedules/group_schedule.h"

namespace opfuse::explore {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(double v, int precision = 4) {
  std::ostringstream os;
  os << std::setprecision(precision) << v;
  return os.str();
}

// A plan for a candidate's groups; throws std::invalid_argument when they are not legal.
fusion::FusionPlan plan_of(const graph::Graph& g, const fusion::CostModel& model,
                           const std::vector<fusion::UserGroup>& groups) {
  return fusion::plan_from_user_groups(g, model, groups);
}

// Canonical form: the plan's own groups, with the tile fractions and widths it settled on.
Candidate normalized(const graph::Graph& g, const fusion::CostModel& model, Candidate c) {
  c.groups = groups_of(plan_of(g, model, c.groups));
  c.id = candidate_id(c.groups);
  return c;
}

json groups_json(const std::vector<fusion::UserGroup>& groups) {
  json a = json::array();
  for (const auto& u : groups) {
    json sched = {{"tile_fraction", u.tile_fraction}, {"vector_lanes", u.vector_lanes}};
    if (!u.placements.empty()) sched["placements"] = u.placements;
    for (const auto& [node, b] : u.blocks) {
      sched["blocks"][node] = {{"rows", b.rows}, {"vectors", b.vectors}};
    }
    a.push_back({{"nodes", u.nodes}, {"schedule", sched}});
  }
  return a;
}

std::vector<fusion::UserGroup> groups_from_json(const json& a) {
  std::vector<fusion::UserGroup> out;
  for (const auto& jg : a) {
    fusion::UserGroup u;
    u.nodes = jg.at("nodes").get<std::vector<std::string>>();
    const json& sched = jg.at("schedule");
    u.tile_fraction = sched.at("tile_fraction").get<double>();
    u.vector_lanes = sched.at("vector_lanes").get<int>();
    if (sched.contains("placements")) {
      u.placements = sched["placements"].get<std::map<std::string, std::string>>();
    }
    if (sched.contains("blocks")) {
      for (const auto& [node, b] : sched["blocks"].items()) {
        u.blocks[node] = {b.at("rows").get<int>(), b.at("vectors").get<int>()};
      }
    }
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
  return v[std::min(i, v.size() - 1)];
}

std::vector<fusion::UserGroup> groups_of(const fusion::FusionPlan& p) {
  std::vector<fusion::UserGroup> out;
  for (const auto& fg : p.groups) {
    fusion::UserGroup u;
    u.nodes = fg.nodes;
    u.tile_fraction = fg.request.tile_fraction;
    u.vector_lanes = fg.request.vector_lanes;
    u.placements = fg.request.placements;
    u.blocks = fg.request.blocks;
    out.push_back(std::move(u));
  }
  return out;
}

std::string candidate_id(const std::vector<fusion::UserGroup>& groups) {
  std::vector<std::string> parts;
  for (const auto& u : groups) {
    std::vector<std::string> nodes = u.nodes;
    std::sort(nodes.begin(), nodes.end());
    std::string s;
    for (const auto& n : nodes) s += n + ",";
    s += "@" + fmt(u.tile_fraction, 6) + "/" + std::to_string(u.vector_lanes);
    for (const auto& [node, p] : u.placements) s += "/" + node + "=" + p;
    for (const auto& [node, b] : u.blocks) {
      s += "/" + node + "=" + std::to_string(b.rows) + "x" + std::to_string(b.vectors);
    }
    parts.push_back(s);
  }
  std::sort(parts.begin(), parts.end());
  std::string all;
  for (const auto& p : parts) all += p + ";";
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(stable_hash(all)));
  return buf;
}

uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::vector<Candidate> neighbours(const graph::Graph& g, const fusion::CostModel& model,
                                  const Candidate& base, int natural_lanes, int round) {
  const graph::IndexedGraph ig(g);
  std::map<std::string, size_t> pos;  // node -> topological position
  for (size_t i = 0; i < ig.topo().size(); ++i) pos[ig.node(ig.topo()[i]).name] = i;
  std::map<std::string, const graph::Node*> node_by_name;
  for (const auto& n : g.nodes()) node_by_name[n.name] = &n;
  auto topo_sorted = [&](std::vector<std::string> v) {
    std::sort(v.begin(), v.end(), [&](auto& a, auto& b) { return pos.at(a) < pos.at(b); });
    return v;
  };
  const auto& B = base.groups;
  const schedules::TargetFacts facts = schedules::facts_of(model.profile());
  std::vector<Candidate> out;
  std::set<std::string> seen{base.id};
  // A neighbour's origin names the moves from the planner's plan, e.g. "split g1 > tiles x2".
  const std::string prefix =
      base.origin == "planner" || base.origin.empty() ? "" : base.origin + " > ";
  auto add = [&](std::vector<fusion::UserGroup> groups, const std::string& move) {
    for (auto& u : groups) {  // a split leaves requests for nodes now in another group
      const std::set<std::string> in(u.nodes.begin(), u.nodes.end());
      for (auto it = u.placements.begin(); it != u.placements.end();)
        it = in.count(it->first) ? std::next(it) : u.placements.erase(it);
      for (auto it = u.blocks.begin(); it != u.blocks.end();)
        it = in.count(it->first) ? std::next(it) : u.blocks.erase(it);
    }
    Candidate c{"", prefix + move, round, std::move(groups)};
    try {
      c = normalized(g, model, std::move(c));
      // Requests the schedule stage refuses (a block larger than the registers) are not
      // candidates either.
      schedules::schedule_plan(g, plan_of(g, model, c.groups), facts);
    } catch (const std::invalid_argument&) {
      return;  // not a legal partition or schedule: not a candidate
    }
    if (seen.insert(c.id).second) out.push_back(std::move(c));
  };
  auto label = [](size_t i) { return "g" + std::to_string(i); };

  // Splits: fusion off on one cut of a group (prefix | suffix in topological order), or the
  // whole group unfused.
  for (size_t i = 0; i < B.size(); ++i) {
    const std::vector<std::string> nodes = topo_sorted(B[i].nodes);
    if (nodes.size() < 2) continue;
    for (size_t k = 1; k < nodes.size(); ++k) {
      std::vector<fusion::UserGroup> groups = B;
      groups[i].nodes.assign(nodes.begin(), nodes.begin() + long(k));
      groups[i].tile_fraction = 0;
      fusion::UserGroup rest{{nodes.begin() + long(k), nodes.end()}, 0, B[i].vector_lanes};
      groups.insert(groups.begin() + long(i) + 1, rest);
      add(groups, "split " + label(i) + " after " + nodes[k - 1]);
    }
    if (nodes.size() > 2) {
      std::vector<fusion::UserGroup> groups(B.begin(), B.begin() + long(i));
      for (const auto& n : nodes) groups.push_back({{n}, 0, B[i].vector_lanes});
      groups.insert(groups.end(), B.begin() + long(i) + 1, B.end());
      add(groups, "unfuse " + label(i));
    }
  }
  // Merges: a producer/consumer pair of groups, or siblings reading a common tensor.
  std::vector<std::set<std::string>> reads(B.size()), writes(B.size());
  for (size_t i = 0; i < B.size(); ++i) {
    for (const auto& n : B[i].nodes) {
      const graph::Node& node = *node_by_name.at(n);
      reads[i].insert(node.inputs.begin(), node.inputs.end());
      writes[i].insert(node.outputs.begin(), node.outputs.end());
    }
  }
  auto meets = [](const std::set<std::string>& a, const std::set<std::string>& b) {
    for (const auto& x : a) {
      if (b.count(x)) return true;
    }
    return false;
  };
  for (size_t i = 0; i < B.size(); ++i) {
    for (size_t j = i + 1; j < B.size(); ++j) {
      const bool flow = meets(writes[i], reads[j]) || meets(writes[j], reads[i]);
      const bool siblings = meets(reads[i], reads[j]);
      if (!flow && !siblings) continue;
      std::vector<fusion::UserGroup> groups;
      for (size_t k = 0; k < B.size(); ++k) {
        if (k == j) continue;
        groups.push_back(B[k]);
      }
      std::vector<std::string> merged = B[i].nodes;
      merged.insert(merged.end(), B[j].nodes.begin(), B[j].nodes.end());
      groups[i] = {topo_sorted(merged), 0, B[i].vector_lanes};
      add(groups, std::string(flow ? "merge " : "merge siblings ") + label(i) + "+" + label(j));
    }
  }
  // Tiles: every group's tile fraction scaled.
  for (double f : {0.25, 0.5, 2.0, 4.0}) {
    std::vector<fusion::UserGroup> groups = B;
    for (auto& u : groups) u.tile_fraction = std::min(1.0, std::max(1e-6, u.tile_fraction * f));
    add(groups, "tiles x" + fmt(f));
  }
  // Vector width, every group: 1/2, 1, 2 and 4 times the target's natural width (the
  // emitter's default is one of these, per group).
  for (int lanes : {natural_lanes / 2, natural_lanes, natural_lanes * 2, natural_lanes * 4}) {
    if (lanes < 1 || lanes > 64) continue;
    std::vector<fusion::UserGroup> groups = B;
    for (auto& u : groups) u.vector_lanes = lanes;
    add(groups, "vector " + std::to_string(lanes));
  }
  // Records: each anchor's register block with half or twice its rows, or the other number
  // of vectors; each member inlined where it is computed per tile, or computed per tile
  // where it is inlined. The schedule stage refuses what does not fit.
  if (!facts.gpu) {
    const schedules::PipelineSchedule records =
        schedules::schedule_plan(g, plan_of(g, model, B), facts);
    for (size_t i = 0; i < B.size() && i < records.groups.size(); ++i) {
      for (const schedules::NodeSchedule& n : records.groups[i].nodes) {
        if (n.block) {
          const schedules::RegisterBlock& b = *n.block;
          const std::pair<int, int> shapes[] = {
              {std::max(1, b.rows / 2), b.vectors}, {b.rows * 2, b.vectors},
              {b.rows, b.vectors == 1 ? 2 : 1}};
          for (const auto& [rows, vectors] : shapes) {
            if (rows == b.rows && vectors == b.vectors) continue;
            std::vector<fusion::UserGroup> groups = B;
            groups[i].blocks[n.node] = {rows, vectors};
            add(groups, "block " + label(i) + " " + n.node + " " + std::to_string(vectors) +
                            "x" + std::to_string(rows));
          }
        }
        std::string other;
        if (n.placement == schedules::Placement::inlined) other = "compute_at";
        if ((n.placement == schedules::Placement::at_tile ||
             n.placement == schedules::Placement::per_row) && !n.register_blocked)
          other = "inline";
        if (other.empty()) continue;
        std::vector<fusion::UserGroup> groups = B;
        groups[i].placements[n.node] = other;
        add(groups, "place " + label(i) + " " + n.node + " " + other);
      }
    }
  }
  return out;
}

Result predict(const graph::Graph& g, const fusion::CostModel& model, const Candidate& c) {
  const fusion::FusionPlan p = plan_of(g, model, c.groups);
  Result r;
  r.candidate = c;
  r.kernels = p.kernels_fused();
  r.predicted_s = p.fused_time_s;
  r.predicted_bytes = p.fused_bytes;
  r.predicted_unfused_s = p.unfused_time_s;
  for (const auto& fg : p.groups) {
    const auto& e = fg.estimate;
    const double t = std::max(e.t_compute_s, e.t_memory_s) + e.t_overhead_s;  // uncorrected
    (e.bound == fusion::Bound::memory ? r.predicted_memory_s : r.predicted_compute_s) += t;
  }
  return r;
}

std::vector<Candidate> candidate_list(const graph::Graph& g, const fusion::CostModel& model,
                                      const Options& o, size_t limit) {
  fusion::PlannerOptions unfused;
  unfused.enable_fusion = false;
  std::vector<Candidate> list = {
      normalized(g, model, {"", "planner", 0, groups_of(fusion::plan_fusion(g, model))}),
      normalized(g, model, {"", "unfused", 0, groups_of(fusion::plan_fusion(g, model, unfused))})};
  std::set<std::string> seen;
  for (const auto& c : list) seen.insert(c.id);
  if (list[1].id == list[0].id) list.pop_back();                    // nothing to fuse
  const int lanes = std::max(1, model.profile().vector_bytes / 4);  // f32 lanes
  std::vector<Candidate> frontier{list[0]};
  for (int r = 1; r <= o.rounds && list.size() < limit; ++r) {
    std::vector<std::pair<double, Candidate>> next;
    for (const auto& b : frontier) {
      for (auto& c : neighbours(g, model, b, lanes, r)) {
        if (!seen.insert(c.id).second) continue;
        next.emplace_back(predict(g, model, c).predicted_s, std::move(c));
      }
    }
    // Within a round, the most promising first (a budget cuts the tail).
    std::stable_sort(next.begin(), next.end(), [](auto& a, auto& b) { return a.first < b.first; });
    frontier.clear();
    for (auto& [t, c] : next) {
      if (frontier.size() < size_t(std::max(1, o.beam))) frontier.push_back(c);
      if (list.size() < limit) list.push_back(std::move(c));
    }
  }
  return list;
}

std::string result_to_json_line(const Result& r) {
  const Measurement& m = r.m;
  json j = {{"id", r.candidate.id},
            {"origin", r.candidate.origin},
            {"round", r.candidate.round},
            {"groups", groups_json(r.candidate.groups)},
            {"kernels", r.kernels},
            {"predicted_s", r.predicted_s},
            {"predicted_memory_s", r.predicted_memory_s},
            {"predicted_compute_s", r.predicted_compute_s},
            {"predicted_bytes", r.predicted_bytes},
            {"predicted_unfused_s", r.predicted_unfused_s},
            {"ok", m.ok},
            {"error", m.error},
            {"reps", m.reps},
            {"p50_s", m.p50_s},
            {"p99_s", m.p99_s},
            {"mean_s", m.mean_s},
            {"jitter", m.jitter},
            {"peak_heap_bytes", m.peak_heap_bytes},
            {"compile_s", m.compile_s}};
  return j.dump();
}

Result result_from_json(const std::string& line) {
  const json j = json::parse(line);
  Result r;
  r.candidate.id = j.at("id").get<std::string>();
  r.candidate.origin = j.at("origin").get<std::string>();
  r.candidate.round = j.at("round").get<int>();
  r.candidate.groups = groups_from_json(j.at("groups"));
  r.kernels = j.at("kernels").get<int>();
  r.predicted_s = j.at("predicted_s").get<double>();
  r.predicted_memory_s = j.at("predicted_memory_s").get<double>();
  r.predicted_compute_s = j.at("predicted_compute_s").get<double>();
  r.predicted_bytes = j.at("predicted_bytes").get<double>();
  r.predicted_unfused_s = j.at("predicted_unfused_s").get<double>();
  Measurement& m = r.m;
  m.ok = j.at("ok").get<bool>();
  m.error = j.at("error").get<std::string>();
  m.reps = j.at("reps").get<int>();
  m.p50_s = j.at("p50_s").get<double>();
  m.p99_s = j.at("p99_s").get<double>();
  m.mean_s = j.at("mean_s").get<double>();
  m.jitter = j.at("jitter").get<double>();
  m.peak_heap_bytes = j.at("peak_heap_bytes").get<double>();
  m.compile_s = j.at("compile_s").get<double>();
  return r;
}

namespace {

// The measured candidates of an earlier run of this folder, by id (none when it is new).
std::map<std::string, Result> read_results(const std::string& path) {
  std::map<std::string, Result> out;
  if (!fs::exists(path)) return out;
  for (auto& r : merge_results({path})) out.emplace(r.candidate.id, std::move(r));
  return out;
}

class Progress {
 public:
  Progress(bool on, int total) : on_(on), total_(std::max(1, total)), t0_(Clock::now()) {}
  void update(int done, const std::string& what) {
    if (!on_) return;
    const double el = seconds_since(t0_);
    const double eta = done > 0 ? el / done * std::max(0, total_ - done) : 0;
    const int width = 24, fill = std::min(width, done * width / total_);
    std::cerr << "\r[" << std::string(size_t(fill), '#') << std::string(size_t(width - fill), '.')
              << "] " << done << "/" << total_ << "  " << int(el) << "s elapsed, eta " << int(eta)
              << "s  " << what.substr(0, 40) << std::string(8, ' ') << std::flush;
  }
  void done() {
    if (on_) std::cerr << "\n";
  }

 private:
  bool on_;
  int total_;
  Clock::time_point t0_;
};

}  // namespace

Exploration explore(const graph::Graph& g, const Options& o, const std::string& out_dir,
                    const MeasureFn& measure_fn) {
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw std::invalid_argument("explore: shard " + std::to_string(o.shard) + "/" +
                                std::to_string(o.shards) + " is not one of 0.." +
                                std::to_string(o.shards - 1));
  }
  const fusion::RooflineCostModel model(fusion::load_profile(o.profile));
  fs::create_directories(out_dir);
  const std::string results_path = out_dir + "/results.jsonl";
  std::map<std::string, Result> done = read_results(results_path);
  {
    json meta = {{"graph", g.name},    {"graph_path", o.graph_path}, {"profile", o.profile},
                 {"budget", o.budget}, {"rounds", o.rounds},         {"beam", o.beam},
                 {"gate", o.gate},     {"shard", o.shard},           {"shards", o.shards},
                 {"seed", o.seed}};
    std::ofstream(out_dir + "/meta.json") << meta.dump(2) << "\n";
  }
  Exploration e;
  e.graph = g.name;
  // With the gate on, gated candidates do not count against the budget: list more.
  const size_t limit = size_t(o.budget) * (o.gate && o.shards == 1 ? 4 : 1);
  const std::vector<Candidate> list = candidate_list(g, model, o, limit);
  e.log.push_back(std::to_string(list.size()) + " candidates listed (rounds " +
                  std::to_string(o.rounds) + ", beam " + std::to_string(o.beam) + ")");

  std::ofstream log(results_path, std::ios::app);
  const auto t0 = Clock::now();
  double theta = 0;
  const Result* planner = nullptr;
  int measured = 0, reused = 0;
  Progress bar(o.progress, std::min<int>(o.budget, int(list.size())));
  int max_round = 0;
  for (const auto& c : list) max_round = std::max(max_round, c.round);
  std::vector<Result> all;
  all.reserve(list.size());
  bool stop = false;
  for (int round = 0; round <= max_round && !stop; ++round) {
    ThresholdStep step;
    step.round = round;
    step.theta = theta;
    double r_obs = 0, r_model = 0;
    int n_ratio = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const Candidate& c = list[i];
      if (c.round != round || int(i % size_t(o.shards)) != o.shard) continue;
      if (measured >= o.budget || (o.time_budget_s > 0 && seconds_since(t0) > o.time_budget_s)) {
        stop = true;
        break;
      }
      Result r = predict(g, model, c);
      // 7.4.3: later rounds measure only what the corrected model expects to pay off.
      if (o.gate && o.shards == 1 && round >= 2 && planner) {
        const double r_c = planner->predicted_s / r.predicted_s;
        if (r_c + theta < o.gate_min) {
          ++step.gated;
          continue;
        }
      }
      auto it = done.find(c.id);
      if (it != done.end()) {
        r.m = it->second.m;
        ++reused;
      } else {
        r.m = measure_fn(c);
        log << result_to_json_line(r) << "\n" << std::flush;
      }
      ++measured;
      ++step.measured;
      all.push_back(r);
      if (c.origin == "planner" && r.m.ok) planner = &all.back();
      if (planner && r.m.ok && round >= 1) {
        r_obs += planner->m.p50_s / r.m.p50_s;
        r_model += planner->predicted_s / r.predicted_s;
        ++n_ratio;
      }
      bar.update(measured, c.origin);
    }
    if (round >= 1 && n_ratio > 0) {
      // 7.4.3 theta_{t+1} = theta_t + eta (R_observed - R_predicted), R_predicted = R_model +
      // theta_t: theta converges to the model's bias on this graph's benefit ratios.
      step.r_observed = r_obs / n_ratio;
      step.r_predicted = r_model / n_ratio + theta;
      theta += o.eta * (step.r_observed - step.r_predicted);
    }
    e.threshold.push_back(step);
  }
  bar.done();
  e.results = std::move(all);
  e.log.push_back(std::to_string(measured) + " measured (" + std::to_string(reused) +
                  " from an earlier run), theta " + fmt(theta));
  // Confirm the winner against the planner's plan, measured alternately.
  const Result *best = nullptr, *base = nullptr;
  for (const auto& r : e.results) {
    if (!r.m.ok) continue;
    if (!best || r.m.p50_s < best->m.p50_s) best = &r;
    if (r.candidate.origin == "planner") base = &r;
  }
  if (o.shards == 1 && o.confirm > 0 && best && base && best != base) {
    std::vector<double> tb, tp;
    for (int i = 0; i < o.confirm; ++i) {
      tp.push_back(measure_fn(base->candidate).p50_s);
      tb.push_back(measure_fn(best->candidate).p50_s);
    }
    e.confirm_planner_s = percentile(tp, 0.5);
    e.confirm_best_s = percentile(tb, 0.5);
    e.confirm_best_origin = best->candidate.origin;
    e.log.push_back("confirmed, measured alternately " + std::to_string(o.confirm) +
                    " times: planner " + fmt(e.confirm_planner_s * 1e3) + " ms, " +
                    best->candidate.origin + " " + fmt(e.confirm_best_s * 1e3) + " ms: x" +
                    fmt(e.confirm_planner_s / e.confirm_best_s, 3));
  }
  return e;
}

std::vector<Result> merge_results(const std::vector<std::string>& results_files) {
  std::vector<Result> out;
  std::set<std::string> seen;
  for (const auto& f : results_files) {
    if (!fs::exists(f)) throw std::invalid_argument("explore merge: no file " + f);
    std::ifstream in(f);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      Result r;
      try {
        r = result_from_json(line);
      } catch (const std::exception&) {
        // A line cut short by an interruption: that candidate is measured again.
        std::cerr << "explore: " << f << ":" << n << ": incomplete line skipped\n";
        continue;
      }
      if (seen.insert(r.candidate.id).second) out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& pts) {
  std::vector<size_t> front;
  for (size_t i = 0; i < pts.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < pts.size() && !dominated; ++j) {
      if (j == i) continue;
      const bool no_worse = pts[j].first <= pts[i].first && pts[j].second <= pts[i].second;
      const bool better = pts[j].first < pts[i].first || pts[j].second < pts[i].second;
      dominated = no_worse && (better || j < i);  // equal points: the first one stays
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

namespace {
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (double(i) + double(j)) / 2 + 1;  // ties: mean
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = double(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

double median_abs_pct_error(const std::vector<double>& predicted,
                            const std::vector<double>& measured) {
  std::vector<double> e;
  for (size_t i = 0; i < predicted.size() && i < measured.size(); ++i) {
    if (measured[i] > 0) e.push_back(std::fabs(predicted[i] - measured[i]) / measured[i]);
  }
  return percentile(e, 0.5);
}

Correction fit_correction(const std::vector<Result>& results) {
  // Residual of one candidate, relative: (M a_c + C a_k - (T - M - C)) / T. Normal equations
  // of the 2x2 least-squares problem.
  double smm = 0, smc = 0, scc = 0, smy = 0, scy = 0;
  Correction c;
  for (const auto& r : results) {
    if (!r.m.ok || r.m.p50_s <= 0) continue;
    const double T = r.m.p50_s, M = r.predicted_memory_s / T, C = r.predicted_compute_s / T;
    const double y = 1 - M - C;
    smm += M * M, smc += M * C, scc += C * C, smy += M * y, scy += C * y;
    ++c.samples;
  }
  const double det = smm * scc - smc * smc;
  if (c.samples >= 2 && std::fabs(det) > 1e-12 * std::max(1.0, smm * scc)) {
    c.alpha_cache = (smy * scc - scy * smc) / det;
    c.alpha_conflict = (scy * smm - smy * smc) / det;
  } else if (smm + scc > 0) {
    // One kind of group only (or collinear): one factor for both.
    c.alpha_cache = c.alpha_conflict = (smy + scy) / (smm + scc + 2 * smc);
  }
  // A factor below -1 would predict negative times: clamp, then refit the other alone.
  if (c.alpha_cache < -0.95) {
    c.alpha_cache = -0.95;
    if (scc > 0) c.alpha_conflict = (scy - smc * c.alpha_cache) / scc;
  }
  if (c.alpha_conflict < -0.95) {
    c.alpha_conflict = -0.95;
    if (smm > 0) c.alpha_cache = (smy - smc * c.alpha_conflict) / smm;
  }
  return c;
}

double corrected_prediction(const Result& r, const Correction& c) {
  return r.predicted_memory_s * (1 + c.alpha_cache) +
         r.predicted_compute_s * (1 + c.alpha_conflict);
}

fusion::HardwareProfile calibrated_profile(fusion::HardwareProfile p, const Correction& c) {
  p.name += "-calibrated";
  p.alpha_cache = c.alpha_cache;
  p.alpha_conflict = c.alpha_conflict;
  return p;
}

ModelError model_error(const std::vector<Result>& results, const Correction& c) {
  std::vector<double> pred, cal, meas;
  for (const auto& r : results) {
    if (!r.m.ok) continue;
    pred.push_back(r.predicted_s);
    cal.push_back(corrected_prediction(r, c));
    meas.push_back(r.m.p50_s);
  }
  return {int(meas.size()), median_abs_pct_error(pred, meas), median_abs_pct_error(cal, meas),
          spearman(pred, meas), spearman(cal, meas)};
}

std::optional<fusion::TailMeasurement> tail_of(const std::vector<Result>& results) {
  const Result *planner = nullptr, *unfused = nullptr;
  for (const auto& r : results) {
    if (!r.m.ok) continue;
    if (r.candidate.origin == "planner") planner = &r;
    if (r.candidate.origin == "unfused") unfused = &r;
  }
  if (!planner || !unfused) return std::nullopt;
  return fusion::TailMeasurement{planner->m.p50_s, planner->m.p99_s, unfused->m.p50_s,
                                 unfused->m.p99_s};
}

const Result* choose_best(const std::vector<Result>& results, const Options& o, std::string& why) {
  const Result *best = nullptr, *unfused = nullptr;
  for (const auto& r : results) {
    if (r.m.ok && r.candidate.origin == "unfused") unfused = &r;
  }
  int broken_p99 = 0, broken_jitter = 0;
  for (const auto& r : results) {
    if (!r.m.ok || &r == unfused) continue;
    if (o.p99_bound_s > 0 && r.m.p99_s >= o.p99_bound_s) {
      ++broken_p99;
      continue;
    }
    if (o.p99_bound_s > 0 && unfused && r.m.jitter >= o.jitter_bound * unfused->m.jitter) {
      ++broken_jitter;
      continue;
    }
    if (!best || r.m.p50_s < best->m.p50_s) best = &r;
  }
  // The unfused plan competes on speed too (it keeps its own jitter bound by definition).
  const bool unfused_keeps = unfused && (o.p99_bound_s <= 0 || unfused->m.p99_s < o.p99_bound_s);
  if (best && unfused_keeps && unfused->m.p50_s < best->m.p50_s) best = unfused;
  if (o.p99_bound_s <= 0) {
    why = "fastest measured candidate";
  } else if (best) {
    why = "fastest of the candidates within the tail bounds (" + std::to_string(broken_p99) +
          " broke T99 < T_max, " + std::to_string(broken_jitter) + " broke the jitter bound)";
  } else {
    why = "no candidate keeps the tail bounds (" + std::to_string(broken_p99) + " broke T99 < " +
          "T_max, " + std::to_string(broken_jitter) +
          " the jitter bound): rolled back to the conservative (unfused) plan";
    best = unfused;
  }
  return best;
}

void write_outputs(const graph::Graph& g, const Options& o, const Exploration& e,
                   const std::string& out_dir) {
  fs::create_directories(out_dir);
  const fusion::HardwareProfile profile = fusion::load_profile(o.profile);
  const fusion::RooflineCostModel model(profile);
  std::vector<const Result*> ok;
  for (const auto& r : e.results) {
    if (r.m.ok) ok.push_back(&r);
  }
  const Correction corr = fit_correction(e.results);
  const ModelError err = model_error(e.results, corr);

  // candidates.csv and .json
  std::ofstream csv(out_dir + "/candidates.csv");
  csv << "id,round,origin,kernels,predicted_ms,calibrated_ms,p50_ms,p99_ms,jitter,"
         "peak_heap_mib,compile_s,ok,error\n";
  json arr = json::array();
  for (const auto& r : e.results) {
    std::string err = r.m.error;
    std::replace(err.begin(), err.end(), ',', ';');
    std::replace(err.begin(), err.end(), '\n', ' ');
    csv << r.candidate.id << "," << r.candidate.round << ",\"" << r.candidate.origin << "\","
        << r.kernels << "," << r.predicted_s * 1e3 << "," << corrected_prediction(r, corr) * 1e3
        << "," << r.m.p50_s * 1e3 << "," << r.m.p99_s * 1e3 << "," << r.m.jitter << ","
        << r.m.peak_heap_bytes / (1 << 20) << "," << r.m.compile_s << "," << (r.m.ok ? 1 : 0)
        << ",\"" << err << "\"\n";
    json j = json::parse(result_to_json_line(r));
    j["calibrated_s"] = corrected_prediction(r, corr);
    arr.push_back(j);
  }
  std::ofstream(out_dir + "/candidates.json") << arr.dump(2) << "\n";

  // 7.4.2 Pareto front over (p50, peak memory).
  std::vector<std::pair<double, double>> pts;
  for (const Result* r : ok) pts.emplace_back(r->m.p50_s, r->m.peak_heap_bytes);
  json front = json::array();
  for (size_t i : pareto_front(pts)) {
    front.push_back({{"id", ok[i]->candidate.id},
                     {"origin", ok[i]->candidate.origin},
                     {"p50_s", ok[i]->m.p50_s},
                     {"peak_heap_bytes", ok[i]->m.peak_heap_bytes}});
  }
  std::ofstream(out_dir + "/pareto.json") << front.dump(2) << "\n";

  // The plan to ship, as a plan JSON the generator accepts (PLAN).
  std::string why;
  const Result* best = choose_best(e.results, o, why);
  const Result* planner = nullptr;
  for (const Result* r : ok) {
    if (r->candidate.origin == "planner") planner = r;
  }
  if (best) {
    fusion::FusionPlan p = plan_of(g, model, best->candidate.groups);
    p.log.insert(p.log.begin(), "explore: " + why + " of " + std::to_string(ok.size()) +
                                    " measured (" + best->candidate.origin + ")");
    std::ofstream(out_dir + "/best_plan.json")
        << schedules::plan_to_json(p, schedules::schedule_plan(g, p, schedules::facts_of(profile)));
  }

  // Calibration: the correction factors and the model's error before and after.
  std::ofstream(out_dir + "/profile_calibrated.json")
      << fusion::profile_to_json(calibrated_profile(profile, corr));
  const json calj = {{"samples", corr.samples},
                     {"alpha_cache", corr.alpha_cache},
                     {"alpha_conflict", corr.alpha_conflict},
                     {"mdape_before", err.mdape_before},
                     {"mdape_after", err.mdape_after},
                     {"spearman_before", err.spearman_before},
                     {"spearman_after", err.spearman_after}};
  std::ofstream(out_dir + "/calibration.json") << calj.dump(2) << "\n";

  std::ofstream th(out_dir + "/threshold.csv");
  th << "round,theta,r_observed,r_predicted,measured,gated\n";
  for (const auto& s : e.threshold) {
    th << s.round << "," << s.theta << "," << s.r_observed << "," << s.r_predicted << ","
       << s.measured << "," << s.gated << "\n";
  }

  std::ofstream md(out_dir + "/summary.md");
  md << "# Exploration of " << g.name << " (" << profile.name << ")\n\n";
  for (const auto& l : e.log) md << "- " << l << "\n";
  if (planner && best) {
    md << "- planner's plan: " << fmt(planner->m.p50_s * 1e3)
       << " ms; fastest found: " << fmt(best->m.p50_s * 1e3) << " ms (" << best->candidate.origin
       << "), x" << fmt(planner->m.p50_s / best->m.p50_s, 3) << " faster; best_plan.json: " << why
       << "\n";
  }
  md << "- cost model over " << ok.size() << " candidates: median |error| "
     << fmt(100 * err.mdape_before, 3) << "% -> " << fmt(100 * err.mdape_after, 3)
     << "% calibrated; Spearman " << fmt(err.spearman_before, 3) << " -> "
     << fmt(err.spearman_after, 3) << " (a_cache " << fmt(corr.alpha_cache, 3) << ", a_conflict "
     << fmt(corr.alpha_conflict, 3) << ")\n\n";
  md << "| candidate | origin | kernels | predicted ms | calibrated ms | p50 ms | p99 ms | "
        "jitter | peak heap MiB |\n|---|---|---|---|---|---|---|---|---|\n";
  std::vector<const Result*> sorted = ok;
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->m.p50_s < b->m.p50_s; });
  for (const Result* r : sorted) {
    md << "| " << r->candidate.id.substr(0, 8) << " | " << r->candidate.origin << " | "
       << r->kernels << " | " << fmt(r->predicted_s * 1e3) << " | "
       << fmt(corrected_prediction(*r, corr) * 1e3) << " | " << fmt(r->m.p50_s * 1e3) << " | "
       << fmt(r->m.p99_s * 1e3) << " | " << fmt(r->m.jitter, 3) << " | "
       << fmt(r->m.peak_heap_bytes / (1 << 20), 3) << " |\n";
  }
  int failed = 0;
  for (const auto& r : e.results) failed += r.m.ok ? 0 : 1;
  if (failed) md << "\n" << failed << " candidates failed (see candidates.csv, column error).\n";
  md << "\nPareto front (latency, peak heap): " << front.size() << " plans, pareto.json.\n";
  md << "\n7.4.3 threshold trajectory (threshold.csv):\n\n| round | theta | R observed | R "
        "predicted | measured | gated |\n|---|---|---|---|---|---|\n";
  for (const auto& s : e.threshold) {
    md << "| " << s.round << " | " << fmt(s.theta, 3) << " | " << fmt(s.r_observed, 3) << " | "
       << fmt(s.r_predicted, 3) << " | " << s.measured << " | " << s.gated << " |\n";
  }
}

}  // namespace opfuse::explore
