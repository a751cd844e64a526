// A caching allocator for the intermediates Halide kernels allocate on every call, as every
// framework's caching allocator does: freed blocks are kept by size and handed out again, so
// a kernel that materialises intermediates (the unfused strategy above all) is not charged
// for page faults of fresh large allocations on each call.
#pragma once

#include <cstddef>

namespace opfuse::runtime {

// Installs the pooled allocator as Halide's halide_malloc / halide_free. Idempotent.
void use_pooled_allocator();

// Bytes held in the pool's free lists (for tests and reports).
size_t pooled_bytes();

}  // namespace opfuse::runtime
