// Writing ONNX models in tests: a small builder over the ONNX protobuf API.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "fusion/graph/host_tensor.h"

namespace opfuse::testing {

// n weights uniform in [lo, hi], seeded: the values graph::param_values gives a param.
inline std::vector<float> random_values(size_t n, float lo, float hi, uint64_t seed) {
  graph::Tensor t;
  t.name = "v" + std::to_string(seed);
  t.kind = graph::TensorKind::param;
  t.shape = {int64_t(n)};
  t.init = {lo, hi};
  return graph::param_values(t).data;
}

struct OnnxModel {
  onnx::ModelProto m;
  explicit OnnxModel(int opset = 17) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
    m.mutable_graph()->set_name("onnx_test");
  }
  void input(const std::string& name, const std::vector<int64_t>& shape, bool symbolic = false) {
    auto* vi = m.mutable_graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (symbolic)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
      symbolic = false;
    }
  }
  void output(const std::string& name) { m.mutable_graph()->add_output()->set_name(name); }
  void init(const std::string& name, const std::vector<int64_t>& dims,
            const std::vector<float>& v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  // A float initializer whose values lie in an external file (as the dynamo exporter writes
  // weights): only the location, offset and length are in the model; the caller writes the
  // file. A negative length leaves the key out.
  void init_external(const std::string& name, const std::vector<int64_t>& dims,
                     const std::string& location, int64_t offset, int64_t length) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    kv("offset", std::to_string(offset));
    if (length >= 0) kv("length", std::to_string(length));
  }
  // An int64 (or, with type BOOL, a bool) initializer; dims default to [v.size()].
  void init_ints(const std::string& name, const std::vector<int64_t>& v,
                 std::vector<int64_t> dims = {}, int type = onnx::TensorProto::INT64) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    if (dims.empty()) dims = {int64_t(v.size())};
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) {
      if (type == onnx::TensorProto::BOOL)
        t->add_int32_data(int32_t(x));
      else
        t->add_int64_data(x);
    }
  }
  // Marks the last graph input int64 (token ids, masks).
  void int64_input(const std::string& name, const std::vector<int64_t>& shape) {
    input(name, shape);
    m.mutable_graph()->mutable_input()->rbegin()->mutable_type()->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::INT64);
  }
  onnx::NodeProto* node(const std::string& op, const std::string& name, std::vector<std::string> in,
                        const std::string& out) {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& key, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void i(onnx::NodeProto* n, const std::string& key, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void f(onnx::NodeProto* n, const std::string& key, float v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  // A float scalar (no dims), as exporters write constants such as 0.5 or eps.
  void scalar(const std::string& name, float v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  }
  // A Constant node holding a float scalar.
  void constant(const std::string& out, float v) {
    auto* n = node("Constant", out + "_const", {}, out);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(v);
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

}  // namespace opfuse::testing
