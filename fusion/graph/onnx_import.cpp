#include "fusion/graph/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/op_schema.h"
#include "fusion/reference/executor.h"

namespace opfuse::graph {
namespace {

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string source, std::string base_dir,
           DimBindings dims)
      : model_(model), source_(std::move(source)), base_dir_(std::move(base_dir)),
        dims_(std::move(dims)) {
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
    check_bindings_used(g_, dims_, source_);
    for (int i = 0; i < gp.node_size(); ++i) add_node(gp.node(i), i);
    for (const auto& out : gp.output()) {
      const std::string t = resolve(out.name());
      if (!g_.has_tensor(t) || g_.tensor(t).kind == TensorKind::param) {
        throw GraphError(source_ + ": graph output '" + out.name() +
                         "' is a constant (or not computed by any node)");
      }
      if (t == out.name()) {
        g_.mark_output(t);
        continue;
      }
      // An output that passes another tensor through (Identity): a copy under its own name.
      Node copy;
      copy.name = out.name() + "_identity";
      copy.op = "reshape";
      copy.inputs = {t};
      copy.outputs = {out.name()};
      copy.attrs["shape"] = g_.tensor(t).shape;
      g_.add_node(copy);
      g_.mark_output(out.name());
    }
    prune();
    try {
      g_.validate();
    } catch (const GraphError& e) {
      throw GraphError(source_ + ": " + e.what());
    }
    return g_;
  }

  // Drops the nodes (and the params) that no output depends on: constant subgraphs evaluated
  // into a fold (Swin's mask through an expand, TorchScript's export), a node the model
  // computes and never reads. The graph's inputs stay, read or not.
  void prune() {
    std::set<std::string> live(g_.outputs().begin(), g_.outputs().end());
    std::vector<bool> keep(g_.nodes().size(), false);
    for (size_t i = g_.nodes().size(); i-- > 0;) {  // nodes are added in topological order
      const Node& n = g_.nodes()[i];
      if (!live.count(n.outputs[0])) continue;
      keep[i] = true;
      live.insert(n.inputs.begin(), n.inputs.end());
    }
    if (std::all_of(keep.begin(), keep.end(), [](bool k) { return k; })) return;
    Graph out;
    out.name = g_.name;
    for (const auto& t : g_.tensor_names()) {
      const Tensor& tensor = g_.tensor(t);
      if (tensor.kind == TensorKind::input || (tensor.kind == TensorKind::param && live.count(t)))
        out.add_tensor(tensor);
    }
    for (size_t i = 0; i < keep.size(); ++i) {
      if (keep[i]) out.add_node(g_.nodes()[i]);
    }
    for (const auto& o : g_.outputs()) out.mark_output(o);
    g_ = std::move(out);
  }

 private:
  [[noreturn]] void refuse(const onnx::NodeProto& n, const std::string& name,
                           const std::string& what) {
    throw GraphError(source_ + ": ONNX node '" + name + "' (" + n.op_type() + ", opset " +
                     std::to_string(opset_) + "): " + what);
  }

  // --- external data ---------------------------------------------------------------
  // A tensor whose values lie in a file beside the model (data_location EXTERNAL, as the
  // dynamo exporter writes every weight: `location`, `offset`, `length`). The location must
  // name a file inside the model's folder; offset + length must lie within it and length
  // must be what the dims and type need. The values are read straight into `dst`.
  struct External {
    std::filesystem::path file;
    int64_t offset = 0, length = -1;
  };

  static bool is_external(const onnx::TensorProto& t) {
    return t.data_location() == onnx::TensorProto::EXTERNAL;
  }

  static int64_t element_bytes(int data_type) {
    switch (data_type) {
      case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: return 4;
      case onnx::TensorProto::INT64: case onnx::TensorProto::DOUBLE: return 8;
      case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: return 2;
      case onnx::TensorProto::BOOL: case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8:
        return 1;
      default: return 0;
    }
  }

  External external(const onnx::TensorProto& t) const {
    namespace fs = std::filesystem;
    const std::string what = source_ + ": initializer '" + t.name() + "': external data";
    External e;
    std::string location;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") e.offset = std::stoll(kv.value());
        if (kv.key() == "length") e.length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw GraphError(what + " has " + kv.key() + " '" + kv.value() + "', not a number");
      }
    }
    if (location.empty()) throw GraphError(what + " names no location");
    if (base_dir_.empty()) {
      throw GraphError(what + " lies in '" + location +
                       "', but the model was not read from a file (no folder to look in)");
    }
    const fs::path rel(location);
    bool up = false;
    for (const auto& part : rel) up = up || part == "..";
    if (rel.is_absolute() || up || rel.has_root_name()) {
      throw GraphError(what + " location '" + location +
                       "' is outside the model's folder (absolute or with '..'); refused");
    }
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(fs::path(base_dir_), ec);
    e.file = fs::weakly_canonical(dir / rel, ec);
    const std::string d = dir.string() + "/", f = e.file.string();
    if (ec || f.compare(0, d.size(), d) != 0) {
      throw GraphError(what + " location '" + location + "' resolves outside the model's folder " +
                       dir.string() + " (through a link?); refused");
    }
    if (!fs::is_regular_file(e.file, ec)) {
      throw GraphError(what + " file '" + location + "' not found in " + dir.string());
    }
    return e;
  }

  // The external range of `count` elements of `t`'s type, checked against the file before
  // anything is allocated for it.
  External checked_external(const onnx::TensorProto& t, int64_t count) const {
    External e = external(t);
    const std::string what = source_ + ": initializer '" + t.name() + "': external data";
    const int64_t need = count * element_bytes(t.data_type());
    if (e.length >= 0 && e.length != need) {
      throw GraphError(what + " has length " + std::to_string(e.length) + " bytes, but its dims " +
                       "and type need " + std::to_string(need));
    }
    const int64_t size = int64_t(std::filesystem::file_size(e.file));
    if (e.offset < 0 || e.offset > size || size - e.offset < need) {
      throw GraphError(what + " needs bytes [" + std::to_string(e.offset) + ", " +
                       std::to_string(e.offset + need) + ") of '" + e.file.filename().string() +
                       "', which has " + std::to_string(size));
    }
    e.length = need;
    return e;
  }

  // Reads the checked range `e` into dst (e.length bytes).
  void read_external(const onnx::TensorProto& t, const External& e, void* dst) const {
    std::ifstream in(e.file, std::ios::binary);
    in.seekg(e.offset);
    in.read(static_cast<char*>(dst), std::streamsize(e.length));
    if (!in) {
      throw GraphError(source_ + ": initializer '" + t.name() + "': external data: reading '" +
                       e.file.string() + "' failed");
    }
  }

  static int64_t dims_elements(const onnx::TensorProto& t) {
    int64_t n = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) return -1;
      n *= d;
    }
    return n;
  }

  std::vector<float> float_values(const onnx::TensorProto& t) const {
    if (is_external(t)) {
      const int64_t n = dims_elements(t);
      if (n < 0) throw GraphError(source_ + ": initializer '" + t.name() + "' has invalid dims");
      const External e = checked_external(t, n);
      std::vector<float> v(static_cast<size_t>(n));
      read_external(t, e, v.data());
      return v;
    }
    std::vector<float> v(t.float_data().begin(), t.float_data().end());
    if (v.empty() && !t.raw_data().empty()) {
      v.resize(t.raw_data().size() / sizeof(float));
      std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
    }
    return v;
  }

  // The raw little-endian bytes of a tensor stored as raw_data or externally.
  std::string raw_bytes(const onnx::TensorProto& t) const {
    if (!is_external(t)) return t.raw_data();
    const int64_t n = dims_elements(t);
    if (n < 0) throw GraphError(source_ + ": initializer '" + t.name() + "' has invalid dims");
    const External e = checked_external(t, n);
    std::string b(size_t(e.length), '\0');
    read_external(t, e, b.data());
    return b;
  }

  std::vector<int64_t> int_values(const onnx::TensorProto& t) const {
    const std::string raw = raw_bytes(t);
    std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
    if (t.data_type() == onnx::TensorProto::BOOL) {  // one byte each, or int32_data
      v.assign(t.int32_data().begin(), t.int32_data().end());
      if (v.empty()) {
        for (char c : raw) v.push_back(c != 0);
      }
      return v;
    }
    if (t.data_type() == onnx::TensorProto::INT32) {
      v.assign(t.int32_data().begin(), t.int32_data().end());
      if (v.empty() && !raw.empty()) {
        std::vector<int32_t> w(raw.size() / sizeof(int32_t));
        std::memcpy(w.data(), raw.data(), w.size() * sizeof(int32_t));
        v.assign(w.begin(), w.end());
      }
      return v;
    }
    if (v.empty() && !raw.empty()) {
      v.resize(raw.size() / sizeof(int64_t));
      std::memcpy(v.data(), raw.data(), v.size() * sizeof(int64_t));
    }
    return v;
  }

  void add_initializer(const onnx::TensorProto& t) {
    if (t.data_type() == onnx::TensorProto::INT64 || t.data_type() == onnx::TensorProto::INT32) {
      // Shapes, axes, indices; the folds index them by their dims, so the two must agree.
      std::vector<int64_t> v = int_values(t);
      const Shape dims(t.dims().begin(), t.dims().end());
      if (num_elements(dims) != int64_t(v.size())) {
        throw GraphError(source_ + ": integer constant '" + t.name() + "' has dims " +
                         shape_to_string(dims) + " but carries " + std::to_string(v.size()) +
                         " values");
      }
      int_constants_[t.name()] = std::move(v);
      int_shapes_[t.name()] = dims;
      return;
    }
    if (t.data_type() == onnx::TensorProto::BOOL) {  // a Where condition: a 0/1 mask param
      Tensor p;
      p.name = t.name();
      p.kind = TensorKind::param;
      p.shape.assign(t.dims().begin(), t.dims().end());
      if (p.shape.empty()) p.shape = {1};
      if (const std::string raw = raw_bytes(t); !raw.empty()) {
        for (char c : raw) p.data.push_back(c ? 1.0f : 0.0f);
      } else {
        for (int32_t v : t.int32_data()) p.data.push_back(v ? 1.0f : 0.0f);
      }
      check_initializer_size(t, p);
      g_.add_tensor(std::move(p));
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
    if (p.shape.empty()) p.shape = {1};  // a scalar: one element
    p.data = float_values(t);
    check_initializer_size(t, p);
    g_.add_tensor(std::move(p));
  }

  // Checked here, before any op reads the values (Gemm transposes them at import).
  void check_initializer_size(const onnx::TensorProto& t, const Tensor& p) const {
    const int64_t want = num_elements(p.shape);
    if (want < 0 || int64_t(p.data.size()) != want) {
      throw GraphError(source_ + ": initializer '" + t.name() + "' has dims " +
                       shape_to_string(p.shape) + " but carries " + std::to_string(p.data.size()) +
                       " values");
    }
  }

  void add_input(const onnx::ValueInfoProto& vi) {
    Tensor t;
    t.name = vi.name();
    t.kind = TensorKind::input;
    const auto& tt = vi.type().tensor_type();
    if (tt.elem_type() == onnx::TensorProto::FLOAT16) {
      t.dtype = DType::f16;
    } else if (tt.elem_type() == onnx::TensorProto::INT64) {
      t.dtype = DType::i64;  // token ids, attention masks
    } else if (tt.elem_type() == onnx::TensorProto::INT32) {
      t.dtype = DType::i32;
    } else if (tt.elem_type() != onnx::TensorProto::FLOAT) {
      throw GraphError(source_ + ": graph input '" + vi.name() + "' has ONNX data type " +
                       std::to_string(tt.elem_type()) +
                       "; float32, float16, int64 and int32 are supported");
    }
    if (!tt.has_shape()) {
      throw GraphError(source_ + ": graph input '" + vi.name() + "' declares no shape");
    }
    for (const auto& d : tt.shape().dim()) {
      const size_t axis = t.shape.size();
      if (d.has_dim_value()) {
        t.shape.push_back(d.dim_value());
        t.dim_names.emplace_back();
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        t.shape.push_back(bind_dim(source_, vi.name(), axis, d.dim_param(), dims_));
        t.dim_names.push_back(d.dim_param());
      } else {
        throw GraphError(source_ + ": graph input '" + vi.name() + "' axis " +
                         std::to_string(axis) + " has neither a size nor a name");
      }
    }
    bool symbolic = false;
    for (const auto& n : t.dim_names) symbolic = symbolic || !n.empty();
    if (!symbolic) t.dim_names.clear();
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

  std::string resolve(const std::string& name) const {
    auto it = alias_.find(name);
    return it == alias_.end() ? name : it->second;
  }

  bool is_param(const std::string& t) const {
    return g_.has_tensor(t) && g_.tensor(t).kind == TensorKind::param;
  }

  // A constant scalar (a one-element float param or int constant), or nothing.
  std::optional<double> scalar_constant(const std::string& t) const {
    if (auto it = int_constants_.find(t); it != int_constants_.end() && it->second.size() == 1) {
      return double(it->second[0]);
    }
    if (is_param(t)) {
      const Tensor& p = g_.tensor(t);
      if (num_elements(p.shape) == 1) return double(param_values(p).data[0]);
    }
    return std::nullopt;
  }

  const std::vector<int64_t>& ints_input(const onnx::NodeProto& on, const std::string& name,
                                         const std::string& t, const char* what) {
    auto it = int_constants_.find(t);
    if (it == int_constants_.end()) {
      refuse(on, name,
             std::string(what) + " must be a constant (an int64 initializer or Constant)");
    }
    return it->second;
  }

  Shape shape_of(const std::string& t) const {
    if (auto it = int_shapes_.find(t); it != int_shapes_.end()) return it->second;
    return g_.tensor(t).shape;
  }

  // One ONNX node. Its inputs are read with .at(): a node with fewer inputs than its op reads
  // is refused here, naming it, instead of escaping as std::out_of_range (found by fuzz_onnx:
  // a MaxPool with no input).
  void add_node(const onnx::NodeProto& on, int index) {
    const std::string name =
        on.name().empty() ? on.op_type() + "_" + std::to_string(index) : on.name();
    try {
      import_node(on, name);
    } catch (const std::out_of_range&) {
      refuse(on, name, "has " + std::to_string(on.input_size()) +
                           " inputs: too few for the op, or one it reads is not defined");
    }
  }

  void import_node(const onnx::NodeProto& on, const std::string& name) {
    const std::string& op = on.op_type();
    std::vector<std::string> ins;
    for (const auto& in : on.input()) ins.push_back(in.empty() ? "" : resolve(in));
    if (op == "Constant") return constant(on, name);
    if (op == "Split") return split(on, name, ins);
    if (on.output_size() != 1 && !(op == "Dropout" && on.output_size() == 2)) {
      refuse(on, name, "has " + std::to_string(on.output_size()) + " outputs; opfuse supports 1");
    }
    const std::string out = on.output(0);
    // Pass-throughs: the output is another name for the input.
    const bool to_bool = op == "Cast" && int_attr(on, "to", 0) == onnx::TensorProto::BOOL;
    if (integer_math(on, name, ins)) return;
    if (op == "Identity" || op == "Dropout" ||
        (op == "Cast" && !to_bool && !int_constants_.count(ins.at(0)) &&
         !integer_tensor(ins[0]) && cast_keeps_float32(on, name, ins[0]))) {
      alias_[out] = ins.at(0);
      return;
    }
    if (fold_ints(on, name, ins)) return;  // shape arithmetic on constants
    if (op == "Pad") return pad(on, name, ins);

    Node n;
    n.name = name;
    n.outputs = {out};
    for (const auto& in : ins) {
      if (!in.empty()) n.inputs.push_back(in);
    }
    static const std::map<std::string, std::string> simple = {
        {"Relu", "relu"}, {"Sigmoid", "sigmoid"},
        {"Tanh", "tanh"}, {"Add", "add"},
        {"Mul", "mul"},   {"Sub", "sub"},
        {"Div", "div"},   {"MatMul", "matmul"},
        {"Sqrt", "sqrt"}, {"Reciprocal", "reciprocal"},
        {"Neg", "neg"},   {"Erf", "erf"},
        {"Exp", "exp"}};
    if (auto it = simple.find(op); it != simple.end()) {
      n.op = it->second;
    } else if (op == "HardSigmoid") {
      n.op = "hard_sigmoid";
      n.attrs["alpha"] = float_attr(on, "alpha", 0.2);
      n.attrs["beta"] = float_attr(on, "beta", 0.5);
    } else if (op == "HardSwish") {
      n.op = "hard_swish";
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
      for (int64_t d : ints_attr(on, "dilations")) {
        if (d != 1) refuse(on, name, "pooling dilations are not supported");
      }
      n.attrs["kernel"] = ints_attr(on, "kernel_shape");
      n.attrs["strides"] = std::vector<int64_t>{1, 1};  // ONNX's default stride is 1
      window_attrs(on, n);
      if (op == "AveragePool") n.attrs["count_include_pad"] = int_attr(on, "count_include_pad", 0);
      if (int_attr(on, "ceil_mode", 0) != 0) ceil_mode_pads(on, name, ins.at(0), n);
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
      if (ins.size() != 2) refuse(on, name, "needs a target shape");
      const std::vector<int64_t>& target = ints_input(on, name, ins[1], "the target shape");
      // allowzero = 1 (the dynamo exporter sets it on every Reshape) differs from 0 only where
      // the target holds a 0: an empty axis then, which no opfuse tensor has.
      if (int_attr(on, "allowzero", 0) != 0 &&
          std::find(target.begin(), target.end(), 0) != target.end()) {
        refuse(on, name, "allowzero = 1 with a 0 in the target shape " + shape_to_string(target) +
                             " makes an empty tensor, which is not supported");
      }
      n.attrs["shape"] = target;
      n.inputs.resize(1);
    } else if (op == "Slice") {
      n.op = "slice";
      n.attrs = slice_attrs(on, name, ins);
      n.inputs.resize(1);
    } else if (op == "Concat") {
      n.op = "concat";
      n.attrs["axis"] = int_attr(on, "axis", 0);
    } else if (op == "Clip") {
      // Bounds are inputs from opset 11 on, attributes before; an omitted one is unbounded.
      n.op = "clamp";
      double lo = -3.4e38, hi = 3.4e38;
      if (opset_ < 11) {
        lo = float_attr(on, "min", lo);
        hi = float_attr(on, "max", hi);
      }
      for (size_t k = 1; k < ins.size() && k < 3; ++k) {
        if (ins[k].empty()) continue;
        const auto v = scalar_constant(ins[k]);
        if (!v) refuse(on, name, "the bounds must be constant scalars");
        (k == 1 ? lo : hi) = *v;
      }
      n.attrs["min"] = lo;
      n.attrs["max"] = hi;
      n.inputs.resize(1);
    } else if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") {
      n.op = op == "ReduceMean" ? "reduce_mean" : op == "ReduceSum" ? "reduce_sum" : "reduce_max";
      std::vector<int64_t> axes = ints_attr(on, "axes");  // before opset 13 (18 for Mean/Max)
      if (ins.size() > 1 && !ins[1].empty()) axes = ints_input(on, name, ins[1], "axes");
      if (axes.empty() && int_attr(on, "noop_with_empty_axes", 0) != 0) {
        refuse(on, name, "noop_with_empty_axes = 1 is not supported");
      }
      n.attrs["axes"] = axes;
      n.attrs["keepdims"] = int_attr(on, "keepdims", 1);
      n.inputs.resize(1);
    } else if (op == "Pow") {
      const auto e = ins.size() == 2 ? scalar_constant(ins[1]) : std::nullopt;
      if (!e) refuse(on, name, "the exponent must be a constant scalar");
      n.op = "pow";
      n.attrs["exponent"] = *e;
      n.inputs.resize(1);
    } else if (op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      n.op = "reshape";
      n.attrs["shape"] = reshaped(on, name, ins, shape_of(ins[0]));
      n.inputs.resize(1);
    } else if (to_bool) {
      // A bool is held as 0/1, like a BOOL initializer (attention masks): x != 0.
      n.op = "cast";
      n.attrs["to"] = std::string("bool");
      int_as_float_.insert(out);  // a bool is an integer: Not, CumSum ... may follow
    } else if (op == "Cast" && integer_tensor(ins.at(0))) {
      const int64_t to = int_attr(on, "to", onnx::TensorProto::FLOAT);
      if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32) {
        alias_[out] = ins[0];  // integers stay integers (held exactly)
        return;
      }
      if (to != onnx::TensorProto::FLOAT) {
        refuse(on, name, "an integer tensor casts to float32, bool, int64 or int32 only, not "
                         "ONNX type " + std::to_string(to));
      }
      n.op = "cast";
    } else if (op == "And") {
      n.op = "mul";  // bools are held as 0/1: a and b = a * b
      for (auto& in : n.inputs) {
        if (int_constants_.count(in)) in = int_constant_as_param(in);
      }
    } else if (op == "GatherND") {
      gather_nd(on, name, ins, n);
    } else if (op == "Gather" && int_as_float_.count(ins.at(1))) {
      n.inputs[1] = as_indices(name, ins[1]);
      n.op = "gather";
      n.attrs["axis"] = int_attr(on, "axis", 0);
    } else if (op == "GatherElements") {
      gather_elements(on, name, ins, n);
    } else if (op == "Gather" && integer_tensor(ins.at(1))) {
      // Indices computed at run time (token ids into an embedding table).
      n.op = "gather";
      n.attrs["axis"] = int_attr(on, "axis", 0);
    } else if (op == "Gather") {
      n.op = "gather";
      const std::vector<int64_t>& idx = ints_input(on, name, ins.at(1), "the indices");
      const Shape ishape = int_shapes_.at(ins[1]);
      n.attrs["axis"] = int_attr(on, "axis", 0);
      if (ishape.size() > 1) {
        // Constant indices of rank > 1 (token type ids of zeros): an integer param.
        n.inputs[1] = int_constant_as_index_param(ins[1]);
      } else {
        n.attrs["indices"] = idx;
        n.attrs["scalar"] = int64_t(ishape.empty() ? 1 : 0);
        n.inputs.resize(1);
      }
    } else if (op == "Expand") {
      n.op = "expand";
      n.attrs["shape"] = ints_input(on, name, ins.at(1), "the target shape");
      n.inputs.resize(1);
    } else if (op == "Where") {
      // A condition folded from integer arithmetic (a mask from Equal or LessOrEqual on
      // shapes) becomes a 0/1 param like a BOOL initializer.
      if (int_constants_.count(ins.at(0))) n.inputs[0] = int_constant_as_param(ins[0]);
      if (integer_tensor(n.inputs[0])) {
        refuse(on, name, "the condition '" + ins[0] + "' is an integer tensor; a bool (a Cast "
                         "to BOOL, a comparison) or a constant is needed");
      }
      n.op = "where";
    } else {
      refuse(on, name,
             "op '" + op +
                 "' is not supported (supported: Conv, BatchNormalization, Relu, Sigmoid, Tanh, "
                 "Gelu, HardSigmoid, HardSwish, Erf, Exp, Sqrt, Reciprocal, Neg, Pow, Clip, Add, "
                 "Mul, Sub, Div, MaxPool, "
                 "AveragePool, GlobalAveragePool, Gemm, MatMul, Softmax, LayerNormalization, "
                 "ReduceMean, ReduceSum, ReduceMax, Transpose, Reshape, Flatten, Squeeze, "
                 "Unsqueeze, Concat, Slice, Split, Gather, Expand, Where, And, Constant, Identity, "
                 "Dropout, Cast, Shape, Pad (constant mode), CumSum (last axis); GatherND with "
                 "constant "
                 "indices; GatherElements from one row; "
                 "ConstantOfShape, Range, GatherElements, ScatterND, Equal, Less(OrEqual), "
                 "Greater(OrEqual), Or, Not where their inputs are constant)");
    }
    add(std::move(n));  // later nodes (Flatten, Squeeze) need the shape
  }

  // Integer arithmetic on tensors computed at run time (RoBERTa's position ids: the token ids
  // compared with the padding id, Not, a CumSum along the sequence, Add and Mul), computed in
  // f32, where every opfuse integer is exact within +-2^24: the integer inputs are cast to
  // f32 and the results marked, so that a gather reading one as indices casts it back to i64.
  // Equal is 1 - (a - b != 0), Not 1 - x, and CumSum along the last axis a matmul with a
  // triangular matrix of ones (inclusive or exclusive, forward or reversed). Constants go to
  // fold_ints; float tensors to the ops' own paths.
  bool integer_math(const onnx::NodeProto& on, const std::string& name,
                    const std::vector<std::string>& ins) {
    static const std::set<std::string> ops = {"Equal", "Not",    "Add", "Sub",
                                              "Mul",   "CumSum", "Cast"};
    const std::string& op = on.op_type();
    if (!ops.count(op) || ins.empty()) return false;
    bool runtime_int = false, all_constant = true;
    const size_t operands = op == "CumSum" || op == "Cast" || op == "Not" ? 1 : 2;
    if (ins.size() < operands) return false;  // refused where the op is read
    for (size_t i = 0; i < operands; ++i) {
      runtime_int = runtime_int || integer_tensor(ins[i]) || int_as_float_.count(ins[i]);
      all_constant = all_constant && (int_constants_.count(ins[i]) || is_param(ins[i]));
    }
    if (!runtime_int || all_constant) return false;
    const std::string& out = on.output(0);
    if (op == "Cast") {
      const int64_t to = int_attr(on, "to", onnx::TensorProto::FLOAT);
      if (integer_tensor(ins[0])) return false;  // the importer's integer casts
      if (to == onnx::TensorProto::BOOL) {
        emit(name, "cast", {ins[0]}, out, {{"to", std::string("bool")}});
      } else if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32 ||
                 to == onnx::TensorProto::FLOAT) {
        alias_[out] = ins[0];  // the same values, still exact
        if (to == onnx::TensorProto::FLOAT) return true;
      } else {
        refuse(on, name,
               "an integer computed at run time casts to float32, bool, int64 or int32 "
               "only, not ONNX type " +
                   std::to_string(to));
      }
      int_as_float_.insert(resolve(out));
      return true;
    }
    if (op == "Equal") {
      const std::string d = emit(name + "_diff", "sub", {as_float(ins[0]), as_float(ins[1])});
      const std::string ne = emit(name + "_ne", "cast", {d}, "", {{"to", std::string("bool")}});
      emit(name, "sub", {float_scalar(1), ne}, out);
    } else if (op == "Not") {
      emit(name, "sub", {float_scalar(1), as_float(ins[0])}, out);
    } else if (op == "CumSum") {
      const auto axis_value = ins.size() > 1 ? scalar_constant(ins[1]) : std::nullopt;
      if (!axis_value) refuse(on, name, "the axis must be a constant scalar");
      const Shape x = shape_of(ins[0]);
      const int axis = normalize_axis(probe_node(name), int64_t(*axis_value), x.size());
      if (axis != int(x.size()) - 1) {
        refuse(on, name,
               "along axis " + std::to_string(axis) + " of " + shape_to_string(x) +
                   ": the last axis only");
      }
      const int64_t n = x.back();
      if (n > 4096) refuse(on, name, "along " + std::to_string(n) + " elements: 4096 at most");
      const bool exclusive = int_attr(on, "exclusive", 0) != 0,
                 reverse = int_attr(on, "reverse", 0) != 0;
      Tensor t;  // t[i][j] = 1 where input i counts towards output j
      t.name = name + "_triangle";
      t.kind = TensorKind::param;
      t.shape = {n, n};
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const bool counts = reverse ? i >= j : i <= j;
          t.data.push_back(counts && !(exclusive && i == j) ? 1.0f : 0.0f);
        }
      }
      g_.add_tensor(std::move(t));
      emit(name, "matmul", {as_float(ins[0]), name + "_triangle"}, out);
    } else {  // Add, Sub, Mul
      emit(name,
           op == "Add"   ? "add"
           : op == "Sub" ? "sub"
                         : "mul",
           {as_float(ins[0]), as_float(ins[1])}, out);
    }
    int_as_float_.insert(out);
    return true;
  }

  // Indices computed in f32 (integer_math) as an i64 tensor, where a gather reads them.
  std::string as_indices(const std::string& name, const std::string& t) {
    if (!int_as_float_.count(t)) return t;
    return emit(name + "_indices", "cast", {t}, "", {{"to", std::string("i64")}});
  }

  // GatherElements with indices computed at run time (RoBERTa's token types, picked from a
  // buffer of zeros at the position ids) where the data is one row along the axis (every
  // other extent 1): a gather from that row, shaped as the indices.
  void gather_elements(const onnx::NodeProto& on, const std::string& name,
                       const std::vector<std::string>& ins, Node& n) {
    const Shape ds = shape_of(ins.at(0)), is = shape_of(ins.at(1));
    const int axis = normalize_axis(probe_node(name), int_attr(on, "axis", 0), ds.size());
    for (size_t d = 0; d < ds.size(); ++d) {
      if (int(d) != axis && ds[d] != 1) {
        refuse(on, name,
               "data of shape " + shape_to_string(ds) + " along axis " + std::to_string(axis) +
                   ": only data with every other extent 1 " +
                   "is supported where the indices are computed at run time");
      }
    }
    if (is.size() != ds.size()) refuse(on, name, "data and indices differ in rank");
    if (!integer_tensor(ins[1]) && !int_as_float_.count(ins[1])) {
      refuse(on, name, "the indices must be integers");
    }
    const Shape row{ds[size_t(axis)]};
    std::string data = name + "_row";
    if (int_constants_.count(ins[0]) || is_param(ins[0])) {
      Tensor p;  // the row, as the constant it is (an integer one stays integer)
      p.name = data;
      p.kind = TensorKind::param;
      p.shape = row;
      if (int_constants_.count(ins[0])) {
        p.dtype = DType::i64;
        for (int64_t v : int_constants_.at(ins[0])) p.data.push_back(float(v));
      } else {
        p.data = param_values(g_.tensor(ins[0])).data;
      }
      g_.add_tensor(std::move(p));
    } else {
      emit(data, "reshape", {ins[0]}, "", {{"shape", std::vector<int64_t>(row)}});
    }
    n.op = "gather";
    n.inputs = {data, as_indices(name, ins[1])};
    n.attrs["axis"] = int64_t{0};
  }

  // t as f32: itself (a float tensor, an integer already computed in f32, a param), an int
  // constant as a param, or an integer tensor cast (once).
  std::string as_float(const std::string& t) {
    if (int_constants_.count(t)) return int_constant_as_param(t);
    if (!integer_tensor(t)) return t;
    const std::string f = t + "_as_f32";
    if (!g_.has_tensor(f)) emit(f, "cast", {t});
    return f;
  }

  // A one-element f32 param holding v, once per value.
  std::string float_scalar(double v) {
    std::ostringstream name;
    name << "opfuse_scalar_" << v;
    if (!g_.has_tensor(name.str())) {
      Tensor p;
      p.name = name.str();
      p.kind = TensorKind::param;
      p.shape = {1};
      p.data = {float(v)};
      g_.add_tensor(std::move(p));
    }
    return name.str();
  }

  // Adds a node of the importer's making; its output is `out`, or its name.
  std::string emit(const std::string& name, const std::string& op,
                   const std::vector<std::string>& inputs, const std::string& out = "",
                   const Attrs& attrs = {}) {
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = inputs;
    n.outputs = {out.empty() ? name : out};
    n.attrs = attrs;
    add(n);
    return n.outputs[0];
  }

  // An integer graph input, or a tensor computed from one (not a folded constant).
  bool integer_tensor(const std::string& t) const {
    return g_.has_tensor(t) && is_integer(g_.tensor(t).dtype);
  }

  // Cast: float32 to float32 passes through; other float casts are refused by name.
  bool cast_keeps_float32(const onnx::NodeProto& on, const std::string& name,
                          const std::string& in) {
    const int64_t to = int_attr(on, "to", onnx::TensorProto::FLOAT);
    const bool in_f32 = !g_.has_tensor(in) || g_.tensor(in).dtype == DType::f32;
    if (to == onnx::TensorProto::FLOAT && in_f32) return true;
    refuse(on, name,
           "casts to ONNX type " + std::to_string(to) +
               " are not supported (float32 to float32 only; export the model in "
               "float32)");
  }

  // Constant: a float tensor becomes a param; an integer tensor an int constant.
  void constant(const onnx::NodeProto& on, const std::string& name) {
    onnx::TensorProto t;
    if (const auto* v = attr(on, "value")) {
      t = v->t();
    } else if (const auto* f = attr(on, "value_float")) {
      t.set_data_type(onnx::TensorProto::FLOAT);
      t.add_float_data(f->f());
    } else if (const auto* i = attr(on, "value_int")) {
      t.set_data_type(onnx::TensorProto::INT64);
      t.add_int64_data(i->i());
    } else if (const auto* is = attr(on, "value_ints")) {
      t.set_data_type(onnx::TensorProto::INT64);
      t.add_dims(is->ints_size());
      for (int64_t x : is->ints()) t.add_int64_data(x);
    } else {
      refuse(on, name, "only value, value_float, value_int and value_ints are supported");
    }
    t.set_name(on.output(0));
    add_initializer(t);
  }

  // An integer constant as an i64 param of its shape (gather indices of rank > 1), once.
  std::string int_constant_as_index_param(const std::string& t) {
    const std::string name = t + "_as_indices";
    if (!g_.has_tensor(name)) {
      Tensor p;
      p.name = name;
      p.kind = TensorKind::param;
      p.dtype = DType::i64;
      p.shape = int_shapes_.at(t);
      for (int64_t v : int_constants_.at(t)) {
        if (v < -kMaxExactInteger || v > kMaxExactInteger) {
          throw GraphError(source_ + ": constant indices '" + t + "' hold " + std::to_string(v) +
                           ", beyond the +-2^24 opfuse holds exactly");
        }
        p.data.push_back(float(v));
      }
      g_.add_tensor(std::move(p));
    }
    return name;
  }

  // An integer constant (a 0/1 mask, say) as a float param of its shape, once.
  std::string int_constant_as_param(const std::string& t) {
    const std::string name = t + "_as_float";
    if (!g_.has_tensor(name)) {
      Tensor p;
      p.name = name;
      p.kind = TensorKind::param;
      p.shape = int_shapes_.at(t).empty() ? Shape{1} : int_shapes_.at(t);
      for (int64_t v : int_constants_.at(t)) p.data.push_back(float(v));
      g_.add_tensor(std::move(p));
    }
    return name;
  }

  // GatherND with constant indices (the dynamo exporter broadcasts BERT's attention mask so):
  // the k leading axes the index tuples address become one (a reshape), and the tuples flat
  // indices into it, so the node is a gather by a constant index tensor. `n` becomes that
  // gather; the reshape, where one is needed, is added here.
  void gather_nd(const onnx::NodeProto& on, const std::string& name,
                 const std::vector<std::string>& ins, Node& n) {
    if (int_attr(on, "batch_dims", 0) != 0) refuse(on, name, "batch_dims != 0 is not supported");
    const std::vector<int64_t>& idx = ints_input(on, name, ins.at(1), "the indices");
    const Shape ishape = int_shapes_.at(ins[1]), x = shape_of(ins.at(0));
    const int64_t k = ishape.empty() ? 0 : ishape.back();
    if (ishape.size() < 2 || k < 1 || k > int64_t(x.size())) {
      refuse(on, name, "indices of shape " + shape_to_string(ishape) + " for data of shape " +
                           shape_to_string(x) + ": a last axis of 1.." +
                           std::to_string(x.size()) + " after at least one other is needed");
    }
    std::vector<int64_t> flat;
    for (size_t t = 0; t < idx.size(); t += size_t(k)) {
      int64_t f = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = idx[t + size_t(j)];
        const int64_t d = x[size_t(j)];
        if (v < 0) v += d;
        if (v < 0 || v >= d) {
          refuse(on, name, "index " + std::to_string(idx[t + size_t(j)]) + " is outside axis " +
                               std::to_string(j) + " of extent " + std::to_string(d));
        }
        f = f * d + v;
      }
      flat.push_back(f);
    }
    const std::string flat_name = name + "_flat_indices";
    int_constants_[flat_name] = flat;
    int_shapes_[flat_name] = Shape(ishape.begin(), ishape.end() - 1);
    std::string data = ins[0];
    if (k > 1) {
      Node r;
      r.name = name + "_leading_axes";
      r.op = "reshape";
      r.inputs = {ins[0]};
      r.outputs = {on.output(0) + "_leading_axes"};
      Shape s{1};
      for (int64_t j = 0; j < k; ++j) s[0] *= x[size_t(j)];
      s.insert(s.end(), x.begin() + k, x.end());
      r.attrs["shape"] = s;
      data = r.outputs[0];
      add(std::move(r));
    }
    n.op = "gather";
    n.inputs = {data, int_constant_as_index_param(flat_name)};
    n.attrs["axis"] = int64_t{0};
  }

  // Adds a node the importer made (folded if its inputs are constants), its shape inferred.
  void add(Node n) {
    try {
      if (fold(n)) return;
      g_.add_node(std::move(n));
      g_.infer_node(g_.nodes().size() - 1);
    } catch (const GraphError& e) {
      throw GraphError(source_ + ": " + e.what());
    }
  }

  // Slice's bounds: constant inputs starts, ends[, axes[, steps]] (attributes before opset 10).
  Attrs slice_attrs(const onnx::NodeProto& on, const std::string& name,
                    const std::vector<std::string>& ins) {
    Attrs a;
    if (opset_ < 10) {
      a["starts"] = ints_attr(on, "starts");
      a["ends"] = ints_attr(on, "ends");
      if (auto ax = ints_attr(on, "axes"); !ax.empty()) a["axes"] = ax;
      return a;
    }
    if (ins.size() < 3) refuse(on, name, "needs starts and ends");
    const char* keys[] = {"starts", "ends", "axes", "steps"};
    for (size_t k = 1; k < ins.size() && k < 5; ++k) {
      if (ins[k].empty()) continue;
      a[keys[k - 1]] = ints_input(on, name, ins[k], keys[k - 1]);
    }
    return a;
  }

  // Pad, constant mode. Zero pads (Swin's windows at 224 x 224) leave the input as it is;
  // along each padded axis a negative pad is a slice and a positive one a concat with a block
  // of the value: a one-element param expanded to the block's shape, so that no weight
  // depends on a dynamic batch.
  void pad(const onnx::NodeProto& on, const std::string& name,
           const std::vector<std::string>& ins) {
    if (const auto* m = attr(on, "mode"); m && m->s() != "constant") {
      refuse(on, name, "mode '" + m->s() + "' is not supported (constant only)");
    }
    const std::string& x = ins.at(0);
    if (int_constants_.count(x)) refuse(on, name, "pads an integer constant: not supported");
    Shape shape = shape_of(x);
    const size_t rank = shape.size();
    std::vector<int64_t> pads;
    double value = 0;
    if (opset_ < 11) {
      pads = ints_attr(on, "pads");
      value = float_attr(on, "value", 0.0);
    } else {
      if (ins.size() < 2 || ins[1].empty()) refuse(on, name, "needs pads");
      pads = ints_input(on, name, ins[1], "pads");
      if (ins.size() > 2 && !ins[2].empty()) {
        const auto v = scalar_constant(ins[2]);
        if (!v) refuse(on, name, "the constant_value must be a constant scalar");
        value = *v;
      }
    }
    std::vector<int> axes;
    if (ins.size() > 3 && !ins[3].empty()) {
      for (int64_t a : ints_input(on, name, ins[3], "axes")) {
        axes.push_back(normalize_axis(probe_node(name), a, rank));
      }
    } else {
      for (size_t d = 0; d < rank; ++d) axes.push_back(int(d));
    }
    if (pads.size() != 2 * axes.size()) {
      refuse(on, name,
             std::to_string(pads.size()) + " pads for " + std::to_string(axes.size()) +
                 " axes: 2 per axis are needed");
    }
    // The steps (a slice, a concat) in order; the last one writes the node's output.
    struct Step {
      int axis;
      int64_t before, after;
    };
    std::vector<Step> steps;
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t b = pads[i], e = pads[i + axes.size()];
      if (b == 0 && e == 0) continue;
      if (std::max<int64_t>(-b, 0) + std::max<int64_t>(-e, 0) >= shape[size_t(axes[i])]) {
        refuse(on, name,
               "pads " + std::to_string(b) + ", " + std::to_string(e) + " crop axis " +
                   std::to_string(axes[i]) + " of extent " +
                   std::to_string(shape[size_t(axes[i])]) + " to nothing");
      }
      steps.push_back({axes[i], b, e});
    }
    if (steps.empty()) {
      alias_[on.output(0)] = x;
      return;
    }
    std::string cur = x;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      const std::string axis = std::to_string(st.axis);
      const bool last = i + 1 == steps.size();
      const int64_t crop_before = std::max<int64_t>(-st.before, 0),
                    crop_after = std::max<int64_t>(-st.after, 0),
                    grow_before = std::max<int64_t>(st.before, 0),
                    grow_after = std::max<int64_t>(st.after, 0);
      const bool grows = grow_before > 0 || grow_after > 0;
      if (crop_before > 0 || crop_after > 0) {
        const int64_t end = shape[size_t(st.axis)] - crop_after;
        cur = emit(name + "_crop_axis" + axis, "slice", {cur}, last && !grows ? on.output(0) : "",
                   {{"starts", std::vector<int64_t>{crop_before}},
                    {"ends", std::vector<int64_t>{end}},
                    {"axes", std::vector<int64_t>{st.axis}}});
        shape[size_t(st.axis)] -= crop_before + crop_after;
      }
      if (!grows) continue;
      // A block of the value: the one-element param expanded to the block's shape.
      auto block = [&](int64_t len, const std::string& side) {
        Shape extent = shape;
        extent[size_t(st.axis)] = len;
        return emit(name + "_" + side + "_axis" + axis, "expand", {float_scalar(value)}, "",
                    {{"shape", std::vector<int64_t>(extent)}});
      };
      std::vector<std::string> parts;
      if (grow_before > 0) parts.push_back(block(grow_before, "before"));
      parts.push_back(cur);
      if (grow_after > 0) parts.push_back(block(grow_after, "after"));
      cur = emit(name + "_axis" + axis, "concat", parts, last ? on.output(0) : "",
                 {{"axis", int64_t{st.axis}}});
      shape[size_t(st.axis)] += grow_before + grow_after;
    }
  }

  // Split: one slice node per output along `axis`, of the sizes given (input `split` from
  // opset 13, attribute before), else num_outputs (opset 18) or the output count, equal parts
  // with a smaller last one.
  void split(const onnx::NodeProto& on, const std::string& name,
             const std::vector<std::string>& ins) {
    const Shape x = shape_of(ins.at(0));
    const int axis = normalize_axis(probe_node(name), int_attr(on, "axis", 0), x.size());
    const int64_t dim = x[size_t(axis)];
    std::vector<int64_t> sizes = ints_attr(on, "split");
    if (ins.size() > 1 && !ins[1].empty()) sizes = ints_input(on, name, ins[1], "split");
    const int64_t parts = on.output_size();
    if (sizes.empty()) {
      const int64_t n = int_attr(on, "num_outputs", parts);
      if (n < 1) refuse(on, name, "has no outputs to split into");
      if (n != parts) {
        refuse(on, name, "num_outputs " + std::to_string(n) + " but " + std::to_string(parts) +
                             " outputs");
      }
      const int64_t each = (dim + n - 1) / n;
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::min(each, dim - i * each));
    }
    int64_t total = 0;
    bool negative = false;
    for (int64_t v : sizes) {
      total += v;
      negative |= v < 0;
    }
    if (int64_t(sizes.size()) != parts || total != dim || negative) {
      refuse(on, name, "split sizes " + shape_to_string(sizes) + " do not divide axis " +
                           std::to_string(axis) + " of extent " + std::to_string(dim) + " into " +
                           std::to_string(parts) + " outputs");
    }
    int64_t start = 0;
    for (int64_t i = 0; i < parts; ++i) {
      Node n;
      n.name = name + "_" + std::to_string(i);
      n.op = "slice";
      n.inputs = {ins[0]};
      n.outputs = {on.output(int(i))};
      n.attrs["starts"] = std::vector<int64_t>{start};
      n.attrs["ends"] = std::vector<int64_t>{start + sizes[size_t(i)]};
      n.attrs["axes"] = std::vector<int64_t>{axis};
      start += sizes[size_t(i)];
      if (sizes[size_t(i)] <= 0) refuse(on, name, "an empty output: empty tensors are not supported");
      try {
        if (fold(n)) continue;
        g_.add_node(std::move(n));
        g_.infer_node(g_.nodes().size() - 1);
      } catch (const GraphError& e) {
        throw GraphError(source_ + ": " + e.what());
      }
    }
  }

  // The target shape of Flatten, Squeeze or Unsqueeze on an input of shape `in`.
  std::vector<int64_t> reshaped(const onnx::NodeProto& on, const std::string& name,
                                const std::vector<std::string>& ins, const Shape& in) {
    const std::string& op = on.op_type();
    const int64_t rank = int64_t(in.size());
    if (op == "Flatten") {
      int64_t axis = int_attr(on, "axis", 1);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis > rank) refuse(on, name, "axis out of range");
      int64_t a = 1, b = 1;
      for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= in[size_t(i)];
      return {a, b};
    }
    std::vector<int64_t> axes = ints_attr(on, "axes");
    if (ins.size() > 1 && !ins[1].empty()) axes = ints_input(on, name, ins[1], "axes");
    std::vector<int64_t> out;
    if (op == "Squeeze") {
      std::set<int64_t> drop;
      for (int64_t a : axes) drop.insert(a < 0 ? a + rank : a);
      for (int64_t i = 0; i < rank; ++i) {
        const bool squeeze = axes.empty() ? in[size_t(i)] == 1 : drop.count(i) != 0;
        if (squeeze && in[size_t(i)] != 1) {
          refuse(on, name,
                 "axis " + std::to_string(i) + " has extent " + std::to_string(in[size_t(i)]) +
                     ", not 1");
        }
        if (!squeeze) out.push_back(in[size_t(i)]);
      }
      return out;
    }
    const int64_t out_rank = rank + int64_t(axes.size());  // Unsqueeze
    std::set<int64_t> add;
    for (int64_t a : axes) add.insert(a < 0 ? a + out_rank : a);
    size_t k = 0;
    for (int64_t i = 0; i < out_rank; ++i) out.push_back(add.count(i) ? 1 : in.at(k++));
    return out;
  }

  // Integer shape arithmetic (Shape, Gather, Squeeze/Unsqueeze, Concat, Cast, Add/Sub/Mul/Div
  // on int constants) is evaluated here: static shapes make it constant.
  bool fold_ints(const onnx::NodeProto& on, const std::string& name,
                 const std::vector<std::string>& ins) {
    const std::string& op = on.op_type();
    const std::string out = on.output(0);
    auto is_int = [&](const std::string& t) { return int_constants_.count(t) != 0; };
    auto set = [&](std::vector<int64_t> v, Shape shape) {
      int_constants_[out] = std::move(v);
      int_shapes_[out] = std::move(shape);
      return true;
    };
    if (op == "Shape") {  // opset 15: start and end pick a range of the axes
      const Shape s = shape_of(ins.at(0));
      const int64_t r = int64_t(s.size());
      auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t(0), r); };
      const int64_t start = clamp(int_attr(on, "start", 0)), end = clamp(int_attr(on, "end", r));
      if (start >= end) refuse(on, name, "start and end select no axis");
      const Shape part(s.begin() + start, s.begin() + end);
      return set(part, {int64_t(part.size())});
    }
    if (op == "ConstantOfShape" && !ins.empty() && is_int(ins[0])) {
      // One value (attribute 'value', default float 0) over a constant shape: an int
      // constant for an integer value, a param for a float one.
      const Shape shape = int_constants_.at(ins[0]);
      onnx::TensorProto value;
      value.set_data_type(onnx::TensorProto::FLOAT);
      value.add_float_data(0.0f);
      if (const auto* a = attr(on, "value")) value = a->t();
      const int64_t count = num_elements(shape.empty() ? Shape{1} : shape);
      if (count <= 0 || count > (int64_t(1) << 28)) {
        refuse(on, name, "shape " + shape_to_string(shape) + ": empty or too large");
      }
      if (value.data_type() == onnx::TensorProto::FLOAT) {
        const std::vector<float> v = float_values(value);
        if (v.size() != 1) refuse(on, name, "'value' must hold one element");
        Tensor p;
        p.name = out;
        p.kind = TensorKind::param;
        p.shape = shape.empty() ? Shape{1} : shape;
        p.data.assign(size_t(count), v[0]);
        g_.add_tensor(std::move(p));
        return true;
      }
      if (value.data_type() != onnx::TensorProto::INT64 &&
          value.data_type() != onnx::TensorProto::INT32 &&
          value.data_type() != onnx::TensorProto::BOOL) {
        refuse(on, name, "'value' must be float32, int64, int32 or bool");
      }
      const std::vector<int64_t> v = int_values(value);
      if (v.size() != 1) refuse(on, name, "'value' must hold one element");
      return set(std::vector<int64_t>(size_t(count), v[0]), shape);
    }
    if (op == "Range" && ins.size() == 3 && is_int(ins[0]) && is_int(ins[1]) && is_int(ins[2])) {
      const std::vector<int64_t>&a0 = int_constants_.at(ins[0]), &a1 = int_constants_.at(ins[1]),
                                 &a2 = int_constants_.at(ins[2]);
      if (a0.size() != 1 || a1.size() != 1 || a2.size() != 1) {
        refuse(on, name, "start, limit and delta must be scalars");
      }
      if (a2[0] == 0) refuse(on, name, "delta is 0");
      std::vector<int64_t> v;
      for (int64_t x = a0[0]; a2[0] > 0 ? x < a1[0] : x > a1[0]; x += a2[0]) {
        if (v.size() >= (size_t(1) << 24)) refuse(on, name, "the range is too long");
        v.push_back(x);
      }
      if (v.empty()) refuse(on, name, "an empty range: empty tensors are not supported");
      return set(v, {int64_t(v.size())});
    }
    if (op == "Where" && ins.size() == 3 && is_int(ins[0]) && is_int(ins[1]) && is_int(ins[2])) {
      // The TorchScript exporter's expand(-1 ...) shape: Where(Equal(shape, -1), 1, shape).
      const std::vector<int64_t>&c = int_constants_.at(ins[0]), &x = int_constants_.at(ins[1]),
                                 &y = int_constants_.at(ins[2]);
      const Shape &cs = int_shapes_.at(ins[0]), &xs = int_shapes_.at(ins[1]),
                  &ys = int_shapes_.at(ins[2]);
      const Node probe = probe_node(name);
      const Shape to = broadcast_shapes(probe, broadcast_shapes(probe, cs, xs), ys);
      const std::vector<int64_t> ic = broadcast_source(cs, to), ix = broadcast_source(xs, to),
                                 iy = broadcast_source(ys, to);
      std::vector<int64_t> v(ic.size());
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = c[size_t(ic[i])] ? x[size_t(ix[i])] : y[size_t(iy[i])];
      }
      return set(v, to);
    }
    // Masks built from constants in float (Swin's shifted-window attention mask: zeros, a
    // ScatterND per window region, a difference, compared with 0 and negated) fold here too;
    // a comparison gives 0/1 as an int constant, as on integers.
    static const std::set<std::string> compare = {"Equal", "Less", "LessOrEqual", "Greater",
                                                  "GreaterOrEqual"};
    if (compare.count(op) && ins.size() == 2 && !(is_int(ins[0]) && is_int(ins[1]))) {
      const auto x = constant_values(ins[0]), y = constant_values(ins[1]);
      if (!x || !y) return false;
      const Shape to = broadcast_shapes(probe_node(name), x->second, y->second);
      const std::vector<int64_t> ix = broadcast_source(x->second, to),
                                 iy = broadcast_source(y->second, to);
      std::vector<int64_t> v(ix.size());
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = compared(op, x->first[size_t(ix[i])], y->first[size_t(iy[i])]);
      }
      return set(v, to);
    }
    if (op == "Not" && !ins.empty()) {
      const auto x = constant_values(ins[0]);
      if (!x) return false;
      std::vector<int64_t> v;
      for (double e : x->first) v.push_back(e == 0);
      return set(v, x->second);
    }
    if (op == "ScatterND") return scatter_nd(on, name, ins);
    if (ins.empty() || !is_int(ins[0])) return false;
    const std::vector<int64_t>& a = int_constants_.at(ins[0]);
    const Shape as = int_shapes_.at(ins[0]);
    if (op == "Cast") {
      const int64_t to = int_attr(on, "to", onnx::TensorProto::INT64);
      if (to == onnx::TensorProto::FLOAT) {  // an int constant used as float: a param
        Tensor p;
        p.name = out;
        p.kind = TensorKind::param;
        p.shape = as.empty() ? Shape{1} : as;
        for (int64_t v : a) p.data.push_back(float(v));
        g_.add_tensor(std::move(p));
        return true;
      }
      if (to == onnx::TensorProto::BOOL) {
        std::vector<int64_t> b;
        for (int64_t v : a) b.push_back(v != 0);
        return set(b, as);
      }
      return set(a, as);
    }
    if (op == "GatherElements") {  // position ids picked from a buffer (dynamo's BERT)
      if (!is_int(ins.at(1))) return false;
      const std::vector<int64_t>& idx = int_constants_.at(ins[1]);
      const Shape is = int_shapes_.at(ins[1]);
      const int axis = normalize_axis(probe_node(name), int_attr(on, "axis", 0), as.size());
      if (is.size() != as.size()) refuse(on, name, "data and indices differ in rank");
      std::vector<int64_t> v(idx.size());
      for_each_index(is, [&](const std::vector<int64_t>& pos, int64_t e) {
        int64_t src = 0;  // pos (in the indices and the output) with the axis read from them
        for (size_t d = 0; d < is.size(); ++d) {
          int64_t p = pos[d];
          if (int(d) == axis) {
            p = idx[size_t(e)] < 0 ? idx[size_t(e)] + as[d] : idx[size_t(e)];
            if (p < 0 || p >= as[d]) {
              refuse(on, name, "index " + std::to_string(idx[size_t(e)]) + " is outside axis " +
                                   std::to_string(axis));
            }
          } else if (p >= as[d]) {
            refuse(on, name, "indices " + shape_to_string(is) + " exceed data " +
                                 shape_to_string(as));
          }
          src = src * as[d] + p;
        }
        v[size_t(e)] = a[size_t(src)];
      });
      return set(v, is);
    }
    if (op == "Gather") {
      if (!is_int(ins.at(1))) return false;
      std::vector<int64_t> v;
      for (int64_t i : int_constants_.at(ins[1])) {
        if (i < 0) i += int64_t(a.size());
        if (i < 0 || i >= int64_t(a.size())) refuse(on, name, "index out of range");
        v.push_back(a[size_t(i)]);
      }
      return set(v, int_shapes_.at(ins[1]));
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      return set(a, reshaped(on, name, ins, as));
    }
    // The TorchScript exporter's F.pad: the pads as a [-1, 2] matrix, reversed, transposed
    // and flattened again.
    if (op == "Reshape") {
      std::vector<int64_t> to = ints_input(on, name, ins.at(1), "the target shape");
      const int64_t count = int64_t(a.size());
      int64_t known = 1, infer = -1;
      for (size_t i = 0; i < to.size(); ++i) {
        if (to[i] == 0 && int_attr(on, "allowzero", 0) == 0) {
          if (i >= as.size()) refuse(on, name, "a 0 in the target shape past the input's rank");
          to[i] = as[i];
        }
        if (to[i] == -1) {
          if (infer >= 0) refuse(on, name, "two -1s in the target shape");
          infer = int64_t(i);
        } else {
          known *= to[i];
        }
      }
      if (infer >= 0 && known > 0) to[size_t(infer)] = count / known;
      if (num_elements(to) != count) {
        refuse(on, name,
               "reshapes " + std::to_string(count) + " integers to " + shape_to_string(to));
      }
      return set(a, to);
    }
    if (op == "Transpose") {
      std::vector<int64_t> perm = ints_attr(on, "perm");
      if (perm.empty()) {
        for (size_t d = as.size(); d-- > 0;) perm.push_back(int64_t(d));
      }
      if (perm.size() != as.size()) refuse(on, name, "perm does not match the input's rank");
      Shape out;
      for (int64_t d : perm) out.push_back(as.at(size_t(d)));
      std::vector<int64_t> v;
      for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
        std::vector<int64_t> src(as.size());
        for (size_t d = 0; d < perm.size(); ++d) src[size_t(perm[d])] = idx[d];
        int64_t f = 0;
        for (size_t d = 0; d < as.size(); ++d) f = f * as[d] + src[d];
        v.push_back(a[size_t(f)]);
      });
      return set(v, out);
    }
    if (op == "Expand") {  // position ids or a causal mask broadcast to the batch (TorchScript)
      const Shape to =
          broadcast_shapes(probe_node(name), as, ints_input(on, name, ins.at(1), "the shape"));
      std::vector<int64_t> v;
      for (int64_t s : broadcast_source(as, to)) v.push_back(a[size_t(s)]);
      return set(v, to);
    }
    if (op == "Slice") {  // Slice(Shape(x), 0, 2); position ids: buffer[:, :S]
      Node n;
      n.name = name;
      n.attrs = slice_attrs(on, name, ins);
      const Shape shape = as.empty() ? Shape{int64_t(a.size())} : as;
      if (shape.size() == 1 && empty_slice(n.attrs, shape[0])) {
        // A shape's tail past its rank (Shape(x)[2:] of a matrix, TorchScript's Swin): an
        // empty list, which only a Concat of shape pieces may take.
        return set({}, {0});
      }
      const std::vector<graph::SliceDim> dims = slice_dims(n, shape);
      Shape out;
      for (const auto& d : dims) out.push_back(d.extent);
      std::vector<int64_t> v;
      for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
        int64_t src = 0;
        for (size_t k = 0; k < dims.size(); ++k) {
          src = src * shape[k] + dims[k].start + idx[k] * dims[k].step;
        }
        v.push_back(a[size_t(src)]);
      });
      return set(v, as.size() <= 1 ? Shape{int64_t(v.size())} : out);
    }
    if (op == "Concat") {
      for (const auto& t : ins) {
        if (!is_int(t)) return false;
      }
      if (as.size() <= 1) {  // shape pieces
        std::vector<int64_t> v;
        for (const auto& t : ins) {
          v.insert(v.end(), int_constants_.at(t).begin(), int_constants_.at(t).end());
        }
        return set(v, {int64_t(v.size())});
      }
      // Index tuples (TorchScript's index_put): along the axis, each input's rows in turn.
      const int axis = normalize_axis(probe_node(name), int_attr(on, "axis", 0), as.size());
      int64_t outer = 1;
      for (int d = 0; d < axis; ++d) outer *= as[size_t(d)];
      Shape out = as;
      out[size_t(axis)] = 0;
      for (const auto& t : ins) {
        const Shape& ts = int_shapes_.at(t);
        if (ts.size() != as.size()) refuse(on, name, "inputs of different ranks");
        for (size_t d = 0; d < ts.size(); ++d) {
          if (int(d) != axis && ts[d] != as[d]) {
            refuse(on, name,
                   "inputs " + shape_to_string(as) + " and " + shape_to_string(ts) +
                       " differ off axis " + std::to_string(axis));
          }
        }
        out[size_t(axis)] += ts[size_t(axis)];
      }
      std::vector<int64_t> v;
      for (int64_t o = 0; o < outer; ++o) {
        for (const auto& t : ins) {
          const std::vector<int64_t>& c = int_constants_.at(t);
          const int64_t block = int64_t(c.size()) / outer;
          v.insert(v.end(), c.begin() + o * block, c.begin() + (o + 1) * block);
        }
      }
      return set(v, out);
    }
    // Binary arithmetic on shapes, and comparisons (masks from shapes and positions, 0/1),
    // with numpy broadcasting.
    static const std::set<std::string> binary = {
        "Add",   "Sub",  "Mul",         "Div",     "Mod",
        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
        "And",   "Or"};
    if (binary.count(op)) {
      if (!is_int(ins.at(1))) return false;
      const std::vector<int64_t>& b = int_constants_.at(ins[1]);
      // GPT-2's causal mask: arange(S)[None, :] <= arange(S)[:, None], [1, S] vs [S, 1].
      const Shape to = broadcast_shapes(probe_node(name), as, int_shapes_.at(ins[1]));
      const std::vector<int64_t> ia = broadcast_source(as, to),
                                 ib = broadcast_source(int_shapes_.at(ins[1]), to);
      std::vector<int64_t> v(ia.size());
      for (size_t i = 0; i < v.size(); ++i) {
        const int64_t x = a[size_t(ia[i])], y = b[size_t(ib[i])];
        if ((op == "Div" || op == "Mod") && y == 0) refuse(on, name, "integer division by zero");
        // Mod: the remainder takes the divisor's sign (Python's %), or with fmod = 1 the
        // dividend's (C's), as ONNX defines.
        const int64_t rem = x % (y == 0 ? 1 : y);
        const int64_t mod =
            int_attr(on, "fmod", 0) != 0 || rem == 0 || (rem < 0) == (y < 0) ? rem : rem + y;
        v[i] = op == "Add"   ? x + y
               : op == "Sub" ? x - y
               : op == "Mul" ? x * y
               : op == "Div" ? x / y
               : op == "Mod" ? mod
               : op == "And" ? (x != 0 && y != 0)
               : op == "Or"  ? (x != 0 || y != 0)
                             : compared(op, x, y);
      }
      return set(v, to);
    }
    return false;
  }

  // A constant's values and shape: an int constant, or a float param (an initializer or a
  // folded node).
  std::optional<std::pair<std::vector<double>, Shape>> constant_values(const std::string& t) const {
    if (auto it = int_constants_.find(t); it != int_constants_.end()) {
      return std::make_pair(std::vector<double>(it->second.begin(), it->second.end()),
                            int_shapes_.at(t));
    }
    const std::optional<HostTensor> v = evaluate(t, 8);
    if (!v) return std::nullopt;
    return std::make_pair(std::vector<double>(v->data.begin(), v->data.end()), v->shape);
  }

  // A tensor's values where it depends on params only: a param, or a node over such tensors
  // (an expand of a param stays a node, see fold()), run by the reference executor, at most
  // `depth` nodes deep. Nodes so evaluated for a fold that no longer need to run are pruned
  // when the import ends.
  std::optional<HostTensor> evaluate(const std::string& t, int depth) const {
    if (is_param(t)) return param_values(g_.tensor(t));
    const Node* n = g_.has_tensor(t) ? g_.producer(t) : nullptr;
    if (!n || depth <= 0) return std::nullopt;
    std::vector<HostTensor> values;
    for (const auto& in : n->inputs) {
      auto v = evaluate(in, depth - 1);
      if (!v) return std::nullopt;
      values.push_back(std::move(*v));
    }
    // A mask's size, not a weight's: an expand to a large shape stays a node.
    return run_constant(*n, values, int64_t(1) << 24);
  }

  // Runs `n` by the reference executor on constant inputs, each declared with its dtype and
  // layout in the graph and holding `values`; nothing where the output would hold more than
  // `max_elements`.
  std::optional<HostTensor> run_constant(const Node& n, const std::vector<HostTensor>& values,
                                         int64_t max_elements = kMaxElements) const {
    Graph scratch;
    std::set<std::string> seen;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!seen.insert(n.inputs[i]).second) continue;
      Tensor c;
      c.name = n.inputs[i];
      c.kind = TensorKind::param;
      c.dtype = g_.tensor(n.inputs[i]).dtype;
      c.layout = g_.tensor(n.inputs[i]).layout;
      c.shape = values[i].shape;
      c.data = values[i].data;
      scratch.add_tensor(std::move(c));
    }
    scratch.add_node(n);
    scratch.mark_output(n.outputs[0]);
    scratch.validate();
    if (num_elements(scratch.tensor(n.outputs[0]).shape) > max_elements) return std::nullopt;
    std::vector<const HostTensor*> ptrs;
    for (const auto& v : values) ptrs.push_back(&v);
    return reference::run_node(scratch, scratch.nodes()[0], ptrs);
  }

  // ScatterND (reduction none) on constants: data with the update slices written at the index
  // tuples, in order. A float result is a param, an integer one an int constant.
  bool scatter_nd(const onnx::NodeProto& on, const std::string& name,
                  const std::vector<std::string>& ins) {
    if (const auto* r = attr(on, "reduction"); r && r->s() != "none") {
      refuse(on, name, "reduction '" + r->s() + "' is not supported (none only)");
    }
    const auto data = ins.size() == 3 ? constant_values(ins[0]) : std::nullopt;
    const auto updates = ins.size() == 3 ? constant_values(ins[2]) : std::nullopt;
    if (!data || !updates || !int_constants_.count(ins.at(1))) {
      refuse(on, name,
             "is supported where data, indices and updates are constants (a mask "
             "built at export time); here one is computed at run time");
    }
    const std::vector<int64_t>& idx = int_constants_.at(ins[1]);
    const Shape is = int_shapes_.at(ins[1]), ds = data->second;
    const int64_t k = is.empty() ? 0 : is.back();
    if (k < 1 || k > int64_t(ds.size())) {
      refuse(on, name,
             "indices of shape " + shape_to_string(is) + " for data of shape " +
                 shape_to_string(ds) + ": a last axis of 1.." + std::to_string(ds.size()) +
                 " is needed");
    }
    int64_t slice = 1;
    for (size_t d = size_t(k); d < ds.size(); ++d) slice *= ds[d];
    const int64_t tuples = int64_t(idx.size()) / k;
    if (int64_t(updates->first.size()) != tuples * slice) {
      refuse(on, name,
             "updates of shape " + shape_to_string(updates->second) + " for " +
                 std::to_string(tuples) + " index tuples of " + std::to_string(slice) +
                 " elements each");
    }
    std::vector<double> out = data->first;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = idx[size_t(t * k + j)];
        const int64_t d = ds[size_t(j)];
        if (v < 0) v += d;
        if (v < 0 || v >= d) {
          refuse(on, name,
                 "index " + std::to_string(idx[size_t(t * k + j)]) + " is outside axis " +
                     std::to_string(j) + " of extent " + std::to_string(d));
        }
        offset = offset * d + v;
      }
      std::copy_n(updates->first.begin() + t * slice, slice, out.begin() + offset * slice);
    }
    const std::string& o = on.output(0);
    if (int_constants_.count(ins[0])) {
      int_constants_[o] = std::vector<int64_t>(out.begin(), out.end());
      int_shapes_[o] = ds;
      return true;
    }
    Tensor p;
    p.name = o;
    p.kind = TensorKind::param;
    p.shape = ds;
    p.data.assign(out.begin(), out.end());
    g_.add_tensor(std::move(p));
    return true;
  }

  // Whether a slice of a list of `extent` integers (one axis) selects nothing, with numpy's
  // clamping of the bounds.
  static bool empty_slice(const Attrs& a, int64_t extent) {
    auto first = [&](const char* key, int64_t fallback) {
      const auto it = a.find(key);
      const auto* v = it == a.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
      return v && !v->empty() ? v->front() : fallback;
    };
    const int64_t step = first("steps", 1);
    if (step == 0) return false;  // refused by slice_dims
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v += extent;
      return std::clamp(v, lo, hi);
    };
    if (step > 0) {
      return clamp(first("starts", 0), 0, extent) >= clamp(first("ends", extent), 0, extent);
    }
    return clamp(first("starts", extent - 1), -1, extent - 1) <=
           clamp(first("ends", -extent - 1), -1, extent - 1);
  }

  // A comparison's 0/1, as ONNX's Equal, Less(OrEqual) and Greater(OrEqual) give it.
  template <typename T>
  static int64_t compared(const std::string& op, T l, T r) {
    return op == "Equal"         ? l == r
           : op == "Less"        ? l < r
           : op == "LessOrEqual" ? l <= r
           : op == "Greater"     ? l > r
                                 : l >= r;
  }

  static Node probe_node(const std::string& name) {  // names a node in shape errors
    Node n;
    n.name = name;
    return n;
  }

  // For each element of `to` (row-major), the flat index of the element of a tensor of shape
  // `from` that numpy broadcasting reads there (a scalar's shape may be empty).
  std::vector<int64_t> broadcast_source(const Shape& from, const Shape& to) const {
    const int64_t count = num_elements(to);
    if (count < 1 || count > (int64_t(1) << 24)) {
      throw GraphError(source_ + ": integer shape arithmetic broadcasts to " +
                       shape_to_string(to) + ": empty, or more than 2^24 elements");
    }
    std::vector<int64_t> src(static_cast<size_t>(count));
    for_each_index(to, [&](const std::vector<int64_t>& idx, int64_t e) {
      src[size_t(e)] = broadcast_offset(from, idx);
    });
    return src;
  }

  // A node whose inputs are all constants is evaluated now (the reference executor) and its
  // output becomes a param: constant subgraphs never reach the planner.
  // An expand stays a node: folded, it would store every copy, and with a dynamic batch
  // (cls_token.expand(B, ...)) the weights would depend on the batch: at batch 1, where it
  // copies nothing, the fold would rename cls_token, which every other size keeps.
  bool fold(const Node& n) {
    if (n.op == "expand") return false;
    for (const auto& in : n.inputs) {
      if (!is_param(in)) return false;
    }
    std::vector<HostTensor> values;
    for (const auto& in : n.inputs) values.push_back(param_values(g_.tensor(in)));
    const HostTensor result = *run_constant(n, values);
    Tensor p;
    p.name = n.outputs[0];
    p.kind = TensorKind::param;
    p.shape = result.shape;
    p.data = result.data;
    g_.add_tensor(std::move(p));
    ++folded_;
    return true;
  }

  void window_attrs(const onnx::NodeProto& on, Node& n) {
    if (auto s = ints_attr(on, "strides"); !s.empty()) n.attrs["strides"] = s;
    if (auto p = ints_attr(on, "pads"); !p.empty()) n.attrs["pads"] = p;  // [t, l, b, r]
  }

  // ceil_mode = 1: the output extent rounds up, out = ceil((H + pads - k) / s) + 1, less one
  // where the last window would start past the input and its leading pad (ONNX and PyTorch
  // agree). The extra rows and columns the last window covers become end padding, which max
  // pooling never picks and average pooling without count_include_pad never counts; with
  // count_include_pad = 1 PyTorch counts the declared pads but not these, so that form is
  // refused where it makes a difference.
  void ceil_mode_pads(const onnx::NodeProto& on, const std::string& name, const std::string& x,
                      Node& n) {
    const Shape s = shape_of(x);
    if (s.size() != 4) refuse(on, name, "ceil_mode = 1 needs a 4-D NCHW input");
    const std::vector<int64_t> k = attr_ints(n, "kernel", {}), st = attr_ints(n, "strides", {1, 1});
    std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
    if (k.size() != 2 || st.size() != 2 || pads.size() != 4) {
      refuse(on, name, "ceil_mode = 1 needs 2-D kernel_shape, strides and pads");
    }
    for (int d = 0; d < 2; ++d) {
      const int64_t in = s[size_t(2 + d)], padded = in + pads[size_t(d)] + pads[size_t(d + 2)];
      if (st[size_t(d)] <= 0 || padded < k[size_t(d)]) continue;  // validation names it
      int64_t out = (padded - k[size_t(d)] + st[size_t(d)] - 1) / st[size_t(d)] + 1;
      if ((out - 1) * st[size_t(d)] >= in + pads[size_t(d)]) --out;
      const int64_t extra = (out - 1) * st[size_t(d)] + k[size_t(d)] - padded;
      if (extra <= 0) continue;
      if (attr_int(n, "count_include_pad", 0) != 0) {
        refuse(on, name, "ceil_mode = 1 with count_include_pad = 1 is not supported (the "
                         "window past the end would be counted)");
      }
      pads[size_t(d + 2)] += extra;
    }
    n.attrs["pads"] = pads;
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
      if (w.data.empty()) w.data = param_values(w).data;  // a param without explicit values
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
  std::string base_dir_;  // the model file's folder: where external data may lie
  DimBindings dims_;      // sizes of the inputs' symbolic dimensions
  int64_t opset_ = 0;
  Graph g_;
  std::map<std::string, std::vector<int64_t>> int_constants_;
  // ONNX integer tensors computed at run time in f32 (integer_math): exact within +-2^24.
  std::set<std::string> int_as_float_;
  std::map<std::string, Shape> int_shapes_;
  std::map<std::string, std::string> alias_;  // Identity, Dropout, Cast: output -> input
  int folded_ = 0;
};

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& source,
                        const std::string& base_dir, const DimBindings& dims) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw GraphError(source + ": not a valid ONNX model (protobuf parse failed)");
  }
  return Importer(model, source, base_dir, dims).run();
}

std::vector<std::pair<std::string, std::vector<std::string>>> onnx_input_dims(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(path + ": cannot open the ONNX file");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) {
    throw GraphError(path + ": not a valid ONNX model (protobuf parse failed)");
  }
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& vi : model.graph().input()) {
    if (initializers.count(vi.name())) continue;
    std::vector<std::string> names;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      names.push_back(d.has_dim_value() ? "" : d.dim_param());
    }
    out.emplace_back(vi.name(), std::move(names));
  }
  return out;
}

Graph import_onnx(const std::string& path, const DimBindings& dims) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(path + ": cannot open the ONNX file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return import_onnx_bytes(ss.str(), path, dir.empty() ? "." : dir.string(), dims);
}

}  // namespace opfuse::graph
