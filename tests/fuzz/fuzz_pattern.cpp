// Any bytes as a rule file: a PatternError, or rules the matcher runs on a zoo graph.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/zoo.h"
#include "fusion/pattern/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opfuse;
  static const graph::Graph g = graph::zoo_model("perception", graph::ZooSize::cpu);
  static const graph::IndexedGraph ig(g);
  try {
    const auto rules =
        fusion::parse_rules(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    fusion::match_rules(ig, rules);
  } catch (const fusion::PatternError&) {
  }
  return 0;
}
