// The block pool (block_pool.h) installed as a Halide runtime's halide_malloc / halide_free:
// the intermediates AOT-built kernels allocate on every call come from it.
#pragma once

#include "runtime/block_pool.h"

namespace opfuse::runtime {

// Installs the pooled allocator as Halide's halide_malloc / halide_free. Idempotent.
void use_pooled_allocator();
// Installs it into another Halide runtime (a library's own, runtime::Model::open), given that
// runtime's halide_set_custom_malloc and halide_set_custom_free.
void use_pooled_allocator_in(void* set_custom_malloc, void* set_custom_free);

}  // namespace opfuse::runtime
