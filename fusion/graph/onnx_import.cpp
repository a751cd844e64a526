#include "fusion/graph/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "fusion/graph/op_schema.h"

namespace opfuse::graph {
namespace {

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string source)
      : model_(model), source_(std::move(source)) {
    for (const auto& op : model.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    }
  }

  Graph run() {
    const onnx::GraphProto& gp = model_.graph();
    g_.name = gp.name().empty() ? "onnx_model" : gp.name();
    for (const auto& init : gp.initializer()) add_initializer(init);
    for (const auto& vi : gp.input()) {
      if (!g_.has_tensor(vi.name()) && !int_constants_.count(vi.name())) add_input(vi);
    }
    for (int i = 0; i < gp.node_size(); ++i) add_node(gp.node(i), i);
    for (const auto& out : gp.output()) g_.mark_output(out.name());
    try {
      g_.validate();
    } catch (const GraphError& e) {
      throw GraphError(source_ + ": " + e.what());
    }
    return g_;
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& n, const std::string& name,
                           const std::string& what) {
    throw GraphError(source_ + ": ONNX node '" + name + "' (" + n.op_type() + ", opset " +
                     std::to_string(opset_) + "): " + what);
  }

  static std::vector<float> float_values(const onnx::TensorProto& t) {
    std::vector<float> v(t.float_data().begin(), t.float_data().end());
    if (v.empty() && !t.raw_data().empty()) {
      v.resize(t.raw_data().size() / sizeof(float));
      std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
    }
    return v;
  }

  static std::vector<int64_t> int_values(const onnx::TensorProto& t) {
    std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
    if (v.empty() && !t.raw_data().empty()) {
      v.resize(t.raw_data().size() / sizeof(int64_t));
      std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
    }
    return v;
  }

  void add_initializer(const onnx::TensorProto& t) {
    if (t.data_type() == onnx::TensorProto::INT64) {  // shapes for Reshape
      int_constants_[t.name()] = int_values(t);
      return;
    }
    if (t.data_type() != onnx::TensorProto::FLOAT) {
      throw GraphError(source_ + ": initializer '" + t.name() + "' has ONNX data type " +
                       std::to_string(t.data_type()) + "; only float32 weights are supported");
    }
    Tensor p;
    p.name = t.name();
    p.kind = TensorKind::param;
    p.shape.assign(t.dims().begin(), t.dims().end());
    p.data = float_values(t);
    // Checked here, before any op reads the values (Gemm transposes them at import).
    const int64_t want = num_elements(p.shape);
    if (want < 0 || int64_t(p.data.size()) != want) {
      throw GraphError(source_ + ": initializer '" + t.name() + "' has dims " +
                       shape_to_string(p.shape) + " but carries " + std::to_string(p.data.size()) +
                       " values");
    }
    g_.add_tensor(std::move(p));
  }

  void add_input(const onnx::ValueInfoProto& vi) {
    Tensor t;
    t.name = vi.name();
    t.kind = TensorKind::input;
    const auto& tt = vi.type().tensor_type();
    if (tt.elem_type() == onnx::TensorProto::FLOAT16) {
      t.dtype = DType::f16;
    } else if (tt.elem_type() != onnx::TensorProto::FLOAT) {
      throw GraphError(source_ + ": graph input '" + vi.name() + "' has ONNX data type " +
                       std::to_string(tt.elem_type()) + "; only float32 and float16 are supported");
    }
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value()) {
        throw GraphError(source_ + ": graph input '" + vi.name() + "' has a symbolic dimension '" +
                         d.dim_param() + "'; give the model static shapes");
      }
      t.shape.push_back(d.dim_value());
    }
    if (t.shape.size() == 4) t.layout = Layout::NCHW;
    g_.add_tensor(std::move(t));
  }

  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& key) {
    for (const auto& a : n.attribute()) {
      if (a.name() == key) return &a;
    }
    return nullptr;
  }
  int64_t int_attr(const onnx::NodeProto& n, const std::string& key, int64_t fallback) {
    const auto* a = attr(n, key);
    return a ? a->i() : fallback;
  }
  double float_attr(const onnx::NodeProto& n, const std::string& key, double fallback) {
    const auto* a = attr(n, key);
    return a ? double(a->f()) : fallback;
  }
  std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& key) {
    const auto* a = attr(n, key);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }

  void add_node(const onnx::NodeProto& on, int index) {
    const std::string name =
        on.name().empty() ? on.op_type() + "_" + std::to_string(index) : on.name();
    if (on.output_size() != 1)
      refuse(on, name, "has " + std::to_string(on.output_size()) + " outputs; opfuse supports 1");
    Node n;
    n.name = name;
    n.outputs = {on.output(0)};
    for (const auto& in : on.input()) {
      if (!in.empty()) n.inputs.push_back(in);
    }
    const std::string& op = on.op_type();
    static const std::map<std::string, std::string> simple = {
        {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Add", "add"},
        {"Mul", "mul"},   {"Sub", "sub"},         {"Div", "div"},   {"MatMul", "matmul"}};
    if (auto it = simple.find(op); it != simple.end()) {
      n.op = it->second;
    } else if (op == "Gelu") {
      n.op = "gelu";
      if (const auto* a = attr(on, "approximate"); a && a->s() == "tanh") {
        n.attrs["approximate"] = std::string("tanh");
      }
    } else if (op == "Conv") {
      n.op = "conv2d";
      const auto* ap = attr(on, "auto_pad");
      if (ap && ap->s() != "NOTSET" && ap->s() != "VALID")
        refuse(on, name, "auto_pad " + ap->s() + " is not supported; give explicit pads");
      window_attrs(on, n);
      if (auto d = ints_attr(on, "dilations"); !d.empty()) n.attrs["dilations"] = d;
      n.attrs["groups"] = int_attr(on, "group", 1);
      n.attrs["layout"] = std::string("NCHW");
    } else if (op == "BatchNormalization") {
      n.op = "batch_norm";
      n.inputs.resize(std::min<size_t>(n.inputs.size(), 5));
      n.attrs["epsilon"] = float_attr(on, "epsilon", 1e-5);
      n.attrs["axis"] = int64_t{1};
    } else if (op == "MaxPool" || op == "AveragePool") {
      n.op = op == "MaxPool" ? "max_pool" : "avg_pool";
      if (int_attr(on, "ceil_mode", 0) != 0) refuse(on, name, "ceil_mode = 1 is not supported");
      for (int64_t d : ints_attr(on, "dilations")) {
        if (d != 1) refuse(on, name, "pooling dilations are not supported");
      }
      n.attrs["kernel"] = ints_attr(on, "kernel_shape");
      n.attrs["strides"] = std::vector<int64_t>{1, 1};  // ONNX's default stride is 1
      window_attrs(on, n);
      if (op == "AveragePool") n.attrs["count_include_pad"] = int_attr(on, "count_include_pad", 0);
      n.attrs["layout"] = std::string("NCHW");
    } else if (op == "GlobalAveragePool") {
      n.op = "global_avg_pool";
      n.attrs["layout"] = std::string("NCHW");
    } else if (op == "Gemm") {
      gemm(on, name, n);
    } else if (op == "Softmax") {
      n.op = "softmax";
      n.attrs["axis"] = int_attr(on, "axis", opset_ >= 13 ? -1 : 1);
    } else if (op == "LayerNormalization") {
      n.op = "layer_norm";
      n.attrs["axis"] = int_attr(on, "axis", -1);
      n.attrs["epsilon"] = float_attr(on, "epsilon", 1e-5);
      if (n.inputs.size() == 2) n.inputs.push_back(zeros_like_scale(n.inputs[1], name));
    } else if (op == "Transpose") {
      n.op = "transpose";
      if (auto p = ints_attr(on, "perm"); !p.empty()) n.attrs["perm"] = p;
    } else if (op == "Reshape") {
      n.op = "reshape";
      if (n.inputs.size() != 2 || !int_constants_.count(n.inputs[1])) {
        refuse(on, name, "the target shape must be a constant (an int64 initializer)");
      }
      if (int_attr(on, "allowzero", 0) != 0) refuse(on, name, "allowzero = 1 is not supported");
      n.attrs["shape"] = int_constants_.at(n.inputs[1]);
      n.inputs.resize(1);
    } else if (op == "Concat") {
      n.op = "concat";
      n.attrs["axis"] = int_attr(on, "axis", 0);
    } else {
      refuse(on, name,
             "op '" + op +
                 "' is not supported (supported: Conv, BatchNormalization, "
                 "Relu, Sigmoid, Tanh, Gelu, Add, Mul, Sub, Div, MaxPool, AveragePool, "
                 "GlobalAveragePool, Gemm, MatMul, Softmax, LayerNormalization, Transpose, "
                 "Reshape, Concat)");
    }
    try {
      g_.add_node(std::move(n));
    } catch (const GraphError& e) {
      throw GraphError(source_ + ": " + e.what());
    }
  }

  void window_attrs(const onnx::NodeProto& on, Node& n) {
    if (auto s = ints_attr(on, "strides"); !s.empty()) n.attrs["strides"] = s;
    if (auto p = ints_attr(on, "pads"); !p.empty()) n.attrs["pads"] = p;  // [t, l, b, r]
  }

  // Gemm(A, B, C) with alpha = beta = 1 and transA = 0 is linear(A, B') with B' = [K, N]:
  // a transposed B (PyTorch's nn.Linear exports transB = 1) is transposed at import.
  void gemm(const onnx::NodeProto& on, const std::string& name, Node& n) {
    n.op = "linear";
    if (float_attr(on, "alpha", 1.0) != 1.0 || float_attr(on, "beta", 1.0) != 1.0) {
      refuse(on, name, "alpha and beta must be 1");
    }
    if (int_attr(on, "transA", 0) != 0) refuse(on, name, "transA = 1 is not supported");
    if (n.inputs.size() < 2 || !g_.has_tensor(n.inputs[1]) ||
        g_.tensor(n.inputs[1]).kind != TensorKind::param) {
      refuse(on, name, "B must be an initializer");
    }
    if (int_attr(on, "transB", 0) != 0) {
      Tensor& w = g_.tensor(n.inputs[1]);
      if (w.shape.size() != 2) refuse(on, name, "B must be 2-D");
      const int64_t N = w.shape[0], K = w.shape[1];
      std::vector<float> t(w.data.size());
      for (int64_t i = 0; i < N; ++i) {
        for (int64_t k = 0; k < K; ++k) t[k * N + i] = w.data[i * K + k];
      }
      w.data = std::move(t);
      w.shape = {K, N};
    }
  }

  std::string zeros_like_scale(const std::string& scale, const std::string& node) {
    Tensor b;
    b.name = node + "_zero_bias";
    b.kind = TensorKind::param;
    b.shape = g_.tensor(scale).shape;
    b.init = {0.0, 0.0};
    g_.add_tensor(b);
    return b.name;
  }

  const onnx::ModelProto& model_;
  std::string source_;
  int64_t opset_ = 0;
  Graph g_;
  std::map<std::string, std::vector<int64_t>> int_constants_;
};

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& source) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw GraphError(source + ": not a valid ONNX model (protobuf parse failed)");
  }
  return Importer(model, source).run();
}

Graph import_onnx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(path + ": cannot open the ONNX file");
  std::stringstream ss;
  ss << in.rdbuf();
  return import_onnx_bytes(ss.str(), path);
}

}  // namespace opfuse::graph
