// The thread pool's installation into a Halide runtime (thread_pool.h). Apart from the pool
// itself because only the runtime links a Halide runtime; the JIT installs it per pipeline.
#include <mutex>

#include "HalideRuntime.h"
#include "runtime/thread_pool.h"

namespace opfuse::runtime {

void install_thread_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (spinning_pool_enabled()) halide_set_custom_do_par_for(spinning_do_par_for);
  });
}

void install_thread_pool_into(void* set_custom_do_par_for) {
  if (!spinning_pool_enabled()) return;
  reinterpret_cast<halide_do_par_for_t (*)(halide_do_par_for_t)>(set_custom_do_par_for)(
      spinning_do_par_for);
}

}  // namespace opfuse::runtime
