// The GPU-style (gpu_tile) schedule of the elementwise chain, run through Halide's OpenCL
// runtime on PoCL, against the plain C++ reference.
#include <HalideBuffer.h>
#include <HalideRuntimeOpenCL.h>
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ew_chain_opencl.h"
#include "fusion/reference/ew_chain.h"
#include "runtime/errors.h"

TEST_CASE("ew_chain_opencl on PoCL equals the C++ reference") {
  for (int n : {1, 255, 256, 100003}) {
    CAPTURE(n);
    std::mt19937 rng(n);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    std::vector<float> x(n), y(n, -1.0f);
    for (float& v : x) v = dist(rng);
    Halide::Runtime::Buffer<float, 1> in(x.data(), n), out(y.data(), n);
    // Host memory wrapped by a Buffer is not marked dirty, and Halide copies an input to the
    // device only when its host side is dirty: without this the kernel reads stale device
    // memory. The kernel leaves `out` dirty on the device.
    in.set_host_dirty();
    opfuse::runtime::check(ew_chain_opencl(in, 1.25f, -0.5f, out), "ew_chain_opencl");
    out.copy_to_host();
    CHECK(out.raw_buffer()->device_interface ==
          halide_opencl_device_interface());  // it did run on OpenCL
    // Tolerance: kEwChainTolerance (OpenCL C contracts scale * x + bias into an FMA).
    const auto cmp = opfuse::reference::compare(y, opfuse::reference::ew_chain(x, 1.25f, -0.5f),
                                                opfuse::reference::kEwChainTolerance);
    CHECK_MESSAGE(cmp.ok(), cmp.summary());
    out.device_free();
    in.device_free();
  }
}
