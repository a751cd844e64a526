// Property tests on 1,000 random DAGs: the plan is a partition, every group is convex,
// horizontal members meet 7.1.2's three conditions, and the plan never costs more than the
// unfused one under the model.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <set>

#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/random_graph.h"
#include "fusion/planner/planner.h"

using namespace opfuse::fusion;
using namespace opfuse::graph;

TEST_CASE("planner properties on 1000 random DAGs") {
  const RooflineCostModel model(builtin_profile("epyc-avx512-2c"));
  int fused_somewhere = 0, horizontal_seen = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    RandomGraphOptions o;
    o.nodes = 5 + seed % 40;
    o.window = 2 + seed % 7;
    o.stateful_fraction = seed % 5 == 0 ? 0.2 : 0;
    const Graph g = random_graph(seed, o);
    const IndexedGraph ig(g);
    const FusionPlan p = plan_fusion(g, model);
    INFO("seed " << seed);

    // Every node in exactly one group.
    std::map<std::string, int> group_of;
    for (const auto& grp : p.groups) {
      for (const auto& n : grp.nodes) {
        CHECK(group_of.count(n) == 0);
        group_of[n] = grp.id;
      }
    }
    REQUIRE(group_of.size() == g.nodes().size());

    // No group creates a cycle: the quotient graph of groups is acyclic.
    std::map<int, std::set<int>> edges;
    for (const Node& n : g.nodes()) {
      for (const auto& in : n.inputs) {
        const int pr = ig.producer(in);
        if (pr >= 0 && group_of[ig.node(pr).name] != group_of[n.name]) {
          edges[group_of[ig.node(pr).name]].insert(group_of[n.name]);
        }
      }
    }
    std::map<int, int> state;  // 0 new, 1 on stack, 2 done
    std::function<bool(int)> acyclic = [&](int v) {
      state[v] = 1;
      for (int w : edges[v]) {
        if (state[w] == 1 || (state[w] == 0 && !acyclic(w))) return false;
      }
      state[v] = 2;
      return true;
    };
    for (const auto& grp : p.groups) {
      if (state[grp.id] == 0) CHECK(acyclic(grp.id));
    }

    for (const auto& grp : p.groups) {
      if (grp.nodes.size() > 1) ++fused_somewhere;
      // Stateful nodes stay alone (pitfall 4).
      for (const auto& n : grp.nodes) {
        const Node* node = nullptr;
        for (const Node& m : g.nodes()) {
          if (m.name == n) node = &m;
        }
        if (node->attrs.count("stateful")) CHECK(grp.nodes.size() == 1);
      }
      // Resources within R_max.
      if (grp.nodes.size() > 1) {
        CHECK(grp.estimate.vector_registers <= model.register_limit());
        CHECK(grp.estimate.onchip_bytes <= model.onchip_limit_bytes() * (1 + 1e-9));
      }
      if (grp.kind != GroupKind::horizontal && grp.kind != GroupKind::mixed) continue;
      ++horizontal_seen;
      // 7.1.2: members not connected by a path inside the group are connected through
      // shared inputs (condition 1); no path between them (condition 2) is the acyclic
      // quotient above plus the group's convexity; condition 3 was checked above.
      std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
      std::map<std::string, std::string> parent;
      std::function<std::string(const std::string&)> find = [&](const std::string& x) {
        return parent[x] == x ? x : parent[x] = find(parent[x]);
      };
      for (const auto& m : members) parent[m] = m;
      std::map<std::string, std::string> reader;
      for (const Node& n : g.nodes()) {
        if (!members.count(n.name)) continue;
        for (const auto& in : n.inputs) {
          if (g.tensor(in).kind == TensorKind::param) continue;
          const int pr = ig.producer(in);
          if (pr >= 0 && members.count(ig.node(pr).name))
            parent[find(n.name)] = find(ig.node(pr).name);
          if (reader.count(in)) parent[find(n.name)] = find(reader[in]);
          reader[in] = n.name;
        }
      }
      std::set<std::string> roots;
      for (const auto& m : members) roots.insert(find(m));
      CHECK(roots.size() == 1);
    }

    // Never worse than unfused.
    CHECK(p.fused_time_s <= p.unfused_time_s * (1 + 1e-12));
  }
  CHECK(fused_somewhere > 500);
  CHECK(horizontal_seen > 10);
}
