// The pattern matcher (7.2.2): a VF2-flavoured subgraph match of each rule's pattern, with
// the text's speed-ups:
//
//   1. feature index   nodes indexed by op, so a rule visits only nodes its first atom accepts;
//   2. pruning         a sibling pattern A || B || ... needs a tensor with that many consumers;
//                      repetition is greedy (maximal munch), and every extension keeps at most
//                      kMaxStates partial matches, so a pathological rule stays bounded;
//   3. incremental     a node already inside a match of the same rule is not used as a root
//                      again (the chain that contains it was found from its first node).
//
// With these the work is O(|V| * |P|) for the rule library, not O(|V|^|P|).
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/indexed_graph.h"
#include "fusion/pattern/pattern.h"

namespace opfuse::fusion {

// Partial matches kept per extension step (pruning bound; see above).
inline constexpr size_t kMaxStates = 16;

struct Match {
  std::string rule;
  double priority = 1;
  std::vector<size_t> nodes;                  // node indices, in match order
  std::vector<std::vector<size_t>> siblings;  // members of each '||' stage, if any
};

// All matches of the rules in `ig`, rule by rule, roots in topological order.
std::vector<Match> match_rules(const graph::IndexedGraph& ig, const std::vector<Rule>& rules);
std::vector<Match> match_rule(const graph::IndexedGraph& ig, const Rule& rule);

}  // namespace opfuse::fusion
