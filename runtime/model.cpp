#include "runtime/model.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "runtime/pool_allocator.h"
#include "runtime/thread_pool.h"

namespace opfuse::runtime {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

DType dtype_of(halide_type_t t) {
  if (t.code == halide_type_float) return t.bits == 16 ? DType::f16 : DType::f32;
  return t.bits == 64 ? DType::i64 : DType::i32;
}

halide_type_t halide_type_of(DType d) {
  switch (d) {
    case DType::f16: return halide_type_t(halide_type_float, 16);
    case DType::i64: return halide_type_t(halide_type_int, 64);
    case DType::i32: return halide_type_t(halide_type_int, 32);
    case DType::f32: break;
  }
  return halide_type_t(halide_type_float, 32);
}

// The generator names each output buffer after its tensor with "_out" appended.
std::string output_name(const std::string& c_name) {
  const std::string suffix = "_out";
  if (c_name.size() > suffix.size() &&
      c_name.compare(c_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return c_name.substr(0, c_name.size() - suffix.size());
  }
  return c_name;
}

std::string names_of(const std::vector<ArgInfo>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : ", ") + a.name;
  return s.empty() ? "none" : s;
}

}  // namespace

const char* to_string(DType d) {
  switch (d) {
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::f32: break;
  }
  return "f32";
}

size_t bytes_of(DType d) {
  switch (d) {
    case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::i32:
    case DType::f32: break;
  }
  return 4;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

OwnedTensor::OwnedTensor(std::vector<int64_t> s, DType d) : shape(std::move(s)), dtype(d) {
  bytes.resize(size_t(elements()) * bytes_of(dtype));
}

int64_t OwnedTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
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
    b.type = halide_type_of(t.dtype);
    b.dimensions = int32_t(t.shape.size());
    b.dim = dims_[i].data();
  }
}

HostBuffers::~HostBuffers() {
  for (auto& b : bufs_) {
    if (b.device) halide_device_free(nullptr, &b);
  }
}

Model::Model(std::string name, ArgvFunction fn, MetadataFunction metadata,
             const char* (*dynamic)())
    : name_(std::move(name)), fn_(fn) {
  // Per dimension, ';' between them: "SYMBOL MIN MAX [S1,S2,...] [@ARG.AXIS,...]"
  // (generators/weights_entry.cpp); without the pairs (one dimension), every axis with no
  // extent is its.
  std::vector<std::vector<std::pair<int, int>>> carriers;
  const std::string text = dynamic ? dynamic() : "";
  auto split = [](const std::string& s, char sep) {
    std::vector<std::string> f;
    for (size_t at = 0; at <= s.size();) {
      const size_t next = s.find(sep, at);
      f.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + 1;
    }
    return f;
  };
  try {
    for (const std::string& part : text.empty() ? std::vector<std::string>{} : split(text, ';')) {
      std::vector<std::string> f = split(part, ' ');
      carriers.emplace_back();
      if (f.size() > 3 && !f.back().empty() && f.back()[0] == '@') {
        for (const auto& pair : split(f.back().substr(1), ',')) {
          if (pair.empty()) continue;
          const size_t dot = pair.find('.');
          if (dot == std::string::npos) throw std::invalid_argument("pair");
          carriers.back().emplace_back(std::stoi(pair.substr(0, dot)),
                                       std::stoi(pair.substr(dot + 1)));
        }
        f.pop_back();
      }
      if (f.size() < 3 || f.size() > 4) throw std::invalid_argument("fields");
      DynamicDim d;
      d.symbol = f[0];
      d.min = std::stoll(f[1]);
      d.max = std::stoll(f[2]);
      if (f.size() == 4) {
        for (const auto& v : split(f[3], ',')) d.sizes.push_back(std::stoll(v));
      }
      dynamic_.push_back(std::move(d));
    }
    if (dynamic_.size() > 1) {
      for (const auto& c : carriers) {
        if (c.empty()) throw std::invalid_argument("carriers");
      }
    }
  } catch (const std::logic_error&) {
    throw std::runtime_error("model " + name_ + ": malformed dynamic dimensions '" + text + "'");
  }
  const halide_filter_metadata_t* md = metadata();
  for (int i = 0; i < md->num_arguments; ++i) {
    const halide_filter_argument_t& a = md->arguments[i];
    const bool out = a.kind == halide_argument_kind_output_buffer;
    ArgInfo info;
    info.name = out ? output_name(a.name) : a.name;
    info.dtype = dtype_of(a.type);
    // The generator sets every buffer's estimates to the tensor's exact extents.
    // A dynamic library's entry point leaves the dynamic dimensions' extents out.
    for (int d = a.dimensions - 1; d >= 0; --d) {
      const int64_t* extent = a.buffer_estimates ? a.buffer_estimates[2 * d + 1] : nullptr;
      info.shape.push_back(extent ? *extent : -1);
      if (extent || dynamic_.empty()) continue;
      const int axis = a.dimensions - 1 - d;
      std::string symbol;
      for (size_t k = 0; k < dynamic_.size(); ++k) {
        const auto& c = carriers[k];
        if (c.empty() || std::find(c.begin(), c.end(), std::make_pair(i, axis)) != c.end()) {
          symbol = dynamic_[k].symbol;
        }
      }
      if (symbol.empty()) {
        throw std::runtime_error("model " + name_ + ": argument '" + info.name + "' axis " +
                                 std::to_string(axis) + " has no size and no dynamic dimension ('" +
                                 text + "')");
      }
      info.dim_names.resize(size_t(a.dimensions));
      info.dim_names[size_t(axis)] = symbol;
    }
    (out ? outputs_ : inputs_).push_back(std::move(info));
  }
}

Model Model::open(const std::string& path, const std::string& entry) {
  const std::string fn_name =
      entry.empty() ? std::filesystem::path(path).stem().string() : entry;
  // RTLD_LOCAL: each library keeps its own Halide runtime and weights.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw std::runtime_error("cannot open compiled model " + path + ": " +
                             (why ? why : "unknown error"));
  }
  std::shared_ptr<void> lib(handle, [](void* h) { dlclose(h); });
  auto symbol = [&](const std::string& s) {
    void* p = dlsym(handle, s.c_str());
    if (!p) {
      throw std::runtime_error(path + " has no symbol " + s +
                               " (is it a library from `opfuse compile --shared`, and is its "
                               "entry point named " + fn_name + "?)");
    }
    return p;
  };
  auto fn = reinterpret_cast<ArgvFunction>(symbol(fn_name + "_argv"));
  auto md = reinterpret_cast<MetadataFunction>(symbol(fn_name + "_metadata"));
  auto dynamic = reinterpret_cast<const char* (*)()>(dlsym(handle, (fn_name + "_dynamic").c_str()));
  // The library's own Halide runtime reports errors through its own handler: route them to
  // the one that turns them into exceptions.
  if (void* set = dlsym(handle, "halide_set_error_handler")) install_error_handler_into(set);
  if (void* set = dlsym(handle, "halide_set_custom_do_par_for")) install_thread_pool_into(set);
  // Its intermediates from the pool (runtime/pool_allocator.h), as the JIT's are. On malloc,
  // a call's large blocks went back to the system when freed (glibc unmaps a mapped block and
  // trims the heap's top) and the next call faulted their pages in afresh: an expanding 1x1
  // conv, a depthwise conv and a 1x1 conv at 56x56x144 (two 1.8 MB intermediates) took 850
  // page faults and 1.6 ms a call, 0.42 ms from the pool (0.35 through the JIT).
  void* set_malloc = dlsym(handle, "halide_set_custom_malloc");
  void* set_free = dlsym(handle, "halide_set_custom_free");
  if (set_malloc && set_free) use_pooled_allocator_in(set_malloc, set_free);
  Model m(fn_name, fn, md, dynamic);
  m.library_ = std::move(lib);
  if (void* load = dlsym(handle, (fn_name + "_load_weights").c_str())) {
    m.load_weights_ = reinterpret_cast<int (*)(const char*)>(load);
    install_error_handler();
    check(m.load_weights_(nullptr), m.name_);  // the file beside the library
  }
  return m;
}

void Model::load_weights(const std::string& path) const {
  if (!load_weights_) {
    throw std::logic_error("model " + name_ + " carries its weights inside its library");
  }
  install_error_handler();
  check(load_weights_(path.c_str()), name_);
}

const ArgInfo& Model::input(const std::string& name) const {
  for (const auto& a : inputs_) {
    if (a.name == name) return a;
  }
  throw std::invalid_argument("model " + name_ + " has no input '" + name +
                              "' (inputs: " + names_of(inputs_) + ")");
}

const ArgInfo& Model::output(const std::string& name) const {
  for (const auto& a : outputs_) {
    if (a.name == name) return a;
  }
  throw std::invalid_argument("model " + name_ + " has no output '" + name +
                              "' (outputs: " + names_of(outputs_) + ")");
}

const DynamicDim* Model::dynamic(const std::string& symbol) const {
  for (const auto& d : dynamic_) {
    if (d.symbol == symbol) return &d;
  }
  return nullptr;
}

void Model::check_size(const DynamicDim& d, const std::string& role, int64_t v) const {
  const std::string what =
      "model " + name_ + ": " + role + " has " + d.symbol + " = " + std::to_string(v);
  if (v < d.min || v > d.max) {
    throw std::invalid_argument(what + ", outside the sizes the library was compiled for, " +
                                std::to_string(d.min) + ".." + std::to_string(d.max));
  }
  if (!d.sizes.empty() && std::find(d.sizes.begin(), d.sizes.end(), v) == d.sizes.end()) {
    std::string listed;
    for (int64_t x : d.sizes) listed += (listed.empty() ? "" : ", ") + std::to_string(x);
    throw std::invalid_argument(what + ", not one of the sizes the library was compiled for: " + listed);
  }
}

void Model::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const {
  install_error_handler();
  install_thread_pool();
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("model " + name_ + ": " + what);
  };
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    fail("takes " + std::to_string(inputs_.size()) + " inputs and " +
         std::to_string(outputs_.size()) + " outputs, got " + std::to_string(inputs.size()) +
         " and " + std::to_string(outputs.size()));
  }
  // Each dynamic dimension's size, from the first tensor that carries it.
  std::map<std::string, std::pair<int64_t, std::string>> sizes;
  for (size_t i = 0; i < inputs.size() + outputs.size(); ++i) {
    const bool is_out = i >= inputs.size();
    const Tensor& t = is_out ? outputs[i - inputs.size()] : inputs[i];
    const ArgInfo& info = is_out ? outputs_[i - inputs.size()] : inputs_[i];
    const std::string role = std::string(is_out ? "output" : "input") + " '" + info.name + "'";
    if (t.data == nullptr) fail(role + " has no data (null pointer)");
    if (t.dtype != info.dtype) {
      fail(role + " must be " + to_string(info.dtype) + ", got " + to_string(t.dtype));
    }
    bool fits = t.shape.size() == info.shape.size();
    for (size_t a = 0; fits && a < t.shape.size(); ++a) {
      fits = info.shape[a] < 0 || t.shape[a] == info.shape[a];
    }
    if (!fits) {
      std::string want = "[";
      for (size_t a = 0; a < info.shape.size(); ++a) {
        want += (a ? "," : "") +
                (info.shape[a] < 0 ? info.dim_names[a] : std::to_string(info.shape[a]));
      }
      fail(role + " must have shape " + want + "], got " + shape_str(t.shape));
    }
    for (size_t a = 0; a < info.dim_names.size(); ++a) {
      if (info.dim_names[a].empty()) continue;
      const std::string& symbol = info.dim_names[a];
      const int64_t v = t.shape[a];
      const auto seen = sizes.find(symbol);
      if (seen == sizes.end()) {
        sizes[symbol] = {v, role};
        check_size(*dynamic(symbol), role, v);
      } else if (v != seen->second.first) {
        fail(role + " has " + symbol + " = " + std::to_string(v) + " but " + seen->second.second +
             " has " + std::to_string(seen->second.first));
      }
    }
  }
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
  check(rc, name_);
}

std::map<std::string, OwnedTensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  std::vector<Tensor> ins;
  for (const auto& a : inputs_) {
    const auto it = inputs.find(a.name);
    if (it == inputs.end()) {
      throw std::invalid_argument("model " + name_ + ": input '" + a.name + "' is not given (" +
                                  to_string(a.dtype) + " " + shape_str(a.shape) + ")");
    }
    ins.push_back(it->second);
  }
  for (const auto& [name, t] : inputs) input(name);  // an unknown name is an error
  // The dynamic dimensions' sizes from the inputs (run() checks them all).
  std::map<std::string, int64_t> sizes;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    for (size_t a = 0; a < inputs_[i].dim_names.size(); ++a) {
      const std::string& symbol = inputs_[i].dim_names[a];
      if (symbol.empty() || a >= ins[i].shape.size() || sizes.count(symbol)) continue;
      sizes[symbol] = ins[i].shape[a];
      // Before the outputs are allocated.
      check_size(*dynamic(symbol), "input '" + inputs_[i].name + "'", sizes[symbol]);
    }
  }
  std::map<std::string, OwnedTensor> out;
  std::vector<Tensor> outs;
  for (const auto& a : outputs_) {
    std::vector<int64_t> shape = a.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0)
        shape[d] = sizes.count(a.dim_names[d]) ? sizes[a.dim_names[d]]
                                               : 0;  // run() refuses a missing size
    }
    out[a.name] = OwnedTensor(shape, a.dtype);
  }
  for (const auto& a : outputs_) outs.push_back(out[a.name].view());
  run(ins, outs);
  return out;
}

}  // namespace opfuse::runtime
