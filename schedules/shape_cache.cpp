#include "schedules/shape_cache.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <system_error>

#include "Halide.h"
#include "fusion/cost/cost_model.h"
#include "fusion/frontend/dynamic.h"
#include "fusion/frontend/load_model.h"
#include "fusion/planner/planner.h"
#include "schedules/emitter.h"
#include "schedules/jit.h"

namespace opfuse::schedules {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

size_t tensor_bytes(const graph::Graph& g) {  // every buffer a CompiledPlan holds, as f32
  size_t n = 0;
  for (const auto& name : g.tensor_names()) {
    const graph::Tensor& t = g.tensor(name);
    if (t.kind != graph::TensorKind::intermediate) n += size_t(graph::num_elements(t.shape)) * 4;
  }
  for (const auto& o : g.outputs()) n += size_t(graph::num_elements(g.tensor(o).shape)) * 4;
  return n;
}

}  // namespace

struct ShapeCache::Entry {
  int64_t bucket = 0;
  bool ready = false;
  std::string error;  // set with ready when the compile failed
  graph::Graph g;     // CompiledPlan keeps a pointer to it: an Entry never moves
  fusion::FusionPlan plan;
  std::unique_ptr<CompiledPlan> compiled;
  std::mutex run_mu;  // one call at a time on the compiled plan's buffers
};

ShapeCache::ShapeCache(std::string path, std::string symbol, graph::DimBindings fixed,
                       Options options)
    : path_(std::move(path)), symbol_(std::move(symbol)), fixed_(std::move(fixed)),
      options_(std::move(options)) {
  const auto declared = fusion::declared_symbols(path_);
  if (!declared.count(symbol_)) {
    throw graph::GraphError(path_ + ": no input has a dimension named '" + symbol_ + "'");
  }
  uses_ = declared.at(symbol_);
  const fusion::SymbolBehaviour b = fusion::analyse_symbol(path_, symbol_, fixed_);
  separable_ = b.separable;
  carrying_inputs_ = b.inputs;
  stats_.log.push_back(symbol_ + (separable_ ? ": separable, served from power-of-two buckets"
                                             : ": not separable (" + b.why_not +
                                                   "), served at exact sizes"));
}

ShapeCache::~ShapeCache() {
  if (ahead_.joinable()) ahead_.join();
}

int64_t ShapeCache::bucket_of(int64_t size) const {
  if (!separable_) return size;
  int64_t b = 1;
  while (b < size) b *= 2;
  return b;
}

std::shared_ptr<ShapeCache::Entry> ShapeCache::new_entry(int64_t bucket) {
  auto e = std::make_shared<Entry>();
  e->bucket = bucket;
  return e;
}

void ShapeCache::evict_locked() {
  auto bytes = [&] {
    size_t n = 0;
    for (const auto& [b, e] : cache_) n += e->ready ? stats_.buckets[b].bytes : 0;
    return n;
  };
  // Never the most recent (the call that just ran), never one still compiling.
  while ((cache_.size() > options_.capacity || bytes() > options_.max_bytes) && lru_.size() > 1) {
    const auto last = lru_.end() - 1;
    const auto victim =
        std::find_if(lru_.begin(), last, [&](int64_t b) { return cache_.at(b)->ready; });
    if (victim == last) break;
    const int64_t b = *victim;
    stats_.log.push_back("evicted " + symbol_ + " bucket " + std::to_string(b) + " (" +
                         std::to_string(cache_.size()) + " compiled, " +
                         std::to_string(bytes() >> 20) + " MiB)");
    cache_.erase(b);
    lru_.erase(victim);
    ++stats_.evictions;
  }
}

int64_t ShapeCache::predicted_locked() const {
  if (stats_.histogram.empty()) return -1;
  // The most-called size whose bucket is not compiled.
  int64_t best = -1, best_calls = 0;
  for (const auto& [size, calls] : stats_.histogram) {
    if (!cache_.count(bucket_of(size)) && calls > best_calls) best = size, best_calls = calls;
  }
  if (best > 0) return bucket_of(best);
  // Every size seen is compiled: the bucket above the largest (a batch that grows).
  if (!separable_) return -1;
  const int64_t next = bucket_of(stats_.histogram.rbegin()->first) * 2;
  return cache_.count(next) ? -1 : next;
}

int64_t ShapeCache::predicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return predicted_locked();
}

void ShapeCache::maybe_predict_locked() {
  // Only into room the cache has: a bucket compiled ahead into a full cache would push out one
  // in use, or be pushed out itself before its call, and be predicted again.
  if (!options_.predict || ahead_busy_ || cache_.size() >= options_.capacity) return;
  const int64_t b = predicted_locked();
  if (b < 0) return;
  if (ahead_.joinable()) ahead_.join();  // finished: ahead_busy_ is false
  auto e = new_entry(b);
  try {
    ahead_ = std::thread([this, e] {
      build(*e, /*ahead=*/true);
      std::lock_guard<std::mutex> lock(mu_);
      ahead_busy_ = false;
      ++stats_.ahead_compiles;
      compiled_.notify_all();
    });
  } catch (const std::system_error&) {
    return;  // no thread: no prediction, nothing half-made
  }
  cache_[b] = e;
  lru_.push_back(b);
  ahead_busy_ = true;
  stats_.log.push_back("predicted " + symbol_ + " bucket " + std::to_string(b) +
                       ": compiling ahead");
}

void ShapeCache::build(Entry& e, bool ahead) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string error;
  size_t bytes = 0;
  try {
    graph::DimBindings at = fixed_;
    at[symbol_] = e.bucket;
    e.g = fusion::load_model(path_, at);
    const fusion::RooflineCostModel model(
        profile_for(options_.profile, Halide::get_jit_target_from_environment()));
    e.plan = fusion::plan_fusion(e.g, model);
    e.compiled = std::make_unique<CompiledPlan>(e.g, e.plan, graph::random_inputs(e.g, 1));
    bytes = tensor_bytes(e.g);
  } catch (const std::exception& ex) {
    error = ex.what();
  }
  const double s = seconds_since(t0);
  std::lock_guard<std::mutex> lock(mu_);
  BucketStats& st = stats_.buckets[e.bucket];
  st.compile_s = s;
  st.ahead = ahead;
  st.bytes = bytes;
  ++st.compiles;
  stats_.log.push_back((error.empty() ? "compiled " : "failed to compile ") + symbol_ + " bucket " +
                       std::to_string(e.bucket) + (ahead ? " ahead" : "") + " in " +
                       std::to_string(s).substr(0, 5) + " s" + (error.empty() ? "" : ": " + error));
  e.error = error;
  e.ready = true;
  compiled_.notify_all();
}

graph::TensorMap ShapeCache::run(int64_t size, const graph::TensorMap& inputs) {
  const auto t0 = std::chrono::steady_clock::now();
  if (size < 1 || size > graph::kMaxElements) {
    throw std::invalid_argument(symbol_ + " = " + std::to_string(size) + ": a size is 1 to " +
                                std::to_string(graph::kMaxElements));
  }
  // Checked before any compile: every input the symbol names is given, at this size there.
  for (const auto& [name, axis] : uses_) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw std::invalid_argument("input '" + name + "' is not given");
    const graph::Shape& s = it->second.shape;
    if (int(s.size()) <= axis || s[size_t(axis)] != size) {
      throw std::invalid_argument("input '" + name + "' is " + graph::shape_to_string(s) +
                                  ": axis " + std::to_string(axis) + " is not " + symbol_ + " = " +
                                  std::to_string(size));
    }
  }
  const int64_t bucket = bucket_of(size);
  std::shared_ptr<Entry> e;
  bool mine = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++stats_.histogram[size];
    if (auto it = cache_.find(bucket); it != cache_.end()) {
      e = it->second;
      if (e->ready) {
        ++stats_.hits;
      } else {
        ++stats_.waits;  // being compiled: ahead, or by another call
        compiled_.wait(lock, [&] { return e->ready; });
      }
      // Waiting let other calls in: one may have evicted it since (this call still holds it).
      const auto at = std::find(lru_.begin(), lru_.end(), bucket);
      if (at != lru_.end() && cache_.at(bucket) == e) {
        lru_.erase(at);
        lru_.push_back(bucket);
      }
    } else {
      ++stats_.misses;
      e = new_entry(bucket);
      cache_[bucket] = e;
      mine = true;
      lru_.push_back(bucket);
    }
  }
  if (mine) build(*e, false);
  if (!e->error.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.count(bucket) && cache_.at(bucket) == e) {  // a later call tries again
      cache_.erase(bucket);
      lru_.erase(std::remove(lru_.begin(), lru_.end(), bucket), lru_.end());
    }
    throw std::runtime_error(e->error);
  }
  // The inputs at the bucket's size: a separable symbol's carried inputs padded with zeros.
  graph::TensorMap in;
  for (const auto& name : e->g.inputs()) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw std::invalid_argument("input '" + name + "' is not given");
    const graph::Shape& want = e->g.tensor(name).shape;
    const bool carried = separable_ && std::count(carrying_inputs_.begin(), carrying_inputs_.end(), name);
    graph::Shape expect = want;
    if (carried) expect[0] = size;
    if (it->second.shape != expect) {
      throw std::invalid_argument("input '" + name + "' must be " + graph::shape_to_string(expect) +
                                  " at " + symbol_ + " = " + std::to_string(size) + ", got " +
                                  graph::shape_to_string(it->second.shape));
    }
    if (carried && size != bucket) {
      graph::HostTensor padded(want);
      std::copy(it->second.data.begin(), it->second.data.end(), padded.data.begin());
      in[name] = std::move(padded);
    } else {
      in[name] = it->second;
    }
  }
  graph::TensorMap out;
  size_t heap = 0;
  {
    std::lock_guard<std::mutex> lock(e->run_mu);
    e->compiled->set_inputs(in);
    e->compiled->run();
    out = e->compiled->outputs();
    heap = e->compiled->peak_heap_bytes();  // approximate when plans run at once
  }
  if (separable_ && size != bucket) {  // every output carries the batch first
    for (auto& [name, t] : out) {
      const int64_t row = t.shape[0] ? int64_t(t.data.size()) / t.shape[0] : 0;
      t.shape[0] = size;
      t.data.resize(size_t(row * size));
    }
  }
  const double s = seconds_since(t0);
  std::lock_guard<std::mutex> lock(mu_);
  BucketStats& st = stats_.buckets[bucket];
  if (st.calls++ == 0) {
    st.first_call_s = s;
    st.bytes += heap;  // its intermediates' peak, measured once
  }
  st.run_s += s;
  evict_locked();
  maybe_predict_locked();
  return out;
}

ShapeCache::Stats ShapeCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ShapeCache::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  compiled_.wait(lock, [&] { return !ahead_busy_; });
}

}  // namespace opfuse::schedules
