#include "fusion/pattern/matcher.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace opfuse::fusion {
namespace {

using graph::IndexedGraph;

struct State {
  bool started = false;
  size_t seed = 0;  // the root node, before anything matched
  std::vector<size_t> nodes;
  std::vector<size_t> frontier;  // nodes whose outputs the next stage consumes
  std::vector<std::vector<size_t>> siblings;
  bool contains(size_t n) const { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); }
};

class Matcher {
 public:
  explicit Matcher(const IndexedGraph& ig) : ig_(ig) {}

  std::vector<State> extend(const Pattern& p, const State& s) {
    std::vector<State> out;
    switch (p.kind) {
      case Pattern::Kind::atom:
        out = atom(p, s);
        break;
      case Pattern::Kind::seq: {
        std::vector<State> cur{s};
        for (const Pattern& c : p.children) {
          std::vector<State> next;
          for (const State& st : cur) {
            for (State& r : extend(c, st)) {
              if (next.size() < kMaxStates) next.push_back(std::move(r));
            }
          }
          cur = std::move(next);
          if (cur.empty()) break;
        }
        out = std::move(cur);
        break;
      }
      case Pattern::Kind::alt:
        for (const Pattern& c : p.children) {
          for (State& r : extend(c, s)) {
            if (out.size() < kMaxStates) out.push_back(std::move(r));
          }
        }
        break;
      case Pattern::Kind::star:
      case Pattern::Kind::plus:
        out = repeat(p, s);
        break;
      case Pattern::Kind::par:
        out = par(p, s);
        break;
    }
    return out;
  }

 private:
  std::vector<size_t> candidates(const State& s) const {
    if (!s.started) return {s.seed};
    std::vector<size_t> c;
    for (size_t f : s.frontier) {
      for (size_t n : ig_.succs(f)) {
        if (!s.contains(n) && std::find(c.begin(), c.end(), n) == c.end()) c.push_back(n);
      }
    }
    return c;
  }

  std::vector<State> atom(const Pattern& p, const State& s) {
    std::vector<State> out;
    for (size_t n : candidates(s)) {
      if (!atom_matches(p.name, ig_.node(n), ig_.kind(n))) continue;
      State r = s;
      r.started = true;
      r.nodes.push_back(n);
      r.frontier = {n};
      out.push_back(std::move(r));
      if (out.size() >= kMaxStates) break;
    }
    return out;
  }

  // Greedy repetition: the longest chain wins (maximal munch); P* may also match nothing.
  std::vector<State> repeat(const Pattern& p, const State& s) {
    State cur = s;
    bool any = false;
    while (true) {
      std::vector<State> next = extend(p.children[0], cur);
      if (next.empty()) break;
      // Prefer the extension that matched the most nodes.
      auto best = std::max_element(next.begin(), next.end(), [](const State& a, const State& b) {
        return a.nodes.size() < b.nodes.size();
      });
      if (best->nodes.size() == cur.nodes.size()) break;
      cur = std::move(*best);
      any = true;
    }
    if (!any && p.kind == Pattern::Kind::plus) return {};
    return {cur};
  }

  // A || B || ...: distinct branches, each starting at a consumer of one shared tensor.
  std::vector<State> par(const Pattern& p, const State& s) {
    std::vector<std::string> tensors;
    if (s.started) {
      for (size_t f : s.frontier) tensors.push_back(ig_.node(f).outputs[0]);
    } else {
      for (const auto& in : ig_.node(s.seed).inputs) tensors.push_back(in);
    }
    std::vector<State> out;
    for (const std::string& t : tensors) {
      const std::vector<size_t>& users = ig_.consumers(t);
      if (users.size() < p.children.size()) continue;  // pruning by degree
      State acc = s;
      acc.started = true;
      std::vector<size_t> frontier;
      std::vector<size_t> members;
      bool ok = true;
      for (size_t b = 0; b < p.children.size() && ok; ++b) {
        ok = false;
        for (size_t u : users) {
          if (acc.contains(u)) continue;
          if (!s.started && b == 0 && u != s.seed) continue;  // the root is the first branch
          State branch;
          branch.seed = u;
          branch.nodes = acc.nodes;  // so a branch cannot reuse matched nodes
          std::vector<State> r = extend(p.children[b], branch);
          if (r.empty()) continue;
          const State& got = r.front();
          for (size_t k = acc.nodes.size(); k < got.nodes.size(); ++k)
            acc.nodes.push_back(got.nodes[k]);
          frontier.insert(frontier.end(), got.frontier.begin(), got.frontier.end());
          members.push_back(u);
          ok = true;
          break;
        }
      }
      if (!ok) continue;
      acc.frontier = frontier;
      acc.siblings.push_back(members);
      out.push_back(std::move(acc));
      if (out.size() >= kMaxStates) break;
    }
    return out;
  }

  const IndexedGraph& ig_;
};

}  // namespace

std::vector<Match> match_rule(const IndexedGraph& ig, const Rule& rule) {
  // Step 1: candidate roots from the op index.
  const std::vector<std::string> first = first_atoms(rule.pattern);
  std::vector<Match> matches;
  std::vector<bool> covered(ig.size(), false);
  Matcher m(ig);
  for (size_t n : ig.topo()) {
    if (covered[n]) continue;  // incremental: already inside a match of this rule
    bool possible = false;
    for (const auto& a : first) possible = possible || atom_matches(a, ig.node(n), ig.kind(n));
    if (!possible) continue;
    // Step 2: recursive match from this root; keep the largest result.
    State seed;
    seed.seed = n;
    std::vector<State> found = m.extend(rule.pattern, seed);
    if (found.empty()) continue;
    auto best = std::max_element(found.begin(), found.end(), [](const State& a, const State& b) {
      return a.nodes.size() < b.nodes.size();
    });
    if (best->nodes.empty()) continue;
    Match match;
    match.rule = rule.name;
    match.priority = rule.priority;
    match.nodes = best->nodes;
    match.siblings = best->siblings;
    for (size_t k : match.nodes) covered[k] = true;
    matches.push_back(std::move(match));
  }
  return matches;
}

std::vector<Match> match_rules(const IndexedGraph& ig, const std::vector<Rule>& rules) {
  std::vector<Match> all;
  for (const Rule& r : rules) {
    std::vector<Match> m = match_rule(ig, r);
    all.insert(all.end(), m.begin(), m.end());
  }
  return all;
}

}  // namespace opfuse::fusion
