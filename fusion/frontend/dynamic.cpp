#include "fusion/frontend/dynamic.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "fusion/frontend/load_model.h"
#include "fusion/graph/op_schema.h"

namespace opfuse::fusion {

SymbolBehaviour compare_bindings(const graph::Graph& ga, int64_t a, const graph::Graph& gb,
                                 int64_t b, const std::string& symbol) {
  SymbolBehaviour r;
  r.symbol = symbol;
  auto refuse = [&](std::string why) {
    r.separable = false;
    r.why_not = std::move(why);
    return r;
  };
  const std::string at = " at " + symbol + "=" + std::to_string(a) + " and " + std::to_string(b);
  // The same graph at both sizes: the sizes may change shapes, never structure.
  if (ga.nodes().size() != gb.nodes().size()) {
    return refuse("the graph has " + std::to_string(ga.nodes().size()) + " and " +
                  std::to_string(gb.nodes().size()) + " nodes" + at);
  }
  for (size_t i = 0; i < ga.nodes().size(); ++i) {
    const graph::Node &na = ga.nodes()[i], &nb = gb.nodes()[i];
    if (na.name != nb.name || na.op != nb.op || na.inputs != nb.inputs || na.outputs != nb.outputs) {
      return refuse("node '" + na.name + "' (" + na.op + ") is node '" + nb.name + "' (" + nb.op +
                    ")" + at + ": the structure depends on " + symbol);
    }
  }
  if (ga.tensor_names() != gb.tensor_names() || ga.outputs() != gb.outputs()) {
    return refuse("the tensors differ" + at);
  }
  // Per tensor that depends on the symbol: the one axis whose size is k * symbol.
  struct Carried {
    int axis;
    int64_t k;
  };
  std::map<std::string, Carried> carries;
  for (const auto& name : ga.tensor_names()) {
    const graph::Shape &sa = ga.tensor(name).shape, &sb = gb.tensor(name).shape;
    if (sa == sb) continue;
    int axis = -1, changed = 0;
    for (size_t d = 0; d < sa.size() && sa.size() == sb.size(); ++d) {
      if (sa[d] != sb[d]) axis = int(d), ++changed;
    }
    const int64_t k = axis >= 0 ? (sb[size_t(axis)] - sa[size_t(axis)]) / (b - a) : 0;
    if (changed != 1 || k <= 0 || sa[size_t(axis)] != k * a || sb[size_t(axis)] != k * b) {
      return refuse("tensor '" + name + "' is " + graph::shape_to_string(sa) + " and " +
                    graph::shape_to_string(sb) + at + ": not one axis of k * " + symbol);
    }
    if (ga.tensor(name).kind == graph::TensorKind::param) {
      return refuse("weight '" + name + "' has a shape that depends on " + symbol);
    }
    carries[name] = {axis, k};
    r.tensors.push_back(name);
    if (ga.tensor(name).kind == graph::TensorKind::input) {
      if (axis != 0 || k != 1) {
        return refuse("input '" + name + "' has " + symbol + " on axis " + std::to_string(axis) +
                      ": only a first axis is split between calls");
      }
      r.inputs.push_back(name);
    }
  }
  // The elements before and after a tensor's symbol axis.
  auto outer = [&](const std::string& t) {
    int64_t p = 1;
    for (int d = 0; d < carries.at(t).axis; ++d) p *= ga.tensor(t).shape[size_t(d)];
    return p;
  };
  auto per_sample = [&](const std::string& t) {  // k times the elements after the axis
    const graph::Shape& s = ga.tensor(t).shape;
    int64_t p = carries.at(t).k;
    for (size_t d = size_t(carries.at(t).axis) + 1; d < s.size(); ++d) p *= s[d];
    return p;
  };
  for (size_t i : ga.topo_order()) {
    const graph::Node& n = ga.nodes()[i];
    bool in = false;
    for (const auto& t : n.inputs) in = in || carries.count(t);
    if (!in) continue;
    for (const auto& t : n.outputs) {
      if (!carries.count(t)) {
        return refuse("node '" + n.name + "' (" + n.op + ") reduces " + symbol + " away: '" + t +
                      "' is " + graph::shape_to_string(ga.tensor(t).shape) + " at every size");
      }
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const std::string& t = n.inputs[k];
      if (carries.count(t) && graph::couples_along(n, ga.tensor(t), k, carries.at(t).axis)) {
        return refuse("node '" + n.name + "' (" + n.op + ") reads across axis " +
                      std::to_string(carries.at(t).axis) + " of '" + t + "', which is " +
                      (carries.at(t).k == 1 ? "" : std::to_string(carries.at(t).k) + " * ") + symbol);
      }
    }
    // A reshape regroups elements in row-major order: each sample's elements stay together
    // when as many come before the symbol's axis and as many per sample after it.
    if (n.op == "reshape" && carries.count(n.inputs[0])) {
      const std::string &x = n.inputs[0], &y = n.outputs[0];
      if (outer(x) != outer(y) || per_sample(x) != per_sample(y)) {
        return refuse("node '" + n.name + "' (reshape " + graph::shape_to_string(ga.tensor(x).shape) +
                      " -> " + graph::shape_to_string(ga.tensor(y).shape) + at.substr(0, at.find(" and")) +
                      ") mixes the elements of different " + symbol + " indices");
      }
    }
  }
  for (const auto& out : ga.outputs()) {
    if (!carries.count(out)) {
      return refuse("output '" + out + "' is " + graph::shape_to_string(ga.tensor(out).shape) +
                    " at every size: it does not carry " + symbol);
    }
    if (carries.at(out).axis != 0 || carries.at(out).k != 1) {
      return refuse("output '" + out + "' has " + symbol + " on axis " +
                    std::to_string(carries.at(out).axis) + ": only a first axis is split between calls");
    }
    r.outputs.push_back(out);
  }
  if (r.inputs.empty()) return refuse("no input's shape depends on " + symbol);
  r.separable = true;
  return r;
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at != std::string::npos;) {
    const size_t comma = list.find(',', at);
    out.push_back(list.substr(at, comma == std::string::npos ? comma : comma - at));
    at = comma == std::string::npos ? comma : comma + 1;
  }
  return out;
}

DimRange parse_dim(const std::string& spec) {
  auto bad = [&](const std::string& why) -> DimRange {
    throw std::invalid_argument("--dim " + spec + ": " + why +
                                " (expected NAME=N, NAME=MIN..MAX or NAME=N1,N2,..., e.g. batch=1..64)");
  };
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return bad("no NAME=");
  DimRange r;
  r.symbol = spec.substr(0, eq);
  const std::string v = spec.substr(eq + 1);
  auto number = [&](const std::string& t) -> int64_t {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos) {
      bad("'" + t + "' is not a size");
    }
    const int64_t n = std::stoll(t);
    if (n < 1 || n > graph::kMaxElements) bad("a size is 1 to " + std::to_string(graph::kMaxElements));
    return n;
  };
  const size_t dots = v.find("..");
  if (v.find(',') != std::string::npos) {
    for (const auto& item : split_commas(v)) r.sizes.push_back(number(item));
    std::sort(r.sizes.begin(), r.sizes.end());
    if (std::adjacent_find(r.sizes.begin(), r.sizes.end()) != r.sizes.end()) bad("a size twice");
    r.min = r.sizes.front();
    r.max = r.sizes.back();
  } else if (dots == std::string::npos) {
    r.min = r.max = number(v);
  } else {
    r.min = number(v.substr(0, dots));
    r.max = number(v.substr(dots + 2));
    if (r.min > r.max) bad("the range is empty");
  }
  return r;
}

graph::DimBindings parse_bindings(const std::vector<std::string>& specs, const std::string& command) {
  graph::DimBindings dims;
  for (const auto& spec : specs) {
    const DimRange r = parse_dim(spec);
    if (r.min != r.max || !r.sizes.empty()) {
      throw std::invalid_argument("--dim " + spec + ": " + command + " takes one size");
    }
    dims[r.symbol] = r.min;
  }
  return dims;
}

SymbolBehaviour analyse_symbol(const std::string& path, const std::string& symbol,
                               const graph::DimBindings& others) {
  graph::DimBindings a = others, b = others;
  a[symbol] = 2;
  b[symbol] = 3;
  return compare_bindings(load_model(path, a), 2, load_model(path, b), 3, symbol);
}

}  // namespace opfuse::fusion
