// A compiled model, as a user holds it: the generated function of a library that carries its
// weights (`opfuse compile`, opfuse_add_fused_library), its inputs and outputs by name, shape
// and dtype, and run().
//
//   Tensor      a row-major view (data pointer, shape, dtype) of memory the caller owns; the
//               runtime never copies host data (GPU targets copy to and from the device)
//   OwnedTensor a tensor with its memory, as run() by name returns outputs
//   Model       one generated function: from a library linked into the program (its NAME_argv
//               and NAME_metadata), or a shared object opened by path (Model::open)
//
// run() checks every tensor before the call (with a dynamic batch: every tensor carrying it
// at one size, within the compiled range) and throws std::invalid_argument naming the
// argument and what was expected; a failure inside the library (a weights file that does not
// load, a GPU error) throws KernelError. A Model may be run from many threads at once.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/errors.h"

namespace opfuse::runtime {

enum class DType { f32, f16, i64, i32 };
const char* to_string(DType d);
size_t bytes_of(DType d);

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
  static Tensor i64(const int64_t* data, std::vector<int64_t> shape) {
    return {const_cast<int64_t*>(data), std::move(shape), DType::i64};
  }
  int64_t elements() const;
};

struct OwnedTensor {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  std::vector<unsigned char> bytes;

  OwnedTensor() = default;
  OwnedTensor(std::vector<int64_t> shape, DType dtype);
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  Tensor view() { return {bytes.data(), shape, dtype}; }
  int64_t elements() const;
};

struct ArgInfo {
  std::string name;
  std::vector<int64_t> shape;  // row-major; -1 for a dynamic dimension's axis (a batch)
  DType dtype = DType::f32;
  std::vector<std::string> dim_names;  // per axis, the symbol of a -1 axis; empty if none
};

// A dimension of a dynamic library: a range of sizes it serves (`opfuse compile --dim
// batch=MIN..MAX`; the inputs that carry it and every output have it as their first axis),
// or a list of sizes, a function each (`--dim seq=32,77,128`). A library may have several
// (one range at most).
struct DynamicDim {
  std::string symbol;
  int64_t min = 1, max = 1;
  std::vector<int64_t> sizes;  // empty: every size in min..max
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

class Model {
 public:
  // A generated function linked into this program: NAME_argv and NAME_metadata from NAME.h.
  // `name` labels errors.
  Model(std::string name, ArgvFunction fn, MetadataFunction metadata,
        const char* (*dynamic)() = nullptr);
  // A shared object (`opfuse compile --shared` writes NAME.so); `entry` is the generated
  // function's name, by default the file's stem. Throws std::runtime_error naming the file
  // and what is missing. The object stays loaded while a Model from it lives; opening one path
  // twice gives two Models of one library (dlopen's), sharing its weights. A library with a
  // weights file loads and checks it here (KernelError saying what is wrong with it).
  static Model open(const std::string& path, const std::string& entry = "");

  const std::string& name() const { return name_; }
  // In the generated function's order (graph inputs, then any weights it takes as
  // arguments); then the outputs.
  const std::vector<ArgInfo>& inputs() const { return inputs_; }
  const std::vector<ArgInfo>& outputs() const { return outputs_; }
  const ArgInfo& input(const std::string& name) const;
  const ArgInfo& output(const std::string& name) const;
  // The dimensions a dynamic library serves several sizes of; empty for fixed shapes.
  const std::vector<DynamicDim>& dynamic_dims() const { return dynamic_; }
  // The one named `symbol`; nullptr if there is none.
  const DynamicDim* dynamic(const std::string& symbol) const;

  // Into the caller's buffers, in the order of inputs() and outputs().
  void run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const;
  // By name: every input given once; returns every output, allocated here.
  std::map<std::string, OwnedTensor> run(const std::map<std::string, Tensor>& inputs) const;

  // A library with a weights file (`opfuse compile --weights file`): loads and checks `path`
  // instead of the NAME.weights beside it. KernelError if the file is missing, truncated,
  // corrupted or another model's (the weights loaded before stay); std::logic_error for a
  // library that carries its weights inside.
  void load_weights(const std::string& path) const;

  // The generated function itself (halide_buffer_t* per argument, in the order above), for
  // callers that keep buffers on the device between calls (bench/gpu).
  ArgvFunction entry() const { return fn_; }

 private:
  // std::invalid_argument naming `role` when `size` is not one the dynamic dimension serves.
  void check_size(const DynamicDim& d, const std::string& role, int64_t size) const;

  std::string name_;
  ArgvFunction fn_;
  std::vector<ArgInfo> inputs_, outputs_;
  std::vector<DynamicDim> dynamic_;
  std::shared_ptr<void> library_;  // the dlopen handle of Model::open
  int (*load_weights_)(const char*) = nullptr;  // NAME_load_weights of a weights-file library
};

}  // namespace opfuse::runtime
