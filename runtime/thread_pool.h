// The thread pool that runs the kernels' parallel loops, in place of Halide's default one.
//
// Why: Halide's default workers go to sleep on a condition variable as soon as a parallel loop
// ends, and a network runs one parallel loop per fused group, with serial work between them
// (a group too small to split, the next group's set-up). On a virtual machine, waking a
// sleeping worker costs tens of microseconds (measured here: a 2-task loop of 16 us each took
// 19 us back to back, 40-120 us after a 50-1000 us gap, more than the 32 us it takes on one
// thread). These workers spin between loops for a short budget (OPFUSE_SPIN_US, default 1000 us)
// before they sleep, as ONNX Runtime's and OpenMP's do, so the loops of one inference find them
// awake and an idle process stops burning cores after a millisecond. Measured through the JIT
// (`opfuse run --reps 300 --compare-spin`, spinning and sleeping alternated every 5 runs in one
// process, 2 Zen 4 cores): EfficientNet-B0 14.3 -> 11.7 ms, MobileNetV2 9.98 -> 9.72,
// ResNet-18 27.5 -> 27.2.
//
// A loop's tasks are shared out as contiguous runs, one a thread, each taken in order by its
// owner and from its far end by a thread that has finished its own (thread_pool.cpp says why).
//
// The pool has HL_NUM_THREADS threads (the caller counted), else one per online CPU, as
// Halide's own; OPFUSE_THREAD_POOL=halide keeps Halide's pool. A parallel loop inside a task,
// or one started while another thread's loop runs, runs serially on its caller.
#pragma once

#include <cstdint>

namespace opfuse::runtime {

// Halide's halide_do_par_for signature (HalideRuntime.h): runs f(user_context, i, closure)
// for i in [min, min + size), returns the first non-zero result or 0.
using ParTask = int (*)(void* user_context, int idx, uint8_t* closure);
int spinning_do_par_for(void* user_context, ParTask f, int min, int size, uint8_t* closure);

// The threads the pool runs loops on, the caller included.
int pool_threads();

// How long an idle worker spins before it sleeps (the default: OPFUSE_SPIN_US, else 1000 us);
// 0 sleeps at once, as Halide's own pool does.
void set_spin_us(int us);
int spin_us();

// False where OPFUSE_THREAD_POOL=halide asks for Halide's own pool (to compare the two).
bool spinning_pool_enabled();

// Makes the statically linked Halide runtime (AOT libraries linked into this program) run its
// parallel loops on this pool. Once per process; later calls do nothing.
void install_thread_pool();

// The same for another Halide runtime (a shared object's own): `set_custom_do_par_for` is that
// runtime's halide_set_custom_do_par_for.
void install_thread_pool_into(void* set_custom_do_par_for);

}  // namespace opfuse::runtime
