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
  std::atomic<int> next{0}, done{0}, error{0};

  // Claims and runs tasks until none is left.
  void work() {
    for (int i; (i = next.fetch_add(1)) < size;) {
      const int r = f(user_context, min + i, closure);
      if (r != 0) {
        int zero = 0;
        error.compare_exchange_strong(zero, r);
      }
      done.fetch_add(1, std::memory_order_release);
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
    for (int i = 1; i < threads_; ++i) std::thread([this] { worker(); }).detach();
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
    Job job{f, uc, min, size, closure};
    current_.store(&job);
    generation_.fetch_add(1);
    if (sleeping_.load() > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    t_in_task = true;
    job.work();
    t_in_task = false;
    while (job.done.load(std::memory_order_acquire) < size) cpu_relax();
    // No worker may still hold the job once this returns (it lives on this stack): a worker
    // counts itself in `in_flight_` before it reads `current_`.
    current_.store(nullptr);
    while (in_flight_.load() > 0) cpu_relax();
    return job.error.load();
  }

 private:
  void worker() {
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
      if (Job* job = current_.load()) job->work();
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
