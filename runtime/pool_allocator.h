// A caching allocator for the intermediates Halide kernels allocate on every call, as every
// framework's caching allocator does: freed blocks are kept by size and handed out again, so
// a kernel that materialises intermediates (the unfused strategy above all) is not charged
// for page faults of fresh large allocations on each call.
#pragma once

#include <cstddef>

namespace opfuse::runtime {

// Installs the pooled allocator as Halide's halide_malloc / halide_free. Idempotent.
void use_pooled_allocator();
// Installs it into another Halide runtime (a library's own, runtime::Model::open), given that
// runtime's halide_set_custom_malloc and halide_set_custom_free.
void use_pooled_allocator_in(void* set_custom_malloc, void* set_custom_free);

// Bytes held in the pool's free lists (for tests and reports).
size_t pooled_bytes();

}  // namespace opfuse::runtime
