# Every external dependency is found here, once.
#
# Halide 21 comes from PyPI's `halide` wheel (tools/setup.sh passes Halide_DIR and
# HalideHelpers_DIR from `python -c "import halide; print(halide.install_dir())"`).
find_package(Halide 21 REQUIRED)
find_package(doctest REQUIRED)
find_package(benchmark REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(ONNX REQUIRED)      # Debian libonnx-dev: ONNX import
find_package(Protobuf REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)  # Debian OpenMPI: `opfuse explore --mpi`

# CUDA: only the toolkit's `ptxas` is needed, to assemble the PTX that Halide emits for
# host-cuda. Without it the host-cuda libraries are not built and the PTX test reports a skip.
find_program(OPFUSE_PTXAS ptxas HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
if (OPFUSE_PTXAS)
  set(OPFUSE_HAVE_CUDA ON)
  message(STATUS "opfuse: CUDA toolkit found (${OPFUSE_PTXAS}); building host-cuda kernels")
else ()
  set(OPFUSE_HAVE_CUDA OFF)
  message(STATUS "opfuse: no ptxas found; host-cuda kernels are not built")
endif ()

# Halide 21 emits PTX for at most compute capability 8.6; the driver JIT-compiles it for
# newer chips (sm_90 on H200), and ptxas -arch=sm_90 checks that it assembles there.
set(OPFUSE_CUDA_TARGET "host-cuda-cuda_capability_86" CACHE STRING "Halide target for CUDA kernels")
# Explicit x86-64 ISAs (opfuse_add_fused_library's x86-avx2 and x86-avx512 targets): AVX2 as on
# Zen 3 / Haswell and later, AVX-512 as Skylake-SP's subset (F, CD, BW, DQ, VL), which Zen 4
# and later run too.
set(OPFUSE_X86_AVX2_TARGET "x86-64-linux-sse41-avx-f16c-fma-avx2" CACHE STRING
    "Halide target for the x86-avx2 kernels")
set(OPFUSE_X86_AVX512_TARGET "x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake"
    CACHE STRING "Halide target for the x86-avx512 kernels")
set(OPFUSE_OPENCL_TARGET "host-opencl" CACHE STRING "Halide target for OpenCL kernels")
set(OPFUSE_PTX_ARCH "sm_90" CACHE STRING "ptxas -arch used to check the emitted PTX")

# One Halide runtime for every generated library in the project: its targets are the union
# of those of the libraries that use it, so one binary can hold host, OpenCL and CUDA kernels.
add_halide_runtime(opfuse_halide_runtime)
