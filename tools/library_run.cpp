#include "tools/library_run.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "fusion/ops/host_buffer.h"

namespace opfuse::tools {
namespace {

runtime::DType runtime_dtype(graph::DType d) {
  switch (d) {
    case graph::DType::f16:
      return runtime::DType::f16;
    case graph::DType::i64:
      return runtime::DType::i64;
    case graph::DType::i32:
      return runtime::DType::i32;
    case graph::DType::f32:
      break;
  }
  return runtime::DType::f32;
}

}  // namespace

LibraryRun::LibraryRun(const std::string& path, const graph::Graph& g,
                       const graph::TensorMap& inputs)
    : model_(runtime::Model::open(path)), g_(g) {
  std::map<std::string, std::string> by_c_name;  // C name -> graph tensor
  for (const auto& n : g.tensor_names()) by_c_name[ops::halide_safe_name(n)] = n;
  const graph::TensorMap params = graph::param_values(g);
  for (const auto& a : model_.inputs()) {
    const auto it = by_c_name.find(a.name);
    if (it == by_c_name.end()) {
      throw std::runtime_error(path + " takes '" + a.name + "', which is no tensor of the model");
    }
    const graph::Tensor& t = g.tensor(it->second);
    const graph::HostTensor& v =
        t.kind == graph::TensorKind::input ? inputs.at(t.name) : params.at(t.name);
    bool fits = v.shape.size() == a.shape.size();
    for (size_t d = 0; fits && d < v.shape.size(); ++d)
      fits = a.shape[d] < 0 || a.shape[d] == v.shape[d];
    if (!fits) {
      throw std::runtime_error(path + " takes '" + a.name + "' as " +
                               graph::shape_to_string(a.shape) + ", the model's is " +
                               graph::shape_to_string(v.shape) + ": built from another model?");
    }
    // In the tensor's storage dtype (integers are held as exact f32 values in the graph's).
    storage_.push_back(ops::tensor_buffer(t, v));
    ins_.push_back({storage_.back().data(), v.shape, runtime_dtype(t.dtype)});
  }
  for (const auto& a : model_.outputs()) {
    if (a.dtype != runtime::DType::f32) {
      throw std::runtime_error("output '" + a.name + "' is not f32: not supported by --library");
    }
    std::vector<int64_t> shape = a.shape;  // a dynamic batch's: the size the graph is at
    for (const auto& name : g.outputs()) {
      if (ops::halide_safe_name(name) == a.name) shape = g.tensor(name).shape;
    }
    outs_.emplace_back(shape, a.dtype);
  }
}

void LibraryRun::run() {
  std::vector<runtime::Tensor> outs;
  for (auto& o : outs_) outs.push_back(o.view());
  model_.run(ins_, outs);
}

graph::TensorMap LibraryRun::outputs() const {
  graph::TensorMap out;
  for (const auto& name : g_.outputs()) {
    const std::string c_name = ops::halide_safe_name(name);
    for (size_t i = 0; i < outs_.size(); ++i) {
      if (model_.outputs()[i].name != c_name) continue;
      graph::HostTensor t(outs_[i].shape);
      std::copy(outs_[i].as<float>(), outs_[i].as<float>() + t.data.size(), t.data.begin());
      out[name] = std::move(t);
    }
    if (!out.count(name)) throw std::runtime_error("the library has no output '" + name + "'");
  }
  return out;
}

}  // namespace opfuse::tools
