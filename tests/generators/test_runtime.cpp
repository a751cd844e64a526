// The runtime: tensors, the registry, errors for bad calls, concurrent calls, the timing hook.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "bench/zoo_model.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/reference/executor.h"
#include "runtime/kernel.h"
#include "runtime/pool_allocator.h"
#include "runtime/thread_pool.h"
#include "tests/kernel_check.h"

using namespace opfuse;
using runtime::Registry;
using runtime::Tensor;
using testing::error_of;

namespace {

// A zoo model's tensors for a call (inputs from seed 5).
struct Call : bench::ModelTensors {
  explicit Call(const std::string& model) : ModelTensors(OPFUSE_MODELS_DIR, model, 5) {}
};

}  // namespace

TEST_CASE("the registry lists the zoo and describes each kernel's arguments") {
  const runtime::Kernel& k = Registry::global().find("cbr_pool", "fused", "host");
  REQUIRE(k.inputs().size() == 6);  // x, w, gamma, beta, mean, var
  CHECK(k.inputs()[0].name == "x");
  CHECK(k.inputs()[0].shape == std::vector<int64_t>{1, 56, 56, 32});
  CHECK(k.outputs()[0].shape == std::vector<int64_t>{1, 28, 28, 32});
  CHECK(Registry::global().all().size() >= 44);  // 11 models x 2 strategies x (host, opencl)
  const std::string e = error_of([] { Registry::global().find("resnet", "fused", "host"); });
  CHECK(e.find("no kernel resnet/fused/host") != std::string::npos);
  CHECK(e.find("cbr_pool/fused/host") != std::string::npos);
}

TEST_CASE("bad calls fail cleanly, naming the argument and what was expected") {
  Call c("cbr_pool");
  const runtime::Kernel& k = Registry::global().find("cbr_pool", "fused", "host");
  SUBCASE("wrong shape") {
    auto ins = c.ins;
    ins[0].shape = {1, 56, 56, 16};
    const std::string e = error_of([&] { k.run(ins, c.outs); });
    CHECK(e.find("cbr_pool/fused/host") != std::string::npos);
    CHECK(e.find("input 'x' must have shape [1,56,56,32], got [1,56,56,16]") != std::string::npos);
  }
  SUBCASE("wrong dtype") {
    auto outs = c.outs;
    outs[0].dtype = runtime::DType::f16;
    CHECK(error_of([&] {
            k.run(c.ins, outs);
          }).find("output 'max_pool_0' must be f32, got f16") != std::string::npos);
  }
  SUBCASE("null data") {
    auto ins = c.ins;
    ins[1].data = nullptr;
    CHECK(error_of([&] { k.run(ins, c.outs); }).find("input 'w' has no data") != std::string::npos);
  }
  SUBCASE("wrong argument count") {
    auto ins = c.ins;
    ins.pop_back();
    CHECK(error_of([&] { k.run(ins, c.outs); }).find("takes 6 inputs and 1 outputs, got 5 and 1") !=
          std::string::npos);
  }
}

TEST_CASE("16 threads call fused kernels for a bounded time, with wrong calls interleaved") {
  Call c("cbr_pool");
  const graph::TensorMap want = reference::run(c.graph, c.inputs, c.params);
  const runtime::Kernel& k = Registry::global().find("cbr_pool", "fused", "host");
  std::atomic<int> wrong_results{0}, clean_errors{0}, other_errors{0}, good_calls{0};
  // Each thread makes at least 10 calls and stops after 2 s: bounded on a slow machine.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::atomic<int> bad_calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10 || (i < 200 && std::chrono::steady_clock::now() < deadline); ++i) {
        graph::HostTensor out(c.graph.tensor(c.graph.outputs()[0]).shape);
        std::vector<Tensor> outs{Tensor::f32(out.data.data(), out.shape)};
        std::vector<Tensor> ins = c.ins;
        const bool bad = (t + i) % 5 == 0;
        if (bad) ins[0].shape = {2, 56, 56, 32}, ++bad_calls;  // a wrong-shape call
        try {
          k.run(ins, outs);
          if (bad) ++other_errors;  // should have failed
          const auto cmp = reference::compare(out.data, want.at(c.graph.outputs()[0]).data,
                                              testing::kZooTolerance);
          if (!cmp.ok()) ++wrong_results;
          ++good_calls;
        } catch (const std::invalid_argument&) {
          ++clean_errors;
        } catch (...) {
          ++other_errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  MESSAGE(good_calls.load() << " correct calls and " << clean_errors.load()
                            << " clean errors from 16 threads");
  CHECK(good_calls >= 16 * 8);
  CHECK(wrong_results == 0);
  CHECK(other_errors == 0);
  CHECK(clean_errors == bad_calls);  // every wrong call failed cleanly, and only those
}

TEST_CASE("the timing hook sees every successful call") {
  Call c("ew_chain_2");
  std::atomic<int> calls{0};
  std::atomic<bool> positive{true};
  runtime::set_timing_hook([&](const runtime::Kernel& k, double s) {
    calls += k.model() == "ew_chain_2" ? 1 : 0;
    positive = positive && s > 0;
  });
  const runtime::Kernel& k = Registry::global().find("ew_chain_2", "unfused", "host");
  for (int i = 0; i < 3; ++i) k.run(c.ins, c.outs);
  runtime::set_timing_hook(nullptr);
  CHECK(calls == 3);
  CHECK(positive);
}

TEST_CASE("the pooled allocator reuses intermediates across calls and keeps results right") {
  runtime::use_pooled_allocator();
  Call c("mlp");  // the unfused mlp materialises [128, 1024] intermediates
  const runtime::Kernel& k = Registry::global().find("mlp", "unfused", "host");
  k.run(c.ins, c.outs);
  const size_t after_first = runtime::pooled_bytes();
  CHECK(after_first >= 128 * 1024 * 4);  // the intermediates went back to the pool
  // Reused, not grown: without reuse ten more calls would leave ten times as much in the pool.
  // (Parallel tiles may allocate at once, so a call can take a block or two more.)
  for (int i = 0; i < 10; ++i) k.run(c.ins, c.outs);
  CHECK(runtime::pooled_bytes() <= 2 * after_first);
  const graph::TensorMap want = reference::run(c.graph, c.inputs, c.params);
  const auto cmp = reference::compare(c.outputs[c.graph.outputs()[0]].data,
                                      want.at(c.graph.outputs()[0]).data, testing::kZooTolerance);
  CHECK_MESSAGE(cmp.ok(), cmp.summary());
}

TEST_CASE("the block pool hands out the most recently freed block that fits, within 2x") {
  using runtime::pool_allocate;
  using runtime::pool_release;
  runtime::pool_trim();
  REQUIRE(runtime::pooled_bytes() == 0);
  const size_t mb = size_t(1) << 20;
  void* a = pool_allocate(mb);
  void* b = pool_allocate(mb);
  void* big = pool_allocate(3 * mb / 2);
  void* huge = pool_allocate(4 * mb);
  for (void* p : {a, b, big, huge}) {
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 128 == 0);  // Halide's whole-line vector loads
  }
  std::memset(b, 1, mb);         // each byte asked for is usable (ASan in the sanitized build)
  CHECK(pool_release(a) == mb);  // the bytes asked for, for the JIT's heap accounting
  CHECK(pool_release(b) == mb);
  CHECK(runtime::pooled_bytes() == 2 * mb);
  // The most recently freed of two equal blocks: the likelier still in cache.
  CHECK(pool_allocate(mb) == b);
  CHECK(pool_allocate(mb) == a);
  // A block up to twice the request serves it, the most recent first; a larger one does not.
  pool_release(huge);
  pool_release(big);
  CHECK(pool_allocate(mb) == big);
  void* fresh = pool_allocate(mb);
  CHECK(fresh != huge);
  CHECK(pool_allocate(3 * mb) == huge);  // 4 MB within twice 3 MB
  // Sizes round up to whole pages: 100 bytes take the block 64 bytes left.
  void* small = pool_allocate(64);
  pool_release(small);
  CHECK(pool_allocate(100) == small);
  for (void* p : {a, b, big, fresh, huge, small}) pool_release(p);
  // Idle blocks are bounded: the least recently freed go back to the system.
  std::vector<void*> many;
  for (int i = 0; i < 100; ++i) many.push_back(pool_allocate(4096));
  for (void* p : many) pool_release(p);
  CHECK(runtime::pooled_bytes() <= 64 * 4096);
  runtime::pool_trim();
  CHECK(runtime::pooled_bytes() == 0);
}

namespace {

// Counts each task index it is run with; an index at `fail_at` returns 7.
struct CountingTasks {
  std::vector<std::atomic<int>> hits;
  int fail_at = -1;
  std::mutex m;
  std::set<std::thread::id> threads;
  std::chrono::microseconds each{0};
  std::atomic<int> wrong_context{0};
  explicit CountingTasks(int n) : hits(size_t(n)) {}
  static int task(void* uc, int idx, uint8_t* closure) {
    auto* self = reinterpret_cast<CountingTasks*>(closure);
    if (uc != &self->hits) self->wrong_context.fetch_add(1);
    self->hits[size_t(idx - 100)].fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(self->m);
      self->threads.insert(std::this_thread::get_id());
    }
    if (self->each.count()) std::this_thread::sleep_for(self->each);
    return idx - 100 == self->fail_at ? 7 : 0;
  }
  int run() {
    return runtime::spinning_do_par_for(&hits, task, 100, int(hits.size()),
                                        reinterpret_cast<uint8_t*>(this));
  }
  bool each_once() const {
    if (wrong_context.load() != 0) return false;
    for (const auto& h : hits) {
      if (h.load() != 1) return false;
    }
    return true;
  }
};

}  // namespace

TEST_CASE("the thread pool runs every task once, returns a failure, nests and takes callers") {
  for (int n : {0, 1, 2, 7, 1000}) {
    CAPTURE(n);
    CountingTasks t(n);
    CHECK(t.run() == 0);
    CHECK(t.each_once());
  }
  {  // a failing task's code comes back; the other tasks still ran
    CountingTasks t(50);
    t.fail_at = 17;
    CHECK(t.run() == 7);
    CHECK(t.each_once());
  }
  {  // a loop inside a task runs on that task's thread
    CountingTasks outer(8);
    std::atomic<int> inner_ok{0};
    struct Ctx {
      std::atomic<int>* ok;
    } ctx{&inner_ok};
    auto nested = [](void*, int, uint8_t* c) {
      CountingTasks inner(5);
      const int r = inner.run();
      if (r == 0 && inner.each_once()) reinterpret_cast<Ctx*>(c)->ok->fetch_add(1);
      return r;
    };
    CHECK(runtime::spinning_do_par_for(nullptr, nested, 0, 8, reinterpret_cast<uint8_t*>(&ctx)) == 0);
    CHECK(inner_ok.load() == 8);
  }
  {  // loops from several threads at once: each completes, whichever runs on the pool
    std::vector<std::thread> callers;
    std::atomic<int> ok{0};
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&] {
        for (int k = 0; k < 200; ++k) {
          CountingTasks t(13);
          if (t.run() == 0 && t.each_once()) ok.fetch_add(1);
        }
      });
    }
    for (auto& c : callers) c.join();
    CHECK(ok.load() == 800);
  }
  // Idle past the spin budget (1 ms unless OPFUSE_SPIN_US says otherwise): the workers sleep,
  // and the next loop wakes them: its tasks (2 ms each) run on more than one thread.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CountingTasks slow(40);
  slow.each = std::chrono::milliseconds(2);
  CHECK(slow.run() == 0);
  CHECK(slow.each_once());
  if (runtime::pool_threads() > 1) CHECK(slow.threads.size() > 1);
}
