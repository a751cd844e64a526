// A fused elementwise chain y = square(relu(scale * x + bias)): four operators, one loop nest.
//
// 7.1.1: unfused, a chain of n elementwise ops reads and writes global memory 2n times and
// launches n kernels; fused it reads once and writes once (S = n for a bandwidth-bound
// chain). Here n = 4: the three producers are inlined into the output's loop, so every
// element is loaded once, transformed in registers and stored once.
#include "Halide.h"

namespace {

using namespace Halide;

class EwChain : public Generator<EwChain> {
 public:
  Input<Buffer<float, 1>> input{"input"};
  Input<float> scale{"scale"};
  Input<float> bias{"bias"};
  Output<Buffer<float, 1>> output{"output"};

  // Threads per GPU block. 256 keeps a block within every device's limit (1024 on NVIDIA,
  // PoCL reports 4096) while giving the scheduler several blocks per SM.
  GeneratorParam<int> gpu_block{"gpu_block", 256, 32, 1024};
  // Elements per parallel CPU task: 64 Ki floats = 256 KiB in + 256 KiB out, large enough
  // to amortise the task overhead, small enough to give both cores work on 1 Mi elements.
  GeneratorParam<int> cpu_task{"cpu_task", 1 << 16, 1, 1 << 24};

  void generate() {
    // --- Algorithm -------------------------------------------------------------------
    scaled(x) = input(x) * scale;
    biased(x) = scaled(x) + bias;
    relu(x) = max(biased(x), 0.0f);
    output(x) = relu(x) * relu(x);

    // --- Estimates (used by the autoschedulers) ---------------------------------------
    input.set_estimates({{0, 1 << 24}});
    scale.set_estimate(2.0f);
    bias.set_estimate(-1.0f);
    output.set_estimates({{0, 1 << 24}});

    // --- Schedule --------------------------------------------------------------------
    if (using_autoscheduler()) return;
    // The producers are inlined: their values exist only in registers of the output loop.
    scaled.compute_inline();
    biased.compute_inline();
    relu.compute_inline();
    if (get_target().has_gpu_feature()) {
      // One thread per element; GuardWithIf so that any extent is legal.
      output.gpu_tile(x, xo, xi, gpu_block, TailStrategy::GuardWithIf);
    } else {
      // for xo in parallel: for xi vectorised by the target's natural width.
      const int vec = natural_vector_size<float>();
      output.split(x, xo, xi, cpu_task, TailStrategy::GuardWithIf)
          .parallel(xo)
          .vectorize(xi, vec, TailStrategy::GuardWithIf);
    }
  }

 private:
  Var x{"x"}, xo{"xo"}, xi{"xi"};
  Func scaled{"scaled"}, biased{"biased"}, relu{"relu"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(EwChain, ew_chain)
