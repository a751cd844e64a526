// The thin runtime: tensors over user memory, and a registry of AOT-built kernels.
//
//   Tensor    a row-major view (data pointer, shape, dtype) of memory the caller owns; the
//             runtime never copies host data (GPU targets copy to and from the device)
//   Kernel    one generated function: model x strategy x target, its inputs and outputs as
//             the generator declared them (names, shapes, dtypes), and run()
//   Registry  every kernel linked into the program, registered at start-up by the code
//             opfuse_add_fused_library() generates
//
// run() checks every tensor before the call and throws std::invalid_argument naming the
// argument and what was expected; a failure inside the kernel throws KernelError. Kernels may
// be called from many threads at once.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/errors.h"

namespace opfuse::runtime {

enum class DType { f32, f16 };
const char* to_string(DType d);

struct Tensor {
  void* data = nullptr;
  std::vector<int64_t> shape;  // row-major: the last axis is contiguous
  DType dtype = DType::f32;

  static Tensor f32(float* data, std::vector<int64_t> shape) {
    return {data, std::move(shape), DType::f32};
  }
  static Tensor f32(const float* data, std::vector<int64_t> shape) {
    return {const_cast<float*>(data), std::move(shape), DType::f32};
  }
  int64_t elements() const;
};

struct ArgInfo {
  std::string name;
  std::vector<int64_t> shape;  // row-major
  DType dtype = DType::f32;
};

// Halide buffers over tensors' memory (dimension 0 = the last axis), one per tensor, as a
// generated function takes them. Device memory a buffer acquires is freed with it.
class HostBuffers {
 public:
  explicit HostBuffers(const std::vector<Tensor>& tensors);
  ~HostBuffers();
  HostBuffers(const HostBuffers&) = delete;
  HostBuffers& operator=(const HostBuffers&) = delete;
  size_t size() const { return bufs_.size(); }
  halide_buffer_t& operator[](size_t i) { return bufs_[i]; }
  std::vector<halide_buffer_t>::iterator begin() { return bufs_.begin(); }
  std::vector<halide_buffer_t>::iterator end() { return bufs_.end(); }

 private:
  std::vector<halide_buffer_t> bufs_;
  std::vector<std::vector<halide_dimension_t>> dims_;
};

using ArgvFunction = int (*)(void**);
using MetadataFunction = const halide_filter_metadata_t* (*)();

class Kernel {
 public:
  Kernel(std::string model, std::string strategy, std::string target, ArgvFunction fn,
         MetadataFunction metadata);

  const std::string& model() const { return model_; }
  const std::string& strategy() const { return strategy_; }
  const std::string& target() const { return target_; }  // host, host-opencl, host-cuda
  std::string name() const { return model_ + "/" + strategy_ + "/" + target_; }
  // Graph inputs then params, in the generated function's order; then outputs.
  const std::vector<ArgInfo>& inputs() const { return inputs_; }
  const std::vector<ArgInfo>& outputs() const { return outputs_; }

  void run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const;
  // The generated function itself (halide_buffer_t* per argument, in the order above), for
  // callers that keep buffers on the device between calls (bench/gpu).
  ArgvFunction entry() const { return fn_; }

 private:
  std::string model_, strategy_, target_;
  ArgvFunction fn_;
  std::vector<ArgInfo> inputs_, outputs_;
};

class Registry {
 public:
  static Registry& global();
  void add(Kernel k);
  // std::out_of_range listing what is registered if there is no such kernel.
  const Kernel& find(const std::string& model, const std::string& strategy,
                     const std::string& target = "host") const;
  std::vector<const Kernel*> all() const;

 private:
  std::vector<Kernel> kernels_;
};

// A static object of this type registers a kernel before main() runs.
struct Registration {
  Registration(const char* model, const char* strategy, const char* target, ArgvFunction fn,
               MetadataFunction metadata);
};

// Called after every successful run with the kernel and its wall time (seconds); empty by
// default. Set it before starting threads that run kernels.
void set_timing_hook(std::function<void(const Kernel&, double)> hook);

}  // namespace opfuse::runtime
