#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace opfuse::runtime {
namespace {

using Clock = std::chrono::steady_clock;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 ? int(n) : fallback;
}

struct Job {
  ParTask f;
  void* user_context;
  int min, size;
  uint8_t* closure;
  std::atomic<int> done{0}, error{0};
  // Per thread slot (the caller 0, worker k k), its share of the tasks: a contiguous range,
  // packed as lo | hi << 32, taken from the front by its owner and from the back by others.
  // Why shares: a group's tiles are runs of rows (or channels) in task order, so thread k
  // computes about the same part of every tensor in every loop, and the next group reads
  // what it wrote from its own caches. Claimed from one counter, the first thread to arrive
  // took the first tasks and the halves landed on either core by chance. Runs alternated,
  // 2 Zen 5 cores, AOT libraries: MobileNetV2 x0.93-0.96 (4 pairs), ResNet-18 and
  // EfficientNet-B0 unchanged (x0.95-1.09).
  std::vector<std::atomic<uint64_t>> ranges;

  Job(ParTask f, void* uc, int min, int size, uint8_t* closure, int slots)
      : f(f), user_context(uc), min(min), size(size), closure(closure), ranges(size_t(slots)) {
    for (int t = 0; t < slots; ++t) {
      const uint64_t lo = uint64_t(int64_t(size) * t / slots);
      const uint64_t hi = uint64_t(int64_t(size) * (t + 1) / slots);
      ranges[size_t(t)].store(lo | hi << 32);
    }
  }

  bool claim(int slot, bool front, int& i) {
    std::atomic<uint64_t>& r = ranges[size_t(slot)];
    uint64_t v = r.load();
    for (;;) {
      const uint32_t lo = uint32_t(v), hi = uint32_t(v >> 32);
      if (lo >= hi) return false;
      const uint64_t next =
          front ? uint64_t(lo + 1) | uint64_t(hi) << 32 : uint64_t(lo) | uint64_t(hi - 1) << 32;
      if (r.compare_exchange_weak(v, next)) {
        i = int(front ? lo : hi - 1);
        return true;
      }
    }
  }

  void run_task(int i) {
    const int r = f(user_context, min + i, closure);
    if (r != 0) {
      int zero = 0;
      error.compare_exchange_strong(zero, r);
    }
    done.fetch_add(1, std::memory_order_release);
  }

  // Runs this slot's own tasks in order, then takes what is left of the others' from their
  // backs (a thread that is late, or descheduled, holds no one up).
  void work(int slot) {
    const int slots = int(ranges.size());
    int i;
    while (claim(slot, true, i)) run_task(i);
    for (int k = 1; k < slots; ++k) {
      while (claim((slot + k) % slots, false, i)) run_task(i);
    }
  }
};

thread_local bool t_in_task = false;  // a pool thread, or the caller while its loop runs

class Pool {
 public:
  Pool() {
    const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    threads_ = std::max(1, env_int("HL_NUM_THREADS", hw));
    spin_us_ = env_int("OPFUSE_SPIN_US", 1000);
    for (int i = 1; i < threads_; ++i) std::thread([this, i] { worker(i); }).detach();
  }

  int threads() const { return threads_; }
  void set_spin_us(int us) { spin_us_.store(std::max(0, us)); }
  int spin_us() const { return spin_us_.load(); }

  int run(ParTask f, void* uc, int min, int size, uint8_t* closure) {
    auto serially = [&] {
      for (int i = 0; i < size; ++i) {
        if (const int r = f(uc, min + i, closure)) return r;
      }
      return 0;
    };
    // Inside a task (a pool thread, or this caller's own loop, which holds loop_mutex_), ask
    // for nothing: locking a mutex this thread holds is undefined.
    if (threads_ == 1 || size == 1 || t_in_task) return serially();
    std::unique_lock<std::mutex> one(loop_mutex_, std::try_to_lock);
    if (!one.owns_lock()) return serially();
    Job job(f, uc, min, size, closure, threads_);
    current_.store(&job);
    generation_.fetch_add(1);
    if (sleeping_.load() > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    t_in_task = true;
    job.work(0);
    t_in_task = false;
    while (job.done.load(std::memory_order_acquire) < size) cpu_relax();
    // No worker may still hold the job once this returns (it lives on this stack): a worker
    // counts itself in `in_flight_` before it reads `current_`.
    current_.store(nullptr);
    while (in_flight_.load() > 0) cpu_relax();
    return job.error.load();
  }

 private:
  void worker(int slot) {
    t_in_task = true;
    uint64_t seen = generation_.load();
    for (;;) {
      auto start = Clock::now();
      for (int spins = 0; generation_.load() == seen; ++spins) {
        cpu_relax();
        if ((spins & 255) == 255 &&
            Clock::now() - start > std::chrono::microseconds(spin_us_.load())) {
          std::unique_lock<std::mutex> lock(sleep_mutex_);
          sleeping_.fetch_add(1);
          wake_.wait(lock, [&] { return generation_.load() != seen; });
          sleeping_.fetch_sub(1);
          start = Clock::now();
        }
      }
      seen = generation_.load();
      in_flight_.fetch_add(1);
      if (Job* job = current_.load()) job->work(slot);
      in_flight_.fetch_sub(1);
    }
  }

  int threads_ = 1;
  std::atomic<int> spin_us_{1000};
  std::mutex loop_mutex_;  // one loop at a time on the pool
  std::atomic<Job*> current_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> in_flight_{0}, sleeping_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
};

Pool& pool() {
  // Never destroyed: its detached workers may be spinning when the process exits.
  static Pool* p = new Pool();
  return *p;
}

}  // namespace

int spinning_do_par_for(void* user_context, ParTask f, int min, int size, uint8_t* closure) {
  if (size <= 0) return 0;
  return pool().run(f, user_context, min, size, closure);
}

int pool_threads() { return pool().threads(); }

void set_spin_us(int us) { pool().set_spin_us(us); }

int spin_us() { return pool().spin_us(); }

bool spinning_pool_enabled() {
  const char* v = std::getenv("OPFUSE_THREAD_POOL");
  return !(v && std::string(v) == "halide");
}

}  // namespace opfuse::runtime
