#include "fusion/planner/plan.h"

#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace opfuse::fusion {

using json = nlohmann::ordered_json;

const char* to_string(GroupKind k) {
  switch (k) {
    case GroupKind::single:
      return "single";
    case GroupKind::vertical:
      return "vertical";
    case GroupKind::horizontal:
      return "horizontal";
    default:
      return "mixed";
  }
}

const FusedGroup* FusionPlan::group_of(const std::string& node) const {
  for (const FusedGroup& g : groups) {
    for (const auto& n : g.nodes) {
      if (n == node) return &g;
    }
  }
  return nullptr;
}

std::string plan_to_json(const FusionPlan& p) {
  json j;
  j["format"] = "opfuse.plan";
  j["version"] = 1;
  j["graph"] = p.graph;
  j["profile"] = p.profile;
  j["cost_model"] = p.cost_model;
  j["summary"] = {{"kernels_unfused",
                   [&] {
                     size_t n = 0;
                     for (const auto& g : p.groups) n += g.nodes.size();
                     return n;
                   }()},
                  {"kernels_fused", p.groups.size()},
                  {"unfused_time_s", p.unfused_time_s},
                  {"fused_time_s", p.fused_time_s},
                  {"predicted_speedup", p.fused_time_s > 0 ? p.unfused_time_s / p.fused_time_s : 0},
                  {"unfused_bytes", p.unfused_bytes},
                  {"fused_bytes", p.fused_bytes},
                  {"bandwidth_saving", p.bandwidth_saving},
                  {"critical_path_s", p.critical_path_s},
                  {"latency_bound_s", p.latency_bound_s},
                  {"latency_bound_met", p.latency_bound_met}};
  j["groups"] = json::array();
  for (const FusedGroup& g : p.groups) {
    const GroupEstimate& e = g.estimate;
    json jg;
    jg["id"] = g.id;
    jg["kind"] = to_string(g.kind);
    jg["nodes"] = g.nodes;
    jg["rule"] = g.rule;
    jg["score"] = g.score;
    jg["on_critical_path"] = g.on_critical_path;
    jg["estimate"] = {{"flops", e.flops},
                      {"recompute_factor", e.recompute_factor},
                      {"boundary_in_bytes", e.boundary_in_bytes},
                      {"boundary_out_bytes", e.boundary_out_bytes},
                      {"intermediate_bytes", e.intermediate_bytes},
                      {"working_set_bytes", e.working_set_bytes},
                      {"intensity_flop_per_byte", e.intensity},
                      {"attainable_flops", e.attainable_flops},
                      {"bound", to_string(e.bound)},
                      {"t_compute_s", e.t_compute_s},
                      {"t_memory_s", e.t_memory_s},
                      {"t_overhead_s", e.t_overhead_s},
                      {"t_total_s", e.t_total_s},
                      {"unfused_time_s", g.unfused_time_s},
                      {"vector_registers", e.vector_registers},
                      {"onchip_bytes", e.onchip_bytes}};
    // What a calibration fits the anchor classes' efficiencies on (bench/networks/calibrate.py).
    jg["estimate"]["flops_by_class"] = e.flops_by_class;
    // The requests; the schedule stage's plan_to_json adds the records they give.
    jg["schedule"] = {{"tile_fraction", g.request.tile_fraction},
                      {"prefetch_distance", g.request.prefetch_distance},
                      {"vector_lanes", g.request.vector_lanes}};
    if (g.request.gpu_threads > 0) jg["schedule"]["gpu_threads"] = g.request.gpu_threads;
    if (!g.request.placements.empty()) jg["schedule"]["placements"] = g.request.placements;
    for (const auto& [node, b] : g.request.blocks) {
      json jb = json::object();
      if (b.rows > 0) jb["rows"] = b.rows;
      if (b.vectors > 0) jb["vectors"] = b.vectors;
      if (b.reduction_chunk > 0) jb["reduction_chunk"] = b.reduction_chunk;
      jg["schedule"]["blocks"][node] = jb;
    }
    jg["reasons"] = g.reasons;
    j["groups"].push_back(jg);
  }
  j["log"] = p.log;
  return j.dump(2) + "\n";
}

std::string plan_to_dot(const FusionPlan& p, const graph::Graph& g,
                        const std::map<std::string, std::string>& notes) {
  auto color = [](GroupKind k) {
    switch (k) {
      case GroupKind::vertical:
        return "#cfe8ff";
      case GroupKind::horizontal:
        return "#ffe0b3";
      case GroupKind::mixed:
        return "#d9f2d0";
      default:
        return "#eeeeee";
    }
  };
  std::map<std::string, std::string> op_of;
  for (const graph::Node& n : g.nodes()) op_of[n.name] = n.op;
  std::ostringstream os;
  os << "digraph \"" << p.graph
     << "\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fillcolor=white];\n";
  for (const FusedGroup& grp : p.groups) {
    os << "  subgraph cluster_" << grp.id << " {\n    style=filled; fillcolor=\"" << color(grp.kind)
       << "\";\n    label=\"group " << grp.id << ": " << to_string(grp.kind)
       << (grp.rule.empty() ? "" : " (" + grp.rule + ")") << "\\n"
       << std::setprecision(3) << grp.estimate.t_total_s * 1e6 << " us, "
       << to_string(grp.estimate.bound) << "-bound\";\n";
    for (const auto& n : grp.nodes) {
      auto note = notes.find(n);
      os << "    \"" << n << "\" [label=\"" << n << "\\n" << op_of[n]
         << (note == notes.end() ? "" : "\\n" + note->second) << "\"];\n";
    }
    os << "  }\n";
  }
  for (const graph::Node& n : g.nodes()) {
    for (const auto& in : n.inputs) {
      if (const graph::Node* p2 = g.producer(in))
        os << "  \"" << p2->name << "\" -> \"" << n.name << "\";\n";
    }
  }
  os << "}\n";
  return os.str();
}

std::string plan_to_table(const FusionPlan& p) {
  std::ostringstream os;
  os << std::fixed;
  os << "plan for '" << p.graph << "' on " << p.profile << " (" << p.cost_model << " model)\n";
  os << "  " << std::left << std::setw(4) << "grp" << std::setw(11) << "kind" << std::setw(20)
     << "rule" << std::setw(10) << "bound" << std::right << std::setw(12) << "fused us"
     << std::setw(12) << "unfused us"
     << "  nodes\n";
  for (const FusedGroup& g : p.groups) {
    std::string nodes;
    for (const auto& n : g.nodes) nodes += (nodes.empty() ? "" : " ") + n;
    os << "  " << std::left << std::setw(4) << g.id << std::setw(11) << to_string(g.kind)
       << std::setw(20) << (g.rule.empty() ? "-" : g.rule) << std::setw(10)
       << to_string(g.estimate.bound) << std::right << std::setprecision(2) << std::setw(12)
       << g.estimate.t_total_s * 1e6 << std::setw(12) << g.unfused_time_s * 1e6 << "  " << nodes
       << (g.on_critical_path ? "  [critical]" : "") << "\n";
    for (const auto& r : g.reasons) os << "        why: " << r << "\n";
  }
  size_t ops = 0;
  for (const auto& g : p.groups) ops += g.nodes.size();
  os << std::setprecision(2) << "  kernels " << ops << " -> " << p.groups.size() << ", predicted "
     << p.unfused_time_s * 1e6 << " us -> " << p.fused_time_s * 1e6 << " us (x"
     << (p.fused_time_s > 0 ? p.unfused_time_s / p.fused_time_s : 0.0) << "), bytes "
     << p.unfused_bytes / 1e6 << " MB -> " << p.fused_bytes / 1e6
     << " MB (eta = " << std::setprecision(3) << p.bandwidth_saving << ")\n";
  if (p.latency_bound_s > 0) {
    os << "  critical path " << p.critical_path_s * 1e6 << " us vs L_max "
       << p.latency_bound_s * 1e6 << " us: " << (p.latency_bound_met ? "met" : "NOT met") << "\n";
  }
  return os.str();
}

}  // namespace opfuse::fusion
