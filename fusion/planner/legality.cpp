#include "fusion/graph/op_schema.h"
#include "fusion/planner/legality.h"

#include <algorithm>
#include <unordered_set>

namespace opfuse::fusion {

bool Legality::has_side_effects(const graph::Node& n) {
  for (const char* key : {"stateful", "inplace", "aliases"}) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) continue;
    if (auto v = std::get_if<int64_t>(&it->second); !v || *v != 0) return true;
  }
  return false;
}

bool Legality::is_anchor(const graph::Node& n) {
  return graph::has_trait(n.op, graph::OpTrait::anchor);
}

FusionDecision Legality::is_convex(const std::vector<size_t>& group) const {
  // A path that leaves the group and re-enters it makes the fused kernel depend on itself.
  // Search forward from the group's outside consumers; nodes after the group's last node in
  // topological order cannot lead back into it, so the search stops there.
  std::unordered_set<size_t> in(group.begin(), group.end());
  size_t last = 0;
  for (size_t n : group) last = std::max(last, ig_.topo_pos(n));
  std::vector<size_t> stack;
  std::unordered_set<size_t> seen;
  for (size_t n : group) {
    for (size_t s : ig_.succs(n)) {
      if (!in.count(s) && ig_.topo_pos(s) < last && seen.insert(s).second) stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const size_t u = stack.back();
    stack.pop_back();
    for (size_t s : ig_.succs(u)) {
      if (in.count(s)) {
        return FusionDecision::no("not convex: path " + ig_.node(u).name + " -> " +
                                  ig_.node(s).name + " leaves the group and re-enters it");
      }
      if (ig_.topo_pos(s) < last && seen.insert(s).second) stack.push_back(s);
    }
  }
  return FusionDecision::yes();
}

FusionDecision Legality::has_no_side_effects(const std::vector<size_t>& group) const {
  if (group.size() < 2) return FusionDecision::yes();
  for (size_t n : group) {
    if (has_side_effects(ig_.node(n))) {
      return FusionDecision::no("node '" + ig_.node(n).name +
                                "' has hidden state, updates in place or aliases: never fused");
    }
  }
  return FusionDecision::yes();
}

FusionDecision Legality::windows_read_private_inputs(const std::vector<size_t>& group) const {
  std::unordered_set<size_t> in(group.begin(), group.end());
  for (size_t n : group) {
    const graph::Node& node = ig_.node(n);
    if (!graph::has_trait(node.op, graph::OpTrait::window)) continue;
    const std::string& x = node.inputs[0];
    const int p = ig_.producer(x);
    if (p < 0 || !in.count(size_t(p))) continue;
    if (ig_.consumers(x).size() != 1 || ig_.is_graph_output(x)) {
      return FusionDecision::no("window op '" + node.name + "' would be computed at the tile of '" +
                                ig_.node(p).name + "', whose output has other consumers");
    }
  }
  return FusionDecision::yes();
}

FusionDecision Legality::anchors_have_no_prologue(const std::vector<size_t>& group) const {
  std::unordered_set<size_t> in(group.begin(), group.end());
  for (size_t n : group) {
    const graph::Node& node = ig_.node(n);
    if (!is_anchor(node)) continue;
    for (size_t k = 0; k < node.inputs.size() && k < 2; ++k) {  // the operands, not a bias
      const int p = ig_.producer(node.inputs[k]);
      if (p < 0 || !in.count(size_t(p))) continue;
      const auto kind = ig_.kind(size_t(p));
      if (kind == graph::FusionKind::elementwise || kind == graph::FusionKind::broadcast) {
        return FusionDecision::no("elementwise '" + ig_.node(size_t(p)).name +
                                  "' would be inlined into anchor '" + node.name +
                                  "' and evaluated at every use of its operand; it fuses "
                                  "after an anchor, not before");
      }
    }
  }
  return FusionDecision::yes();
}

FusionDecision Legality::fits_resources(const std::vector<size_t>& group,
                                        const GroupEstimate& e) const {
  if (group.size() > max_group_ops_) {
    return FusionDecision::no(std::to_string(group.size()) + " ops exceed the limit of " +
                              std::to_string(max_group_ops_) + " per group");
  }
  if (group.size() > 1 && e.vector_registers > model_.register_limit()) {
    return FusionDecision::no("needs ~" + std::to_string(e.vector_registers) +
                              " registers, R_max is " + std::to_string(model_.register_limit()));
  }
  if (group.size() > 1 && e.working_set_bytes > model_.profile().main_memory().size_bytes) {
    return FusionDecision::no("working set of " + std::to_string(int64_t(e.working_set_bytes)) +
                              " bytes exceeds the profile's memory");
  }
  if (group.size() > 1 && e.onchip_bytes > model_.onchip_limit_bytes() * (1 + 1e-9)) {
    return FusionDecision::no("tiles need " + std::to_string(int64_t(e.onchip_bytes)) +
                              " bytes on chip, more than " +
                              std::to_string(int64_t(model_.onchip_limit_bytes())));
  }
  return FusionDecision::yes();
}

FusionDecision Legality::siblings_share_input(const std::vector<size_t>& a,
                                              const std::vector<size_t>& b) const {
  std::unordered_set<std::string> inputs;
  for (size_t n : a) inputs.insert(ig_.node(n).inputs.begin(), ig_.node(n).inputs.end());
  for (size_t n : b) {
    for (const auto& t : ig_.node(n).inputs) {
      if (inputs.count(t) && ig_.graph().tensor(t).kind != graph::TensorKind::param) {
        return FusionDecision::yes();
      }
    }
  }
  return FusionDecision::no("siblings share no input");
}

FusionDecision Legality::can_form_group(const std::vector<size_t>& group,
                                        const GroupEstimate& e) const {
  return has_no_side_effects(group)
      .and_then([&] { return is_convex(group); })
      .and_then([&] { return windows_read_private_inputs(group); })
      .and_then([&] { return anchors_have_no_prologue(group); })
      .and_then([&] { return fits_resources(group, e); });
}

}  // namespace opfuse::fusion
