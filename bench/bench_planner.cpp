// Compile-side cost: pattern matching and planning time against graph size (1k, 10k, 100k
// nodes of generated CNN-like graphs). The growth ratio between sizes should stay close to
// linear (10x nodes -> ~10x time).
#include <benchmark/benchmark.h>

#include "fusion/cost/cost_model.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/random_graph.h"
#include "fusion/pattern/matcher.h"
#include "fusion/planner/planner.h"

namespace {

using namespace opfuse;

graph::Graph make(size_t nodes) {
  graph::RandomGraphOptions o;
  o.nodes = nodes;
  return graph::random_graph(1, o);
}

void BM_Plan(benchmark::State& state) {
  const graph::Graph g = make(size_t(state.range(0)));
  const fusion::RooflineCostModel model(fusion::builtin_profile("epyc-avx512-2c"));
  size_t groups = 0;
  for (auto _ : state) {
    const fusion::FusionPlan p = fusion::plan_fusion(g, model);
    groups = p.groups.size();
    benchmark::DoNotOptimize(groups);
  }
  state.counters["nodes"] = double(g.nodes().size());
  state.counters["groups"] = double(groups);
  state.counters["nodes_per_s"] =
      benchmark::Counter(double(g.nodes().size()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Match(benchmark::State& state) {
  const graph::Graph g = make(size_t(state.range(0)));
  const graph::IndexedGraph ig(g);
  for (auto _ : state) {
    auto m = fusion::match_rules(ig, fusion::builtin_rules());
    benchmark::DoNotOptimize(m.data());
  }
  state.counters["nodes_per_s"] =
      benchmark::Counter(double(g.nodes().size()), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_Match)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Plan)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
