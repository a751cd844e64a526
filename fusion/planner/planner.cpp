#include "fusion/graph/op_schema.h"
#include "fusion/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "fusion/graph/indexed_graph.h"
#include "fusion/pattern/matcher.h"

namespace opfuse::fusion {

using graph::IndexedGraph;

namespace {

struct Group {
  std::vector<size_t> nodes;
  GroupEstimate est;
  std::string rule;
  double score = 0;
  std::vector<std::string> reasons;
  bool alive = true;
  bool has_anchor = false;
};

std::string fmt_s(double s) {
  std::ostringstream os;
  os.precision(3);
  if (s >= 1e-3)
    os << s * 1e3 << " ms";
  else
    os << s * 1e6 << " us";
  return os.str();
}

std::string fmt_num(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

class Planner {
 public:
  Planner(const graph::Graph& g, const CostModel& m, const PlannerOptions& o)
      : ig_(g), model_(m), opt_(o), legal_(ig_, m, o.max_group_ops) {}

  // A given partition instead of Steps 2-4: each group is formed as the planner would form
  // a matched group, with the same legality checks.
  FusionPlan run_user(const std::vector<UserGroup>& user) {
    baseline();
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < ig_.size(); ++i) index[ig_.node(i).name] = i;
    std::vector<int> seen(ig_.size(), -1);
    for (size_t gi = 0; gi < user.size(); ++gi) {
      const std::string where = "user plan group " + std::to_string(gi);
      std::vector<size_t> nodes;
      for (const auto& name : user[gi].nodes) {
        auto it = index.find(name);
        if (it == index.end())
          throw std::invalid_argument(where + ": no node named '" + name + "'");
        if (seen[it->second] >= 0) {
          throw std::invalid_argument(where + ": node '" + name + "' is already in group " +
                                      std::to_string(seen[it->second]));
        }
        seen[it->second] = int(gi);
        nodes.push_back(it->second);
      }
      if (nodes.empty()) throw std::invalid_argument(where + ": no nodes");
      GroupEstimate est = model_.estimate(ig_, nodes);
      FusionDecision d =
          nodes.size() > 1 ? legal_.can_form_group(nodes, est) : FusionDecision::yes();
      Reorder reorder;
      if (d && nodes.size() > 1) d = keeps_groups_acyclic(groups_of(nodes), reorder);
      if (!d)
        throw std::invalid_argument(where + " {" + names(nodes) + "} is not legal: " + d.reason);
      if (user[gi].tile_fraction > 0) est.tile_fraction = std::min(1.0, user[gi].tile_fraction);
      if (nodes.size() > 1) {
        form_group(nodes, est, "user", 0, "given by the user's plan", reorder);
      } else {
        groups_[group_of_[nodes[0]]].est = est;
        groups_[group_of_[nodes[0]]].reasons = {"given by the user's plan"};
      }
      user_[nodes[0]] = &user[gi];
    }
    for (size_t i = 0; i < ig_.size(); ++i) {
      if (seen[i] < 0)
        throw std::invalid_argument("user plan: node '" + ig_.node(i).name + "' is in no group");
    }
    return build_plan();
  }

  FusionPlan run() {
    baseline();  // Step 1
    if (opt_.enable_fusion) {
      mark_critical();
      resolve(match_rules(ig_, enabled_rules()));  // Steps 2 and 3
      if (opt_.local_search) local_search();       // Step 4
    } else {
      log("fusion disabled: every op is its own kernel");
    }
    return build_plan();  // Step 5
  }

 private:
  void log(const std::string& s) { log_.push_back(s); }

  std::vector<Rule> enabled_rules() {
    std::vector<Rule> out;
    for (const Rule& r : opt_.rules) {
      if (opt_.disabled_rules.count(r.name)) {
        log("rule " + r.name + ": disabled by option");
      } else {
        out.push_back(r);
      }
    }
    return out;
  }

  // ---- Step 1 ------------------------------------------------------------------------
  void baseline() {
    group_of_.assign(ig_.size(), 0);
    single_.resize(ig_.size());
    for (size_t i = 0; i < ig_.size(); ++i) {
      Group grp;
      grp.nodes = {i};
      grp.est = model_.estimate(ig_, grp.nodes);
      single_[i] = grp.est.t_total_s;
      add_group(std::move(grp), double(ig_.topo_pos(i)));
    }
  }

  // Appends a live group over grp.nodes at position `pos` of the groups' topological order.
  size_t add_group(Group grp, double pos) {
    grp.has_anchor = false;
    for (size_t n : grp.nodes) grp.has_anchor = grp.has_anchor || Legality::is_anchor(ig_.node(n));
    const size_t id = groups_.size();
    for (size_t n : grp.nodes) group_of_[n] = id;
    groups_.push_back(std::move(grp));
    pos_.push_back(pos);
    return id;
  }

  double unfused_time(const std::vector<size_t>& nodes) const {
    double t = 0;
    for (size_t n : nodes) t += single_[n];
    return t;
  }

  // Nodes on a longest (by unfused time) path to the critical outputs get priority (7.1.4).
  void mark_critical() {
    critical_.assign(ig_.size(), false);
    std::vector<double> dist(ig_.size(), 0);
    std::vector<int> from(ig_.size(), -1);
    for (size_t n : ig_.topo()) {
      double best = 0;
      for (size_t p : ig_.preds(n)) {
        if (dist[p] > best) best = dist[p], from[n] = int(p);
      }
      dist[n] = best + single_[n];
    }
    std::vector<std::string> outs =
        opt_.critical_outputs.empty() ? ig_.graph().outputs() : opt_.critical_outputs;
    int end = -1;
    for (const auto& o : outs) {
      const int p = ig_.producer(o);
      if (p >= 0 && (end < 0 || dist[p] > dist[end])) end = p;
    }
    for (int n = end; n >= 0; n = from[n]) critical_[n] = true;
  }

  // ---- Step 3 ------------------------------------------------------------------------
  struct Scored {
    Match match;
    GroupEstimate est;
    double benefit_s = 0, score = 0;
  };

  // 7.2.3: score = benefit / cost * priority, with
  //   benefit  = time saved + memory saved (as its transfer time at main-memory bandwidth)
  //   cost     = 1 + registers / R_max + ops / max_group_ops   (register use, compile effort)
  //   priority = rule priority * (2 if the match lies on a critical path, else 1)
  Scored score(const Match& m) const {
    Scored s;
    s.match = m;
    s.est = model_.estimate(ig_, m.nodes);
    double bytes_unfused = 0;
    for (size_t n : m.nodes) bytes_unfused += groups_[group_of_[n]].est.boundary_bytes();
    const double saved_bytes = bytes_unfused - s.est.boundary_bytes();
    s.benefit_s = (unfused_time(m.nodes) - s.est.t_total_s) +
                  saved_bytes / model_.profile().main_memory().bandwidth_Bps;
    const double cost = 1.0 +
                        double(s.est.vector_registers) / std::max(1, model_.register_limit()) +
                        double(m.nodes.size()) / double(opt_.max_group_ops);
    bool critical = false;
    for (size_t n : m.nodes) critical = critical || critical_[n];
    s.score = s.benefit_s / cost * m.priority * (critical ? 2.0 : 1.0);
    return s;
  }

  void resolve(const std::vector<Match>& matches) {
    std::vector<Scored> scored;
    for (const Match& m : matches) {
      if (m.nodes.size() > 1) scored.push_back(score(m));
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const Scored& a, const Scored& b) { return a.score > b.score; });
    for (const Scored& s : scored) {
      if (out_of_time()) break;
      const std::string what = "rule " + s.match.rule + " on {" + names(s.match.nodes) + "}";
      std::string taken;
      for (size_t n : s.match.nodes) {
        if (groups_[group_of_[n]].nodes.size() > 1) taken = groups_[group_of_[n]].rule;
      }
      if (!taken.empty()) {
        log(what + ": overlap conflict with accepted rule " + taken + ", skipped");
        continue;
      }
      if (!(s.est.t_total_s < unfused_time(s.match.nodes))) {
        log(what + ": no predicted gain (" + fmt_s(s.est.t_total_s) + " fused vs " +
            fmt_s(unfused_time(s.match.nodes)) + " unfused), skipped");
        continue;
      }
      FusionDecision d = legal_.can_form_group(s.match.nodes, s.est);
      Reorder reorder;
      if (d) d = keeps_groups_acyclic(groups_of(s.match.nodes), reorder);
      if (!d) {
        log(what + ": refused, " + d.reason);
        continue;
      }
      std::ostringstream why;
      why << "rule " << s.match.rule << " (score " << s.score << ", saves "
          << fmt_s(unfused_time(s.match.nodes) - s.est.t_total_s) << ")";
      form_group(s.match.nodes, s.est, s.match.rule, s.score, why.str(), reorder);
      log(what + ": accepted, score " + std::to_string(s.score));
    }
  }

  // Replaces the groups of `nodes` (all wholly inside `nodes`) with one group.
  // The distinct groups holding `nodes`.
  std::vector<size_t> groups_of(const std::vector<size_t>& nodes) const {
    std::vector<size_t> out;
    for (size_t n : nodes) {
      if (std::find(out.begin(), out.end(), group_of_[n]) == out.end()) out.push_back(group_of_[n]);
    }
    return out;
  }

  std::vector<size_t> group_neighbours(size_t gid, bool forward) const {
    std::vector<size_t> out;
    for (size_t n : groups_[gid].nodes) {
      for (size_t m : forward ? ig_.succs(n) : ig_.preds(n)) {
        const size_t h = group_of_[m];
        if (h != gid && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
      }
    }
    return out;
  }

  // Merging groups must keep the graph of groups acyclic: node-level convexity of the merged
  // set is not enough, since a path may leave through one node of another group and come back
  // from a different node of it. pos_ is a topological order of the groups; a cycle through
  // the merged group would be a path member -> non-members -> member, all below the highest
  // member's position. The forward set F and backward set B found on the way are then
  // renumbered (B, merged, F) in the positions they held, as in Pearce & Kelly's dynamic
  // topological sort, so pos_ stays a topological order.
  struct Reorder {
    std::vector<size_t> members, forward, backward;
  };

  FusionDecision keeps_groups_acyclic(const std::vector<size_t>& members, Reorder& r) const {
    r = Reorder{members, {}, {}};
    double lo = pos_[members[0]], hi = lo;
    for (size_t m : members) lo = std::min(lo, pos_[m]), hi = std::max(hi, pos_[m]);
    auto is_member = [&](size_t g) {
      return std::find(members.begin(), members.end(), g) != members.end();
    };
    std::unordered_set<size_t> seen;
    std::vector<size_t> stack;
    for (size_t m : members) {
      for (size_t h : group_neighbours(m, true)) {
        if (!is_member(h) && pos_[h] < hi && seen.insert(h).second) stack.push_back(h);
      }
    }
    while (!stack.empty()) {
      const size_t u = stack.back();
      stack.pop_back();
      r.forward.push_back(u);
      for (size_t h : group_neighbours(u, true)) {
        if (is_member(h)) {
          return FusionDecision::no("dependence conflict: a path through group {" +
                                    names(groups_[u].nodes) +
                                    "} leaves the fused group and re-enters it");
        }
        if (pos_[h] < hi && seen.insert(h).second) stack.push_back(h);
      }
    }
    seen.clear();
    for (size_t m : members) {
      for (size_t h : group_neighbours(m, false)) {
        if (!is_member(h) && pos_[h] > lo && seen.insert(h).second) stack.push_back(h);
      }
    }
    while (!stack.empty()) {
      const size_t u = stack.back();
      stack.pop_back();
      r.backward.push_back(u);
      for (size_t h : group_neighbours(u, false)) {
        if (!is_member(h) && pos_[h] > lo && seen.insert(h).second) stack.push_back(h);
      }
    }
    return FusionDecision::yes();
  }

  void apply_reorder(const Reorder& r, size_t merged) {
    std::vector<double> slots;
    for (const auto* set : {&r.backward, &r.members, &r.forward}) {
      for (size_t g : *set) slots.push_back(pos_[g]);
    }
    std::sort(slots.begin(), slots.end());
    auto by_pos = [&](std::vector<size_t> v) {
      std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return pos_[a] < pos_[b]; });
      return v;
    };
    const std::vector<size_t> back = by_pos(r.backward), fwd = by_pos(r.forward);
    size_t k = 0;
    for (size_t g : back) pos_[g] = slots[k++];
    pos_[merged] = slots[k++];
    k += r.members.size() - 1;  // the merged group needs one slot; the others stay unused
    for (size_t g : fwd) pos_[g] = slots[k++];
  }

  // Recomputes pos_ as a topological order of the live groups (Kahn), after splits.
  void renumber_groups() {
    std::vector<size_t> live;
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g].alive) live.push_back(g);
    }
    std::unordered_map<size_t, int> indegree;
    for (size_t g : live) indegree[g] = int(group_neighbours(g, false).size());
    std::vector<size_t> ready;
    for (size_t g : live) {
      if (indegree[g] == 0) ready.push_back(g);
    }
    double next = 0;
    while (!ready.empty()) {
      const size_t g = ready.back();
      ready.pop_back();
      pos_[g] = next++;
      for (size_t h : group_neighbours(g, true)) {
        if (--indegree[h] == 0) ready.push_back(h);
      }
    }
    if (next != double(live.size())) {
      throw std::logic_error("opfuse planner internal error: the groups of '" + ig_.graph().name +
                             "' form a cycle");
    }
  }

  size_t form_group(const std::vector<size_t>& nodes, const GroupEstimate& est,
                    const std::string& rule, double score, const std::string& reason,
                    const Reorder& reorder) {
    Group grp;
    grp.nodes = nodes;
    std::sort(grp.nodes.begin(), grp.nodes.end(),
              [&](size_t a, size_t b) { return ig_.topo_pos(a) < ig_.topo_pos(b); });
    grp.est = est;
    grp.rule = rule;
    grp.score = score;
    // The group keeps the name of the rule that formed its core; local search only extends.
    std::string core;
    for (size_t n : nodes) {
      Group& old = groups_[group_of_[n]];
      if (old.alive) {
        grp.reasons.insert(grp.reasons.end(), old.reasons.begin(), old.reasons.end());
        if (core.empty() && !old.rule.empty() && old.rule != "local_search") core = old.rule;
        old.alive = false;
      }
    }
    if (rule == "local_search" && !core.empty()) grp.rule = core;
    grp.reasons.push_back(reason);
    const size_t id = add_group(std::move(grp), 0);
    apply_reorder(reorder, id);
    return id;
  }

  // ---- Step 4 ------------------------------------------------------------------------
  bool try_merge(size_t a, size_t b, const char* move) {
    Group& ga = groups_[a];
    Group& gb = groups_[b];
    // One compute anchor per kernel. Measured against chaining two (MobileNetV2, JIT, 2 Zen 4
    // cores: each expanding 1x1 conv + ReLU6 computed at the tiles of the depthwise conv
    // after it, against the two groups apart): in tiles of rows, whose halo rows the 1x1 conv
    // recomputes, the 112x112x96 block paid (466 -> 338-363 us: its 4.8 MB expanded tensor
    // never stored) and one 28x28 block (97 -> 82-84 us); the other 15 took 10-75% longer.
    // In chunks of channels (no halo) they were level at 14x14 and lost at 56x56; with the
    // 1x1 conv computed a row at a time inside each channel block (stored there, for Halide's
    // sliding window), worse still.
    if (ga.has_anchor && gb.has_anchor) return false;
    std::vector<size_t> merged = ga.nodes;
    merged.insert(merged.end(), gb.nodes.begin(), gb.nodes.end());
    if (merged.size() > opt_.max_group_ops) return false;
    const GroupEstimate est = model_.estimate(ig_, merged);
    const double before = ga.est.t_total_s + gb.est.t_total_s;
    if (!(est.t_total_s < before * (1 - 1e-9))) return false;
    if (!legal_.can_form_group(merged, est)) return false;
    Reorder reorder;
    if (!keeps_groups_acyclic({a, b}, reorder)) return false;
    const std::string reason = std::string("local search: ") + move + " {" + names(ga.nodes) +
                               "} + {" + names(gb.nodes) + "} saves " +
                               fmt_s(before - est.t_total_s);
    log(reason);
    form_group(merged, est, "local_search", 0, reason, reorder);
    return true;
  }

  bool merge_round() {
    bool changed = false;
    // Vertical: a group with the consumer groups of its outputs, in topological order.
    for (size_t n : ig_.topo()) {
      const size_t a = group_of_[n];
      for (size_t s : ig_.succs(n)) {
        const size_t b = group_of_[s];
        if (a == b || !groups_[a].alive || !groups_[b].alive) continue;
        if (try_merge(a, b, "producer -> consumer")) {
          changed = true;
          break;
        }
      }
    }
    // Horizontal: groups whose nodes read the same activation (7.1.2).
    for (size_t n : ig_.topo()) {
      for (const auto& t : ig_.node(n).inputs) {
        if (ig_.graph().tensor(t).kind == graph::TensorKind::param) continue;
        const auto& users = ig_.consumers(t);
        if (users.size() < 2 || users.front() != n) continue;  // once per tensor
        for (size_t i = 0; i < users.size(); ++i) {
          for (size_t j = i + 1; j < users.size(); ++j) {
            const size_t a = group_of_[users[i]], b = group_of_[users[j]];
            if (a == b || !groups_[a].alive || !groups_[b].alive) continue;
            if (!legal_.siblings_share_input(groups_[a].nodes, groups_[b].nodes)) continue;
            changed = try_merge(a, b, "siblings") || changed;
          }
        }
      }
    }
    return changed;
  }

  // Split: drop the first or last node of a group when the rest plus the node alone cost less.
  bool split_round() {
    bool changed = false;
    const size_t count = groups_.size();
    for (size_t id = 0; id < count; ++id) {
      Group& g = groups_[id];
      if (!g.alive || g.nodes.size() < 2) continue;
      for (size_t end : {size_t(0), g.nodes.size() - 1}) {
        std::vector<size_t> rest = groups_[id].nodes;
        const size_t node = rest[end];
        rest.erase(rest.begin() + long(end));
        const GroupEstimate est = model_.estimate(ig_, rest);
        if (!(est.t_total_s + single_[node] < groups_[id].est.t_total_s * (1 - 1e-9))) continue;
        if (!legal_.can_form_group(rest, est)) continue;
        const std::string reason = "local search: split " + ig_.node(node).name + " off {" +
                                   names(groups_[id].nodes) + "}";
        log(reason);
        const std::string rule = groups_[id].rule;
        groups_[id].alive = false;
        Group single;
        single.nodes = {node};
        single.est = model_.estimate(ig_, single.nodes);
        single.reasons = {reason};
        add_group(std::move(single), 0);  // positions are renumbered after the round
        Group r;
        r.nodes = rest;
        r.est = est;
        r.rule = rule;
        r.reasons = {reason};
        add_group(std::move(r), 0);
        changed = true;
        break;
      }
    }
    return changed;
  }

  bool out_of_time() {
    if (opt_.time_limit_s <= 0 || timed_out_) return timed_out_;
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (spent > opt_.time_limit_s) {
      timed_out_ = true;
      log("time limit: planning stopped after " + fmt_s(spent) + " (limit " +
          fmt_s(opt_.time_limit_s) + "); keeping the plan found so far");
    }
    return timed_out_;
  }

  void local_search() {
    for (size_t round = 0; round < opt_.max_local_search_rounds; ++round) {
      if (out_of_time()) return;
      const bool merged = merge_round();
      const bool split = split_round();
      if (split) renumber_groups();
      if (!merged && !split) return;
    }
    log("local search: stopped after " + std::to_string(opt_.max_local_search_rounds) + " rounds");
  }

  // ---- Step 5 ------------------------------------------------------------------------
  std::string names(const std::vector<size_t>& nodes) const {
    std::string s;
    for (size_t n : nodes) s += (s.empty() ? "" : ", ") + ig_.node(n).name;
    return s;
  }

  GroupKind kind_of(const std::vector<size_t>& nodes) const {
    if (nodes.size() == 1) return GroupKind::single;
    std::unordered_set<size_t> in(nodes.begin(), nodes.end());
    // Reachability inside the group (groups are small: O(k^2)).
    std::unordered_map<size_t, std::unordered_set<size_t>> reach;
    bool any_edge = false;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {  // reverse topological order
      auto& r = reach[*it];
      for (size_t s : ig_.succs(*it)) {
        if (!in.count(s)) continue;
        any_edge = true;
        r.insert(s);
        r.insert(reach[s].begin(), reach[s].end());
      }
    }
    if (!any_edge) return GroupKind::horizontal;
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (size_t j = i + 1; j < nodes.size(); ++j) {
        if (!reach[nodes[i]].count(nodes[j]) && !reach[nodes[j]].count(nodes[i]))
          return GroupKind::mixed;
      }
    }
    return GroupKind::vertical;
  }

  FusionPlan build_plan() {
    renumber_groups();  // invariant check: throws if the groups form a cycle
    FusionPlan p;
    p.graph = ig_.graph().name;
    p.profile = model_.profile().name;
    p.cost_model = model_.name();
    p.latency_bound_s = opt_.latency_bound_s;
    for (size_t i = 0; i < ig_.size(); ++i) {
      p.unfused_time_s += single_[i];
      p.unfused_bytes += groups_[i].est.boundary_bytes();  // baseline groups are the singletons
    }
    // Groups in topological order of their first node.
    std::vector<size_t> order;
    std::unordered_map<size_t, int> plan_id;
    for (size_t n : ig_.topo()) {
      const size_t g = group_of_[n];
      if (!plan_id.count(g)) {
        plan_id[g] = int(order.size());
        order.push_back(g);
      }
    }
    for (size_t g : order) {
      const Group& grp = groups_[g];
      FusedGroup fg;
      fg.id = plan_id[g];
      fg.kind = kind_of(grp.nodes);
      for (size_t n : grp.nodes) fg.nodes.push_back(ig_.node(n).name);
      fg.rule = grp.rule;
      fg.score = grp.score;
      fg.estimate = grp.est;
      fg.unfused_time_s = unfused_time(grp.nodes);
      fg.request.tile_fraction = grp.est.tile_fraction;
      fg.request.prefetch_distance = grp.est.prefetch_distance;
      for (size_t n : grp.nodes) {
        auto u = user_.find(n);
        if (u == user_.end()) continue;
        fg.request.vector_lanes = u->second->vector_lanes;
        fg.request.gpu_threads = u->second->gpu_threads;
        fg.request.placements = u->second->placements;
        fg.request.blocks = u->second->blocks;
      }
      fg.reasons = grp.reasons;
      if (fg.reasons.empty()) {
        fg.reasons.push_back(opt_.enable_fusion ? "no rule or merge lowered the cost: runs alone"
                                                : "fusion disabled");
      }
      p.fused_time_s += grp.est.t_total_s;
      p.fused_bytes += grp.est.boundary_bytes();
      p.groups.push_back(std::move(fg));
    }
    p.bandwidth_saving = bandwidth_saving(p.fused_bytes, p.unfused_bytes);

    // 7.1.4: the longest path of group latencies L(P) ending at a critical output.
    std::vector<double> dist(order.size(), 0);
    std::vector<int> from(order.size(), -1);
    for (size_t k = 0; k < order.size(); ++k) {
      double best = 0;
      for (size_t n : groups_[order[k]].nodes) {
        for (size_t pr : ig_.preds(n)) {
          const int pg = plan_id[group_of_[pr]];
          if (size_t(pg) != k && dist[pg] > best) best = dist[pg], from[k] = pg;
        }
      }
      dist[k] = best + groups_[order[k]].est.t_total_s;
    }
    const std::vector<std::string> outs =
        opt_.critical_outputs.empty() ? ig_.graph().outputs() : opt_.critical_outputs;
    int end = -1;
    for (const auto& o : outs) {
      const int pr = ig_.producer(o);
      if (pr < 0) continue;
      const int gid = plan_id[group_of_[pr]];
      if (end < 0 || dist[gid] > dist[end]) end = gid;
    }
    for (int k = end; k >= 0; k = from[k]) p.groups[k].on_critical_path = true;
    p.critical_path_s = end >= 0 ? dist[end] : 0;
    if (opt_.latency_bound_s > 0) {
      p.latency_bound_met = p.critical_path_s <= opt_.latency_bound_s;
      log(std::string("latency bound: critical path ") + fmt_s(p.critical_path_s) +
          (p.latency_bound_met ? " <= " : " > ") + "L_max " + fmt_s(opt_.latency_bound_s) +
          (p.latency_bound_met ? ": met" : ": NOT met; the plan is the fastest this model found"));
    }
    p.log = std::move(log_);
    return p;
  }

  IndexedGraph ig_;
  const CostModel& model_;
  const PlannerOptions& opt_;
  Legality legal_;
  std::vector<Group> groups_;
  std::vector<size_t> group_of_;
  std::map<size_t, const UserGroup*> user_;  // a user group's first node -> its requests
  std::vector<double> pos_;             // per group id: a topological order of the live groups
  std::vector<double> single_;
  std::vector<bool> critical_;
  std::vector<std::string> log_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool timed_out_ = false;
};

}  // namespace

namespace {

// Exercise 7.7: which tail bound the fused plan breaks, or "" when it keeps both.
std::string broken_tail_bound(const FusionPlan& fused, const PlannerOptions& o,
                              std::vector<std::string>& log) {
  const double t_max = o.p99_bound_s;
  if (!o.measured_tail) {
    const double t99 = fused.fused_time_s;
    log.push_back("tail bound: predicted T99 " + fmt_s(t99) + (t99 < t_max ? " < " : " >= ") +
                  "T_max " + fmt_s(t_max) +
                  " (no measured distribution: the jitter bound is not checked)");
    return t99 < t_max ? "" : "p99";
  }
  const TailMeasurement& m = *o.measured_tail;
  const double jf = m.fused_p99_s / m.fused_p50_s, ju = m.unfused_p99_s / m.unfused_p50_s;
  log.push_back("tail bound: measured T99_fused " + fmt_s(m.fused_p99_s) +
                (m.fused_p99_s < t_max ? " < " : " >= ") + "T_max " + fmt_s(t_max) +
                "; jitter_fused " + fmt_num(jf) + (jf < o.jitter_bound * ju ? " < " : " >= ") +
                fmt_num(o.jitter_bound) + " x jitter_unfused " + fmt_num(ju));
  if (m.fused_p99_s >= t_max) return "p99";
  if (jf >= o.jitter_bound * ju) return "jitter";
  return "";
}

}  // namespace

FusionPlan plan_fusion(const graph::Graph& g, const CostModel& model,
                       const PlannerOptions& options) {
  FusionPlan fused = Planner(g, model, options).run();
  if (options.p99_bound_s <= 0 || !options.enable_fusion) return fused;
  std::vector<std::string> log;
  const std::string broken = broken_tail_bound(fused, options, log);
  if (broken.empty()) {
    fused.log.insert(fused.log.end(), log.begin(), log.end());
    fused.log.push_back("tail bound: both bounds hold, the fused plan stands");
    return fused;
  }
  // Roll back to the conservative plan (7.7), saying which bound decided.
  PlannerOptions conservative = options;
  conservative.enable_fusion = false;
  FusionPlan plan = Planner(g, model, conservative).run();
  plan.log.insert(plan.log.begin(), log.begin(), log.end());
  plan.log.insert(plan.log.begin() + long(log.size()),
                  "tail bound: the " + broken +
                      " bound is broken: rolled back to the conservative (unfused) plan");
  return plan;
}

FusionPlan plan_from_user_groups(const graph::Graph& g, const CostModel& model,
                                 const std::vector<UserGroup>& groups,
                                 const PlannerOptions& options) {
  return Planner(g, model, options).run_user(groups);
}

std::vector<UserGroup> user_groups_from_plan_json(const std::string& text,
                                                  const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("groups") || !j["groups"].is_array()) {
    throw std::invalid_argument(source + ": a plan needs a \"groups\" array");
  }
  std::vector<UserGroup> out;
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    const auto& g = j["groups"][i];
    const std::string where = source + ": groups[" + std::to_string(i) + "]";
    if (!g.is_object() || !g.contains("nodes") || !g["nodes"].is_array()) {
      throw std::invalid_argument(where + ": needs a \"nodes\" array");
    }
    UserGroup u;
    for (const auto& n : g["nodes"]) {
      if (!n.is_string()) throw std::invalid_argument(where + ": node names are strings");
      u.nodes.push_back(n.get<std::string>());
    }
    const bool sched = g.contains("schedule") && g["schedule"].is_object();
    if (sched && g["schedule"].contains("tile_fraction")) {
      const auto& t = g["schedule"]["tile_fraction"];
      if (!t.is_number() || t.get<double>() <= 0 || t.get<double>() > 1) {
        throw std::invalid_argument(where + ": schedule.tile_fraction must be in (0, 1]");
      }
      u.tile_fraction = t.get<double>();
    }
    if (sched && g["schedule"].contains("vector_lanes")) {
      const auto& v = g["schedule"]["vector_lanes"];
      const bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 64 &&
                      (v.get<int64_t>() & (v.get<int64_t>() - 1)) == 0;
      if (!ok) {
        throw std::invalid_argument(where +
                                    ": schedule.vector_lanes must be 0 (the target's) or a "
                                    "power of two up to 64");
      }
      u.vector_lanes = v.get<int>();
    }
    if (sched && g["schedule"].contains("gpu_threads")) {
      const auto& t = g["schedule"]["gpu_threads"];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 1024 ||
          t.get<int64_t>() % 32 != 0) {
        throw std::invalid_argument(where + ": schedule.gpu_threads must be 0 (the stage's) or "
                                    "a multiple of 32 up to 1024");
      }
      u.gpu_threads = t.get<int>();
    }
    // The record stage checks what each placement and block means for its node.
    if (sched && g["schedule"].contains("placements")) {
      const auto& pl = g["schedule"]["placements"];
      if (!pl.is_object()) {
        throw std::invalid_argument(where + ": schedule.placements maps node names to placements");
      }
      for (const auto& [node, v] : pl.items()) {
        if (!v.is_string()) {
          throw std::invalid_argument(where + ": schedule.placements." + node +
                                      " must be a string");
        }
        u.placements[node] = v.get<std::string>();
      }
    }
    if (sched && g["schedule"].contains("blocks")) {
      const auto& bl = g["schedule"]["blocks"];
      if (!bl.is_object()) {
        throw std::invalid_argument(where + ": schedule.blocks maps anchors to register blocks");
      }
      for (const auto& item : bl.items()) {
        const std::string node = item.key();
        const auto& b = item.value();
        auto field = [&](const char* key, int64_t most) {
          if (!b.is_object() || !b.contains(key)) return 0;
          const auto& x = b[key];
          if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > most) {
            throw std::invalid_argument(where + ": schedule.blocks." + node + "." + key +
                                        " must be an integer in [1, " + std::to_string(most) +
                                        "]");
          }
          return x.get<int>();
        };
        u.blocks[node] = BlockRequest{field("rows", 64), field("vectors", 64),
                                      field("reduction_chunk", 1 << 20)};
      }
    }
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<UserGroup> user_groups_from_plan_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the plan");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  return user_groups_from_plan_json(text, path);
}

}  // namespace opfuse::fusion
