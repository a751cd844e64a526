#include "fusion/graph/json_io.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace opfuse::graph {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& source, const std::string& path, const std::string& what) {
  throw GraphError(source + ": " + path + ": " + what);
}

void only_keys(const json& j, const std::string& source, const std::string& path,
               const std::set<std::string>& allowed) {
  if (!j.is_object()) bad(source, path, "expected an object");
  for (const auto& [k, v] : j.items()) {
    if (!allowed.count(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      bad(source, path, "unknown key '" + k + "' (allowed: " + list + ")");
    }
  }
}

const json& need(const json& j, const std::string& key, const std::string& source,
                 const std::string& path) {
  if (!j.contains(key)) bad(source, path, "missing key '" + key + "'");
  return j.at(key);
}

std::string get_string(const json& j, const std::string& source, const std::string& path) {
  if (!j.is_string()) bad(source, path, "expected a string, got " + j.dump());
  return j.get<std::string>();
}

std::vector<std::string> get_strings(const json& j, const std::string& source,
                                     const std::string& path) {
  if (!j.is_array()) bad(source, path, "expected an array of names");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    out.push_back(get_string(j[i], source, path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

Shape get_shape(const json& j, const std::string& source, const std::string& path) {
  if (!j.is_array()) bad(source, path, "expected an array of extents");
  Shape s;
  for (const auto& d : j) {
    if (!d.is_number_integer()) bad(source, path, "extents must be integers, got " + j.dump());
    s.push_back(d.get<int64_t>());
  }
  return s;
}

AttrValue get_attr(const json& j, const std::string& source, const std::string& path) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array()) {
    bool all_int = true;
    for (const auto& e : j) {
      if (!e.is_number()) bad(source, path, "attribute lists hold numbers only, got " + j.dump());
      all_int = all_int && e.is_number_integer();
    }
    if (all_int) return j.get<std::vector<int64_t>>();
    return j.get<std::vector<double>>();
  }
  bad(source, path, "an attribute is a number, a string or a list of numbers, got " + j.dump());
}

// Pretty JSON with arrays of scalars (shapes, attribute lists, data) kept on one line.
void write_json(std::ostream& os, const json& j, int indent) {
  const std::string pad(indent + 1, ' ');
  auto scalar_array = [](const json& a) {
    return std::all_of(a.begin(), a.end(), [](const json& e) { return e.is_primitive(); });
  };
  if (j.is_object() && !j.empty()) {
    os << "{\n";
    size_t i = 0;
    for (const auto& [k, v] : j.items()) {
      os << pad << json(k).dump() << ": ";
      write_json(os, v, indent + 1);
      os << (++i < j.size() ? ",\n" : "\n");
    }
    os << std::string(indent, ' ') << "}";
  } else if (j.is_array() && !j.empty() && !scalar_array(j)) {
    os << "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      os << pad;
      write_json(os, j[i], indent + 1);
      os << (i + 1 < j.size() ? ",\n" : "\n");
    }
    os << std::string(indent, ' ') << "]";
  } else {
    os << j.dump();
  }
}

json attr_to_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

}  // namespace

Graph graph_from_json_string(const std::string& text, const std::string& source,
                             const DimBindings& dims) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw GraphError(source + ": not valid JSON: " + e.what());
  }
  only_keys(j, source, "$", {"format", "version", "name", "inputs", "params", "nodes", "outputs"});
  if (get_string(need(j, "format", source, "$"), source, "$.format") != "opfuse.graph") {
    bad(source, "$.format", "expected \"opfuse.graph\"");
  }
  const json& ver = need(j, "version", source, "$");
  if (!ver.is_number_integer() || ver.get<int64_t>() != kGraphFormatVersion) {
    bad(source, "$.version",
        "unsupported version " + ver.dump() + " (this opfuse reads " +
            std::to_string(kGraphFormatVersion) + ")");
  }
  Graph g;
  g.name = get_string(need(j, "name", source, "$"), source, "$.name");

  const json& inputs = need(j, "inputs", source, "$");
  if (!inputs.is_array()) bad(source, "$.inputs", "expected an array");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = "$.inputs[" + std::to_string(i) + "]";
    only_keys(inputs[i], source, p, {"name", "shape", "dtype", "layout", "dim_names"});
    Tensor t;
    t.kind = TensorKind::input;
    t.name = get_string(need(inputs[i], "name", source, p), source, p + ".name");
    // An extent is a number, or a symbol's name bound from `dims` ("shape": ["batch", 3, 224,
    // 224]); a saved bound graph writes the sizes and the names ("dim_names").
    const json& shape = need(inputs[i], "shape", source, p);
    if (!shape.is_array()) bad(source, p + ".shape", "expected an array of extents");
    for (size_t a = 0; a < shape.size(); ++a) {
      if (shape[a].is_string()) {
        const std::string sym = shape[a].get<std::string>();
        if (sym.empty()) bad(source, p + ".shape", "a dimension's name is empty");
        t.shape.push_back(bind_dim(source, t.name, a, sym, dims));
        t.dim_names.resize(shape.size());
        t.dim_names[a] = sym;
      } else if (shape[a].is_number_integer()) {
        t.shape.push_back(shape[a].get<int64_t>());
      } else {
        bad(source, p + ".shape", "extents are integers or names, got " + shape.dump());
      }
    }
    if (inputs[i].contains("dim_names")) {
      if (!t.dim_names.empty()) bad(source, p, "names in \"shape\" and \"dim_names\" both");
      t.dim_names = get_strings(inputs[i]["dim_names"], source, p + ".dim_names");
      if (t.dim_names.size() != t.shape.size()) {
        bad(source, p + ".dim_names", "one name (or \"\") per axis of the shape");
      }
      // A graph saved at one size stays at it: another size for it is an error, not ignored.
      for (size_t a = 0; a < t.shape.size(); ++a) {
        const auto it = t.dim_names[a].empty() ? dims.end() : dims.find(t.dim_names[a]);
        if (it != dims.end() && it->second != t.shape[a]) {
          bad(source, p, "was saved at " + t.dim_names[a] + " = " + std::to_string(t.shape[a]) +
                             ", not " + std::to_string(it->second) + " (its shape is fixed)");
        }
      }
    }
    try {
      if (inputs[i].contains("dtype"))
        t.dtype = dtype_from_string(inputs[i]["dtype"].get<std::string>());
      if (inputs[i].contains("layout"))
        t.layout = layout_from_string(inputs[i]["layout"].get<std::string>());
    } catch (const json::exception&) {
      bad(source, p, "dtype and layout are strings");
    } catch (const GraphError& e) {
      bad(source, p, e.what());
    }
    try {
      g.add_tensor(std::move(t));
    } catch (const GraphError& e) {
      bad(source, p, e.what());
    }
  }

  check_bindings_used(g, dims, source);

  if (j.contains("params")) {
    const json& params = j["params"];
    if (!params.is_array()) bad(source, "$.params", "expected an array");
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string p = "$.params[" + std::to_string(i) + "]";
      only_keys(params[i], source, p, {"name", "shape", "init", "data"});
      Tensor t;
      t.kind = TensorKind::param;
      t.name = get_string(need(params[i], "name", source, p), source, p + ".name");
      t.shape = get_shape(need(params[i], "shape", source, p), source, p + ".shape");
      if (params[i].contains("init")) {
        const json& init = params[i]["init"];
        if (!init.is_array() || init.size() != 2 || !init[0].is_number() || !init[1].is_number()) {
          bad(source, p + ".init", "expected [lo, hi], got " + init.dump());
        }
        t.init = {init[0].get<double>(), init[1].get<double>()};
      }
      if (params[i].contains("data")) {
        const json& data = params[i]["data"];
        if (!data.is_array()) bad(source, p + ".data", "expected an array of numbers");
        for (const auto& v : data) {
          if (!v.is_number()) bad(source, p + ".data", "expected numbers only");
          t.data.push_back(v.get<float>());
        }
      }
      try {
        g.add_tensor(std::move(t));
      } catch (const GraphError& e) {
        bad(source, p, e.what());
      }
    }
  }

  const json& nodes = need(j, "nodes", source, "$");
  if (!nodes.is_array()) bad(source, "$.nodes", "expected an array");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string p = "$.nodes[" + std::to_string(i) + "]";
    only_keys(nodes[i], source, p, {"name", "op", "inputs", "outputs", "attrs"});
    Node n;
    n.name = get_string(need(nodes[i], "name", source, p), source, p + ".name");
    n.op = get_string(need(nodes[i], "op", source, p), source, p + ".op");
    n.inputs = get_strings(need(nodes[i], "inputs", source, p), source, p + ".inputs");
    n.outputs = nodes[i].contains("outputs")
                    ? get_strings(nodes[i]["outputs"], source, p + ".outputs")
                    : std::vector<std::string>{n.name};
    if (nodes[i].contains("attrs")) {
      const json& attrs = nodes[i]["attrs"];
      if (!attrs.is_object()) bad(source, p + ".attrs", "expected an object");
      for (const auto& [k, v] : attrs.items()) {
        n.attrs[k] = get_attr(v, source, p + ".attrs." + k);
      }
    }
    try {
      g.add_node(std::move(n));
    } catch (const GraphError& e) {
      bad(source, p, e.what());
    }
  }
  for (const std::string& out : get_strings(need(j, "outputs", source, "$"), source, "$.outputs")) {
    try {
      g.mark_output(out);
    } catch (const GraphError& e) {
      bad(source, "$.outputs", e.what());
    }
  }
  try {
    g.validate();
  } catch (const GraphError& e) {
    throw GraphError(source + ": " + e.what());
  }
  return g;
}

Graph load_graph_json(const std::string& path, const DimBindings& dims) {
  std::ifstream in(path);
  if (!in) throw GraphError(path + ": cannot open the graph file");
  std::stringstream ss;
  ss << in.rdbuf();
  return graph_from_json_string(ss.str(), path, dims);
}

std::vector<std::pair<std::string, std::vector<std::string>>> json_input_dims(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) throw GraphError(path + ": cannot open the graph file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw GraphError(path + ": not valid JSON: " + e.what());
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  if (!j.contains("inputs") || !j["inputs"].is_array()) return out;  // load_graph_json says why
  for (const auto& i : j["inputs"]) {
    if (!i.is_object() || !i.contains("name") || !i["name"].is_string()) continue;
    std::vector<std::string> names;
    if (i.contains("shape") && i["shape"].is_array()) {
      for (const auto& d : i["shape"]) names.push_back(d.is_string() ? d.get<std::string>() : "");
    }
    out.emplace_back(i["name"].get<std::string>(), std::move(names));
  }
  return out;
}

std::string graph_to_json_string(const Graph& g) {
  json j;
  j["format"] = "opfuse.graph";
  j["version"] = kGraphFormatVersion;
  j["name"] = g.name;
  j["inputs"] = json::array();
  for (const auto& name : g.inputs()) {
    const Tensor& t = g.tensor(name);
    json e{{"name", t.name}, {"shape", t.shape}, {"dtype", to_string(t.dtype)}};
    if (t.layout != Layout::none) e["layout"] = to_string(t.layout);
    if (!t.dim_names.empty()) e["dim_names"] = t.dim_names;
    j["inputs"].push_back(e);
  }
  j["params"] = json::array();
  for (const auto& name : g.params()) {
    const Tensor& t = g.tensor(name);
    json e{{"name", t.name}, {"shape", t.shape}};
    if (t.data.empty()) {
      e["init"] = {t.init.lo, t.init.hi};
    } else {
      e["data"] = t.data;
    }
    j["params"].push_back(e);
  }
  j["nodes"] = json::array();
  for (const Node& n : g.nodes()) {
    json e{{"name", n.name}, {"op", n.op}, {"inputs", n.inputs}};
    if (n.outputs != std::vector<std::string>{n.name}) e["outputs"] = n.outputs;
    if (!n.attrs.empty()) {
      json a = json::object();
      for (const auto& [k, v] : n.attrs) a[k] = attr_to_json(v);
      e["attrs"] = a;
    }
    j["nodes"].push_back(e);
  }
  j["outputs"] = g.outputs();
  std::ostringstream os;
  write_json(os, j, 0);
  os << "\n";
  return os.str();
}

void save_graph_json(const Graph& g, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw GraphError(path + ": cannot write the graph file");
  out << graph_to_json_string(g);
}

}  // namespace opfuse::graph
