// The JSON graph file format (documented in README.md, "Graph files"). Loading checks the
// file's structure (unknown keys, wrong types, version) with the JSON path of each mistake,
// then validates the graph. save(load(f)) reproduces f's content; load(save(g)) == g.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

inline constexpr int kGraphFormatVersion = 1;

// An input's extent may be a name ("shape": ["batch", 3, 224, 224]): its size comes from
// `dims` (GraphError naming the input and the symbol without it).
Graph graph_from_json_string(const std::string& text, const std::string& source = "<string>",
                             const DimBindings& dims = {});
Graph load_graph_json(const std::string& path, const DimBindings& dims = {});
// Each input's per-axis symbol ("" for a number), read without building the graph.
std::vector<std::pair<std::string, std::vector<std::string>>> json_input_dims(
    const std::string& path);
std::string graph_to_json_string(const Graph& g);
void save_graph_json(const Graph& g, const std::string& path);

}  // namespace opfuse::graph
