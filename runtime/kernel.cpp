#include "runtime/kernel.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <sstream>

namespace opfuse::runtime {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::function<void(const Kernel&, double)>& timing_hook() {
  static std::function<void(const Kernel&, double)> hook;
  return hook;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

const char* to_string(DType d) { return d == DType::f16 ? "f16" : "f32"; }

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Kernel::Kernel(std::string model, std::string strategy, std::string target, ArgvFunction fn,
               MetadataFunction metadata)
    : model_(std::move(model)),
      strategy_(std::move(strategy)),
      target_(std::move(target)),
      fn_(fn) {
  const halide_filter_metadata_t* md = metadata();
  for (int i = 0; i < md->num_arguments; ++i) {
    const halide_filter_argument_t& a = md->arguments[i];
    ArgInfo info;
    info.name = a.name;
    info.dtype = a.type.bits == 16 ? DType::f16 : DType::f32;
    // The generator sets every buffer's estimates to the tensor's exact extents.
    for (int d = a.dimensions - 1; d >= 0; --d) {
      const int64_t* extent = a.buffer_estimates ? a.buffer_estimates[2 * d + 1] : nullptr;
      info.shape.push_back(extent ? *extent : -1);
    }
    (a.kind == halide_argument_kind_output_buffer ? outputs_ : inputs_).push_back(std::move(info));
  }
}

HostBuffers::HostBuffers(const std::vector<Tensor>& tensors)
    : bufs_(tensors.size()), dims_(tensors.size()) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    int32_t stride = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const int64_t extent = t.shape[t.shape.size() - 1 - d];
      dims_[i].push_back(halide_dimension_t{0, int32_t(extent), stride, 0});
      stride *= int32_t(extent);
    }
    halide_buffer_t& b = bufs_[i];
    b.host = static_cast<uint8_t*>(t.data);
    b.type = t.dtype == DType::f16 ? halide_type_t(halide_type_float, 16)
                                   : halide_type_t(halide_type_float, 32);
    b.dimensions = int32_t(t.shape.size());
    b.dim = dims_[i].data();
  }
}

HostBuffers::~HostBuffers() {
  for (auto& b : bufs_) {
    if (b.device) halide_device_free(nullptr, &b);
  }
}

void Kernel::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const {
  install_error_handler();
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("kernel " + name() + ": " + what);
  };
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    fail("takes " + std::to_string(inputs_.size()) + " inputs and " +
         std::to_string(outputs_.size()) + " outputs, got " + std::to_string(inputs.size()) +
         " and " + std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < inputs.size() + outputs.size(); ++i) {
    const bool is_out = i >= inputs.size();
    const Tensor& t = is_out ? outputs[i - inputs.size()] : inputs[i];
    const ArgInfo& info = is_out ? outputs_[i - inputs.size()] : inputs_[i];
    const std::string role = std::string(is_out ? "output" : "input") + " '" + info.name + "'";
    if (t.data == nullptr) fail(role + " has no data (null pointer)");
    if (t.dtype != info.dtype) {
      fail(role + " must be " + to_string(info.dtype) + ", got " + to_string(t.dtype));
    }
    if (t.shape != info.shape) {
      fail(role + " must have shape " + shape_str(info.shape) + ", got " + shape_str(t.shape));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  {
    HostBuffers ins(inputs), outs(outputs);
    std::vector<void*> argv;
    for (auto& b : ins) {
      b.flags = halide_buffer_flag_host_dirty;  // host memory is the truth for inputs: a GPU
      argv.push_back(&b);                       // kernel copies it to the device first
    }
    for (auto& b : outs) argv.push_back(&b);
    rc = fn_(argv.data());
    // GPU targets leave outputs on the device: bring them back; device memory is freed with
    // the buffers, here.
    for (auto& b : outs) {
      if (b.device && rc == 0) rc = halide_copy_to_host(nullptr, &b);
    }
  }
  check(rc, name());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timing_hook()) timing_hook()(*this, seconds);
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add(Kernel k) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  kernels_.push_back(std::move(k));
}

const Kernel& Registry::find(const std::string& model, const std::string& strategy,
                             const std::string& target) const {
  for (const Kernel& k : kernels_) {
    if (k.model() == model && k.strategy() == strategy && k.target() == target) return k;
  }
  std::string known;
  for (const Kernel& k : kernels_) known += (known.empty() ? "" : ", ") + k.name();
  throw std::out_of_range(
      "no kernel " + model + "/" + strategy + "/" + target +
      " is linked into this program (available: " + (known.empty() ? "none" : known) + ")");
}

std::vector<const Kernel*> Registry::all() const {
  std::vector<const Kernel*> out;
  for (const Kernel& k : kernels_) out.push_back(&k);
  return out;
}

Registration::Registration(const char* model, const char* strategy, const char* target,
                           ArgvFunction fn, MetadataFunction metadata) {
  Registry::global().add(Kernel(model, strategy, target, fn, metadata));
}

void set_timing_hook(std::function<void(const Kernel&, double)> hook) {
  timing_hook() = std::move(hook);
}

}  // namespace opfuse::runtime
