#include "runtime/pool_allocator.h"

#include <HalideRuntime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace opfuse::runtime {
namespace {

// Halide requires halide_malloc'd memory aligned to at least 128 bytes on x86 (its vector
// loads of whole cache lines); 4 KiB size classes keep the number of classes small.
constexpr size_t kAlignment = 128;
constexpr size_t kSizeClass = 4096;
// Blocks kept per size class: enough for a pipeline's intermediates on a few threads.
constexpr size_t kMaxFreePerClass = 16;

struct Pool {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_blocks;
  std::unordered_map<void*, size_t> size_of;
  size_t pooled = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: Halide may free during static destruction
  return *p;
}

void* pooled_malloc(void*, size_t bytes) {
  const size_t size = (bytes + kSizeClass - 1) / kSizeClass * kSizeClass;
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free_blocks.find(size);
    if (it != p.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      p.pooled -= size;
      return block;
    }
  }
  void* block = std::aligned_alloc(kAlignment, size);
  if (!block) return nullptr;
  std::lock_guard<std::mutex> lock(p.mutex);
  p.size_of[block] = size;
  return block;
}

void pooled_free(void*, void* block) {
  if (!block) return;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  const size_t size = p.size_of.at(block);
  auto& list = p.free_blocks[size];
  if (list.size() < kMaxFreePerClass) {
    list.push_back(block);
    p.pooled += size;
  } else {
    p.size_of.erase(block);
    std::free(block);
  }
}

}  // namespace

void use_pooled_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    use_pooled_allocator_in(reinterpret_cast<void*>(&halide_set_custom_malloc),
                            reinterpret_cast<void*>(&halide_set_custom_free));
  });
}

void use_pooled_allocator_in(void* set_custom_malloc, void* set_custom_free) {
  reinterpret_cast<halide_malloc_t (*)(halide_malloc_t)>(set_custom_malloc)(pooled_malloc);
  reinterpret_cast<halide_free_t (*)(halide_free_t)>(set_custom_free)(pooled_free);
}

size_t pooled_bytes() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  return pool().pooled;
}

}  // namespace opfuse::runtime
