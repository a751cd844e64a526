// Dynamic shapes through the JIT (exercise 7.6): a model with a symbolic dimension served at
// any size, compiling a plan per size bucket on demand and keeping the recent ones.
//
//   buckets   a separable symbol (a batch, fusion/frontend/dynamic.h) is served from the
//             power-of-two bucket at or above the size: the inputs are padded with zeros to the
//             bucket, the outputs cut back (samples are independent, so the padding never
//             reaches a real sample); any other symbol from a bucket of its exact size
//   cache     compiled buckets kept in least-recently-used order, at most `capacity` of them
//             and `max_bytes` of their buffers (each holds its weights, inputs and outputs, and
//             its intermediates' peak, measured on its first call; not its code): memory
//             pressure evicts
//   histogram calls per size, and per bucket its compile time, first-call latency and runs
//   predictor after each call, the bucket to compile next: the most-called size whose bucket is
//             not compiled, else the bucket above the largest one called (traffic that grows);
//             compiled ahead on one background thread, so a call there finds it ready; only
//             while the cache has room (never pushing out a bucket for a guess)
//
// run() is safe from many threads: calls at one bucket take turns on its compiled plan, calls
// at different buckets run at once, and a call whose bucket is being compiled (ahead, or by
// another call) waits for that compile instead of starting another.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"

namespace opfuse::schedules {

class ShapeCache {
 public:
  struct Options {
    size_t capacity = 3;                       // compiled buckets kept
    size_t max_bytes = size_t(2) << 30;        // and at most this much of their buffers
    bool predict = true;                       // compile the predicted bucket ahead
    std::string profile = "host";              // hardware profile for the planner
  };
  struct BucketStats {
    int64_t calls = 0;
    double compile_s = 0;     // 0 until compiled
    double first_call_s = 0;  // the first call's latency, compile (or wait) included
    double run_s = 0;         // every call's latency, summed
    bool ahead = false;       // compiled ahead by the predictor
    int compiles = 0;         // more than 1: evicted and compiled again
    size_t bytes = 0;
  };
  struct Stats {
    std::map<int64_t, int64_t> histogram;     // size -> calls
    std::map<int64_t, BucketStats> buckets;   // bucket -> stats
    int64_t hits = 0, misses = 0, waits = 0, evictions = 0, ahead_compiles = 0;
    std::vector<std::string> log;             // one line per compile, eviction and prediction
  };

  // `path`: the model; `symbol`: its dynamic dimension; `fixed`: sizes of its other symbols.
  // GraphError when the model does not build.
  ShapeCache(std::string path, std::string symbol, graph::DimBindings fixed, Options options);
  ShapeCache(std::string path, std::string symbol, graph::DimBindings fixed)
      : ShapeCache(std::move(path), std::move(symbol), std::move(fixed), Options{}) {}
  ~ShapeCache();  // waits for a compile in flight
  ShapeCache(const ShapeCache&) = delete;
  ShapeCache& operator=(const ShapeCache&) = delete;

  // Runs the model at `size` (every input carrying the symbol must have it); returns the
  // outputs at that size. std::invalid_argument for inputs that do not fit.
  graph::TensorMap run(int64_t size, const graph::TensorMap& inputs);

  bool separable() const { return separable_; }
  int64_t bucket_of(int64_t size) const;
  // The bucket the predictor would compile next; -1 for none.
  int64_t predicted() const;
  Stats stats() const;
  // Blocks until no compile is in flight (for tests and benchmarks).
  void wait_idle();

 private:
  struct Entry;
  std::shared_ptr<Entry> new_entry(int64_t bucket);  // not yet built
  void build(Entry& e, bool ahead);                // loads, plans, compiles; no lock held
  void evict_locked();
  void maybe_predict_locked();
  int64_t predicted_locked() const;

  std::string path_, symbol_;
  graph::DimBindings fixed_;
  Options options_;
  bool separable_ = false;
  std::vector<std::string> carrying_inputs_;  // inputs whose first axis is the symbol (separable)
  std::vector<std::pair<std::string, int>> uses_;  // every (input, axis) the symbol names

  mutable std::mutex mu_;
  std::condition_variable compiled_;
  std::map<int64_t, std::shared_ptr<Entry>> cache_;  // bucket -> compiled (or compiling)
  std::vector<int64_t> lru_;                         // least recent first
  Stats stats_;
  std::thread ahead_;
  bool ahead_busy_ = false;
};

}  // namespace opfuse::schedules
