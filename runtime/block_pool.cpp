#include "runtime/block_pool.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace opfuse::runtime {
namespace {

constexpr size_t kAlignment = 128;
// Capacities in whole pages, so that sizes a few bytes apart share blocks.
constexpr size_t kPage = 4096;
// A block serves requests down to 1/kSlack of its capacity: the hottest block that fits beats
// a colder one of the exact size (block_pool.h), at the price of up to this much more memory
// in a live block.
constexpr size_t kSlack = 2;
// Idle blocks kept, the least recently freed given back beyond: enough for a network's
// intermediates of a few sizes on a few threads.
constexpr size_t kMaxIdle = 64;

struct Block {
  void* data;
  size_t capacity;
  size_t asked;  // the bytes of the request it serves (live blocks)
};

struct Pool {
  std::mutex mutex;
  std::vector<Block> idle;  // least recently freed first
  std::unordered_map<void*, Block> live;
  size_t idle_bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: Halide may free during static destruction
  return *p;
}

}  // namespace

void* pool_allocate(size_t bytes) {
  const size_t need = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (size_t i = p.idle.size(); i-- > 0;) {
      Block b = p.idle[i];
      if (b.capacity < need || b.capacity > kSlack * need) continue;
      p.idle.erase(p.idle.begin() + std::ptrdiff_t(i));
      p.idle_bytes -= b.capacity;
      b.asked = bytes;
      p.live[b.data] = b;
      return b.data;
    }
  }
  void* data = std::aligned_alloc(kAlignment, need);
  if (!data) return nullptr;
  std::lock_guard<std::mutex> lock(p.mutex);
  p.live[data] = Block{data, need, bytes};
  return data;
}

size_t pool_release(void* data) {
  if (!data) return 0;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  const auto it = p.live.find(data);
  if (it == p.live.end()) std::abort();  // not the pool's block: a double free
  const Block b = it->second;
  p.live.erase(it);
  p.idle.push_back(b);
  p.idle_bytes += b.capacity;
  if (p.idle.size() > kMaxIdle) {
    p.idle_bytes -= p.idle.front().capacity;
    std::free(p.idle.front().data);
    p.idle.erase(p.idle.begin());
  }
  return b.asked;
}

void pool_trim() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (const Block& b : p.idle) std::free(b.data);
  p.idle.clear();
  p.idle_bytes = 0;
}

size_t pooled_bytes() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  return pool().idle_bytes;
}

}  // namespace opfuse::runtime
