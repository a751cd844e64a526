// Measuring a candidate: JIT-compiled through the schedule emitter, checked once against the
// reference executor, then timed. Do not use in a process that also loads PoCL.
#pragma once

#include "fusion/graph/host_tensor.h"
#include "tools/explore/explore.h"

namespace opfuse::explore {

// Compiles `c`'s plan, checks its outputs on `inputs` against `want` (the reference
// executor's, within reference::kGraphTolerance) and times it: one warm-up, then repetitions
// until o.min_reps and o.min_time_s are both reached (o.max_reps at most).
Measurement measure(const graph::Graph& g, const fusion::CostModel& model, const Candidate& c,
                    const Options& o, const graph::TensorMap& inputs, const graph::TensorMap& want);

// A MeasureFn for explore(): random inputs from o.seed, the reference run once.
MeasureFn jit_measure(const graph::Graph& g, const fusion::CostModel& model, const Options& o);

}  // namespace opfuse::explore
