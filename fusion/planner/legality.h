// Legality of a fused group. Every check answers with a FusionDecision that carries its
// reason, so "why didn't this fuse?" always has an answer in the decision log.
//
//   is_convex                   fusing must not create a cycle through an outside node
//                               (a dependence conflict, 7.2.3)
//   has_no_side_effects         hidden state, in-place updates and aliasing are never fused
//                               across (pitfall 4): nodes marked "stateful", "inplace" or
//                               "aliases" stay alone
//   windows_read_private_inputs a window op (conv, pool) computed at its producer's tile needs
//                               that producer to itself; with other consumers the producer is
//                               materialised instead of being recomputed per consumer
//   anchors_have_no_prologue    an elementwise op is fused after an anchor (conv, matmul,
//                               linear), never before it: inlined into the anchor's operand it
//                               would be evaluated at every use of each element (Cout*kh*kw
//                               times for a conv), as TVM's out-elementwise-fusable kind says.
//                               Measured: the zoo's perception normalise (sub, div) fused into
//                               its first conv ran 2.8x slower than apart (`opfuse explore`).
//                               Computed per tile instead of inlined, it saved nothing either:
//                               EfficientNet-B0's squeeze-excite scales in their projection
//                               convs' tiles, 6.41 ms against 6.37 (JIT, 2 Zen 4 cores)
//   fits_resources              R(group) <= R_max: registers and on-chip bytes (7.1.2, the
//                               over-fusion guard of pitfall 1), at most max_group_ops ops, and
//                               a working set within the profile's memory
//   siblings_share_input        horizontal fusion needs a shared input (7.1.2 condition 1);
//                               no path between the siblings is convexity (condition 2)
#pragma once

#include <string>
#include <vector>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/indexed_graph.h"

namespace opfuse::fusion {

struct FusionDecision {
  bool ok = true;
  std::string reason;
  static FusionDecision yes() { return {true, ""}; }
  static FusionDecision no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
  // The first failing decision wins: a && b evaluates b only if a holds.
  template <typename Next>
  FusionDecision and_then(Next next) const {
    return ok ? next() : *this;
  }
};

// Ops per fused group, at most: Halide's compile time grows with the pipeline's size, and
// past a few dozen stages a fused kernel spills and is hard to debug (pitfall 1). TVM's
// max_fuse_depth defaults to 256 for its simpler kernels; 64 is this planner's default.
inline constexpr size_t kDefaultMaxGroupOps = 64;

class Legality {
 public:
  Legality(const graph::IndexedGraph& ig, const CostModel& model, size_t max_group_ops)
      : ig_(ig), model_(model), max_group_ops_(max_group_ops) {}

  FusionDecision is_convex(const std::vector<size_t>& group) const;
  FusionDecision has_no_side_effects(const std::vector<size_t>& group) const;
  FusionDecision windows_read_private_inputs(const std::vector<size_t>& group) const;
  FusionDecision anchors_have_no_prologue(const std::vector<size_t>& group) const;
  FusionDecision fits_resources(const std::vector<size_t>& group, const GroupEstimate& e) const;
  FusionDecision siblings_share_input(const std::vector<size_t>& a,
                                      const std::vector<size_t>& b) const;
  // All of the group checks, in the order above.
  FusionDecision can_form_group(const std::vector<size_t>& group, const GroupEstimate& e) const;

  static bool has_side_effects(const graph::Node& n);
  static bool is_anchor(const graph::Node& n);

 private:
  const graph::IndexedGraph& ig_;
  const CostModel& model_;
  size_t max_group_ops_;
};

}  // namespace opfuse::fusion
