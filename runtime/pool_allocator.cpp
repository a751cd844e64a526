#include "runtime/pool_allocator.h"

#include <HalideRuntime.h>

#include <mutex>

#include "runtime/block_pool.h"

namespace opfuse::runtime {
namespace {

void* pooled_malloc(void*, size_t bytes) { return pool_allocate(bytes); }
void pooled_free(void*, void* block) { pool_release(block); }

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

}  // namespace opfuse::runtime
