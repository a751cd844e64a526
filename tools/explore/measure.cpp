#include "tools/explore/measure.h"

#include <chrono>
#include <memory>
#include <numeric>

#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/jit.h"

namespace opfuse::explore {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

Measurement measure(const graph::Graph& g, const fusion::CostModel& model, const Candidate& c,
                    const Options& o, const graph::TensorMap& inputs,
                    const graph::TensorMap& want) {
  Measurement m;
  try {
    const fusion::FusionPlan plan = fusion::plan_from_user_groups(g, model, c.groups);
    const auto t0 = Clock::now();
    schedules::CompiledPlan k(g, plan, inputs);
    m.compile_s = seconds_since(t0);
    k.run();  // warm-up, and the result to check
    const graph::TensorMap got = k.outputs();
    for (const auto& name : g.outputs()) {
      const auto cmp =
          reference::compare(got.at(name).data, want.at(name).data, reference::kGraphTolerance);
      if (!cmp.ok()) {
        m.error = "output '" + name + "' differs from the reference: " + cmp.summary();
        return m;
      }
    }
    std::vector<double> samples;
    const auto start = Clock::now();
    double peak = double(k.peak_heap_bytes());
    while (int(samples.size()) < o.max_reps &&
           (int(samples.size()) < o.min_reps || seconds_since(start) < o.min_time_s)) {
      const auto t = Clock::now();
      k.run();
      samples.push_back(seconds_since(t));
      peak = std::max(peak, double(k.peak_heap_bytes()));
    }
    m.reps = int(samples.size());
    m.p50_s = percentile(samples, 0.5);
    m.p99_s = percentile(samples, 0.99);
    m.mean_s = std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
    m.jitter = m.p50_s > 0 ? m.p99_s / m.p50_s : 0;
    m.peak_heap_bytes = peak;
    m.ok = true;
  } catch (const std::exception& e) {
    m.error = e.what();
  }
  return m;
}

MeasureFn jit_measure(const graph::Graph& g, const fusion::CostModel& model, const Options& o) {
  auto inputs = std::make_shared<graph::TensorMap>(graph::random_inputs(g, o.seed));
  auto want = std::make_shared<graph::TensorMap>(reference::run(g, *inputs));
  return [&g, &model, o, inputs, want](const Candidate& c) {
    return measure(g, model, c, o, *inputs, *want);
  };
}

}  // namespace opfuse::explore
