// The networks of networks.h. Weights are uniform in +-sqrt(3 / fan_in) (unit-variance
// activations through ReLU stacks, like torchvision's own initialisation in spirit), batch
// norm statistics near identity, so that outputs stay O(1) through 18-53 layers.
#include "tests/frontend/networks.h"

#include <cmath>
#include <fstream>
#include <stdexcept>

#include "tests/onnx_model.h"

namespace opfuse::testing {
namespace {

class NetWriter {
 public:
  NetWriter(ExportStyle style, bool dynamic_batch, bool dynamic_seq = false)
      : style_(style), dynamic_(dynamic_batch), dynamic_seq_(dynamic_seq),
        om_(style == ExportStyle::dynamo ? 20 : 17) {}
  bool dynamic_seq() const { return dynamic_seq_; }

  // A graph input whose first axis is the batch: dim_param "batch" with dynamic_axes.
  void batch_input(const std::string& name, std::vector<int64_t> shape,
                   onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT) {
    om_.input(name, shape, dynamic_);
    auto* tt = om_.m.mutable_graph()->mutable_input()->rbegin()->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    if (dynamic_) tt->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
    // Token inputs [batch, seq] with dynamic_axes={.., 1: "seq"}.
    if (dynamic_seq_ && shape.size() == 2) tt->mutable_shape()->mutable_dim(1)->set_dim_param("seq");
  }

  // x.view(x.size(0), *rest), or x.view(*x.shape[:lead], *rest): a constant shape for a static
  // batch; with a dynamic one the exporters compute it from the input's shape, TorchScript as
  // Shape -> Gather -> Unsqueeze -> Concat per size, dynamo as Shape(start, end) -> Concat.
  // `lead`: the leading sizes at the static batch 1 ({1}, or {1, S} for x.shape[:2]).
  std::string reshape_lead(const std::string& x, const std::vector<int64_t>& lead,
                           const std::vector<int64_t>& rest, const std::string& shape_of = "") {
    if (!dynamic_ && !dynamic_seq_) {
      std::vector<int64_t> shape = lead;
      shape.insert(shape.end(), rest.begin(), rest.end());
      return reshape(x, shape);
    }
    const std::string src = shape_of.empty() ? x : shape_of;
    const std::string n = fresh("view");
    std::vector<std::string> parts;
    if (style_ == ExportStyle::dynamo) {
      auto* sh = om_.node("Shape", n + "_shape", {src}, n + "_lead");
      OnnxModel::i(sh, "start", 0);
      OnnxModel::i(sh, "end", int64_t(lead.size()));
      parts.push_back(n + "_lead");
    } else {
      om_.node("Shape", n + "_shape", {src}, n + "_dims");
      for (int64_t i = 0; i < int64_t(lead.size()); ++i) {
        const std::string idx = n + "_i" + std::to_string(i);
        int_scalar(idx, i);
        om_.node("Gather", n + "_g" + std::to_string(i), {n + "_dims", idx}, idx + "_size");
        om_.init_ints(idx + "_axes", {0});
        om_.node("Unsqueeze", n + "_u" + std::to_string(i), {idx + "_size", idx + "_axes"},
                 idx + "_v");
        parts.push_back(idx + "_v");
      }
    }
    om_.init_ints(n + "_rest", rest);
    parts.push_back(n + "_rest");
    OnnxModel::i(om_.node("Concat", n + "_cat", parts, n + "_target"), "axis", 0);
    om_.node("Reshape", n, {x, n + "_target"}, n + "_out");
    return n + "_out";
  }
  bool dynamic() const { return dynamic_; }
  // t.expand(like.size(0), *rest): Expand to a shape whose first size is `like`'s.
  std::string expand_lead(const std::string& t, const std::string& like,
                          const std::vector<int64_t>& rest) {
    const std::string n = fresh("expand");
    auto* sh = om_.node("Shape", n + "_shape", {like}, n + "_lead");
    OnnxModel::i(sh, "start", 0);
    OnnxModel::i(sh, "end", 1);
    om_.init_ints(n + "_rest", rest);
    OnnxModel::i(om_.node("Concat", n + "_cat", {n + "_lead", n + "_rest"}, n + "_target"), "axis", 0);
    om_.node("Expand", n, {t, n + "_target"}, n + "_out");
    return n + "_out";
  }

  OnnxModel& model() { return om_; }

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(counter_++); }

  void weight(const std::string& name, const std::vector<int64_t>& dims, float lo, float hi) {
    size_t n = 1;
    for (int64_t d : dims) n *= size_t(d);
    om_.init(name, dims, random_values(n, lo, hi, seed_++));
  }

  // Conv (bias = false in the module) -> BatchNorm [-> activation]: folded into one Conv with
  // a bias by the TorchScript exporter, kept as Conv + BatchNormalization by dynamo.
  std::string conv_bn(const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                      int64_t groups, const char* act) {
    const std::string c = fresh("conv");
    const float a = float(std::sqrt(3.0 / double(cin / groups * k * k)));
    weight(c + ".weight", {cout, cin / groups, k, k}, -a, a);
    std::vector<std::string> ins{x, c + ".weight"};
    if (style_ == ExportStyle::torchscript) {
      weight(c + ".bias", {cout}, -0.1f, 0.1f);
      ins.push_back(c + ".bias");
    }
    auto* n = om_.node("Conv", c, ins, c + "_out");
    OnnxModel::ints(n, "kernel_shape", {k, k});
    OnnxModel::ints(n, "strides", {stride, stride});
    OnnxModel::ints(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    OnnxModel::ints(n, "dilations", {1, 1});
    OnnxModel::i(n, "group", groups);
    std::string y = c + "_out";
    if (style_ == ExportStyle::dynamo) {
      const std::string b = fresh("bn");
      weight(b + ".weight", {cout}, 0.8f, 1.2f);
      weight(b + ".bias", {cout}, -0.1f, 0.1f);
      weight(b + ".running_mean", {cout}, -0.1f, 0.1f);
      weight(b + ".running_var", {cout}, 0.8f, 1.2f);
      auto* bn = om_.node("BatchNormalization", b,
                          {y, b + ".weight", b + ".bias", b + ".running_mean", b + ".running_var"},
                          b + "_out");
      OnnxModel::f(bn, "epsilon", 1e-5f);
      OnnxModel::f(bn, "momentum", 0.9f);
      y = b + "_out";
    }
    return act ? activation(y, act) : y;
  }

  // A convolution with a bias and no batch norm (squeeze-excitation's 1x1 convs).
  std::string conv_bias(const std::string& x, int64_t cin, int64_t cout) {
    const std::string c = fresh("conv");
    const float a = float(std::sqrt(3.0 / double(cin)));
    weight(c + ".weight", {cout, cin, 1, 1}, -a, a);
    weight(c + ".bias", {cout}, -0.1f, 0.1f);
    auto* n = om_.node("Conv", c, {x, c + ".weight", c + ".bias"}, c + "_out");
    OnnxModel::ints(n, "kernel_shape", {1, 1});
    OnnxModel::ints(n, "strides", {1, 1});
    OnnxModel::ints(n, "pads", {0, 0, 0, 0});
    OnnxModel::ints(n, "dilations", {1, 1});
    OnnxModel::i(n, "group", 1);
    return c + "_out";
  }

  std::string activation(const std::string& x, const std::string& act) {
    const std::string a = fresh(act);
    if (act == "relu") {
      om_.node("Relu", a, {x}, a + "_out");
    } else if (act == "sigmoid") {
      om_.node("Sigmoid", a, {x}, a + "_out");
    } else if (act == "silu") {  // both exporters: x * sigmoid(x)
      om_.node("Sigmoid", a, {x}, a + "_sig");
      om_.node("Mul", a + "_mul", {x, a + "_sig"}, a + "_out");
    } else {  // relu6: hardtanh(0, 6) -> Clip with the bounds as inputs
      om_.scalar(a + "_min", 0.0f);
      om_.scalar(a + "_max", 6.0f);
      om_.node("Clip", a, {x, a + "_min", a + "_max"}, a + "_out");
    }
    return a + "_out";
  }

  std::string add(const std::string& a, const std::string& b) { return binary("Add", a, b); }
  std::string binary(const char* op, const std::string& a, const std::string& b) {
    const std::string n = fresh(op);
    om_.node(op, n, {a, b}, n + "_out");
    return n + "_out";
  }

  // adaptive_avg_pool2d(1) keeping dims: GlobalAveragePool (TorchScript), ReduceMean over
  // the axes given as an input (dynamo).
  std::string spatial_mean(const std::string& x) {
    const std::string n = fresh("avgpool");
    if (style_ == ExportStyle::torchscript) {
      om_.node("GlobalAveragePool", n, {x}, n + "_out");
    } else {
      om_.init_ints(n + "_axes", {-1, -2});
      auto* r = om_.node("ReduceMean", n, {x, n + "_axes"}, n + "_out");
      OnnxModel::i(r, "keepdims", 1);
    }
    return n + "_out";
  }

  // A rank-0 int64 initializer (Gather's index of x[:, 0] or qkv.unbind(0)).
  void int_scalar(const std::string& name, int64_t v) {
    auto* t = om_.m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
  }

  std::string op1(const char* op, const std::string& x) {
    const std::string n = fresh(op);
    om_.node(op, n, {x}, n + "_out");
    return n + "_out";
  }
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape) {
    const std::string n = fresh("reshape");
    om_.init_ints(n + "_shape", shape);
    om_.node("Reshape", n, {x, n + "_shape"}, n + "_out");
    return n + "_out";
  }
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm) {
    const std::string n = fresh("transpose");
    OnnxModel::ints(om_.node("Transpose", n, {x}, n + "_out"), "perm", perm);
    return n + "_out";
  }
  std::string gather(const std::string& x, int64_t axis, int64_t index) {
    const std::string n = fresh("gather");
    int_scalar(n + "_index", index);
    OnnxModel::i(om_.node("Gather", n, {x, n + "_index"}, n + "_out"), "axis", axis);
    return n + "_out";
  }
  std::string softmax(const std::string& x) {  // over the last axis
    const std::string n = fresh("softmax");
    OnnxModel::i(om_.node("Softmax", n, {x}, n + "_out"), "axis", -1);
    return n + "_out";
  }
  // [1, S, heads * hd] -> [1, heads, S, hd]: the attention heads of a projection.
  std::string heads(const std::string& x, int64_t seq, int64_t heads, int64_t hd) {
    if (dynamic_seq_) return transpose(reshape_lead(x, {1, seq}, {heads, hd}), {0, 2, 1, 3});
    return transpose(reshape_lead(x, {1}, {seq, heads, hd}), {0, 2, 1, 3});
  }
  // [.., S, heads, hd] (after the transpose back) -> [1, S, d].
  std::string merge_heads(const std::string& t, int64_t seq, int64_t d) {
    if (dynamic_seq_) return reshape_lead(t, {1, seq}, {d});
    return reshape_lead(t, {1}, {seq, d});
  }
  // S, the token inputs' second size, as a 1-element int64 tensor (Shape(ids, 1, 2)) when the
  // sequence is dynamic.
  std::string seq_size(const std::string& ids) {
    const std::string n = fresh("seq_len");
    auto* sh = om_.node("Shape", n, {ids}, n + "_out");
    OnnxModel::i(sh, "start", 1);
    OnnxModel::i(sh, "end", 2);
    return n + "_out";
  }
  // buffer[:, :S] (or [:, :, :S, :S]): a registered buffer cut to the sequence, as the
  // exporters write it with a dynamic length.
  std::string cut_to(const std::string& buffer, const std::string& len, const std::vector<int64_t>& axes) {
    const std::string n = fresh("cut");
    om_.init_ints(n + "_starts", std::vector<int64_t>(axes.size(), 0));
    std::vector<std::string> ends(axes.size(), len);
    OnnxModel::i(om_.node("Concat", n + "_cat", ends, n + "_ends"), "axis", 0);
    om_.init_ints(n + "_axes", axes);
    om_.node("Slice", n, {buffer, n + "_starts", n + "_ends", n + "_axes"}, n + "_out");
    return n + "_out";
  }
  std::string scale(const std::string& x, float k) {
    const std::string n = fresh("scale");
    om_.scalar(n + "_k", k);
    om_.node("Mul", n, {x, n + "_k"}, n + "_out");
    return n + "_out";
  }

  // nn.LayerNorm(d) over the last axis: LayerNormalization (opset 17+, both exporters).
  std::string layer_norm(const std::string& x, int64_t d, float eps = 1e-6f) {
    const std::string n = fresh("norm");
    weight(n + ".weight", {d}, 0.8f, 1.2f);
    weight(n + ".bias", {d}, -0.1f, 0.1f);
    auto* ln = om_.node("LayerNormalization", n, {x, n + ".weight", n + ".bias"}, n + "_out");
    OnnxModel::i(ln, "axis", -1);
    OnnxModel::f(ln, "epsilon", eps);
    return n + "_out";
  }

  // An integer graph input (token ids, an attention mask).
  void int_input(const std::string& name, const std::vector<int64_t>& shape) {
    om_.input(name, shape);
    om_.m.mutable_graph()->mutable_input()->rbegin()->mutable_type()->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::INT64);
  }
  // An int64 initializer of any shape (position ids, token type ids).
  void int_tensor(const std::string& name, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& v) {
    auto* t = om_.m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
  }
  // nn.Embedding(num, d) looked up by `ids`: Gather(weight, ids).
  std::string embedding(const std::string& table, int64_t num, int64_t d, const std::string& ids) {
    weight(table, {num, d}, -0.1f, 0.1f);
    const std::string n = fresh("embedding");
    om_.node("Gather", n, {table, ids}, n + "_out");
    return n + "_out";
  }
  std::string unsqueeze(const std::string& x, int64_t axis) {
    const std::string n = fresh("unsqueeze");
    om_.init_ints(n + "_axes", {axis});
    om_.node("Unsqueeze", n, {x, n + "_axes"}, n + "_out");
    return n + "_out";
  }
  // transformers' Conv1D (GPT-2): addmm(bias, x.view(-1, din), W[din, dout]).view(...):
  // Reshape to 2-D, Gemm, Reshape back.
  std::string conv1d(const std::string& x, int64_t rows, int64_t din, int64_t dout) {
    const std::string n = fresh("conv1d");
    const float a = float(std::sqrt(3.0 / double(din)));
    weight(n + ".weight", {din, dout}, -a, a);
    weight(n + ".bias", {dout}, -0.1f, 0.1f);
    const std::string flat = reshape(x, {dynamic_ || dynamic_seq_ ? -1 : rows, din});
    om_.node("Gemm", n, {flat, n + ".weight", n + ".bias"}, n + "_mm");
    return reshape_lead(n + "_mm", {1, rows}, {dout}, x);
  }
  std::string split3(const std::string& x, int64_t axis, int64_t part, std::string out[3]) {
    const std::string n = fresh("split");
    om_.init_ints(n + "_sizes", {part, part, part});
    auto* s = om_.node("Split", n, {x, n + "_sizes"}, n + "_0");
    s->add_output(n + "_1");
    s->add_output(n + "_2");
    OnnxModel::i(s, "axis", axis);
    for (int i = 0; i < 3; ++i) out[i] = n + "_" + std::to_string(i);
    return n;
  }
  // GELU, tanh form (transformers' gelu_new): decomposed by TorchScript, Gelu(approximate =
  // "tanh") at opset 20 from dynamo.
  std::string gelu_tanh(const std::string& x) {
    const std::string n = fresh("gelu_new");
    if (style_ == ExportStyle::dynamo) {
      auto* g = om_.node("Gelu", n, {x}, n + "_out");
      auto* at = g->add_attribute();
      at->set_name("approximate");
      at->set_type(onnx::AttributeProto::STRING);
      at->set_s("tanh");
      return n + "_out";
    }
    om_.scalar(n + "_three", 3.0f);
    om_.node("Pow", n + "_pow", {x, n + "_three"}, n + "_cube");
    const std::string inner = add(x, scale(n + "_cube", 0.044715f));
    const std::string t = op1("Tanh", scale(inner, std::sqrt(2.0f / float(M_PI))));
    om_.scalar(n + "_one", 1.0f);
    const std::string onep = binary("Add", t, n + "_one");
    return binary("Mul", scale(x, 0.5f), onep);
  }

  // nn.Linear(din, dout) on [..., din]: MatMul by the transposed weight (an initializer
  // [din, dout]) + Add of the bias, as both exporters write it for inputs of rank 3.
  std::string linear(const std::string& x, int64_t din, int64_t dout) {
    const std::string n = fresh("linear");
    const float a = float(std::sqrt(3.0 / double(din)));
    weight(n + ".weight_t", {din, dout}, -a, a);
    weight(n + ".bias", {dout}, -0.1f, 0.1f);
    om_.node("MatMul", n, {x, n + ".weight_t"}, n + "_mm");
    om_.node("Add", n + "_bias", {n + "_mm", n + ".bias"}, n + "_out");
    return n + "_out";
  }

  // nn.GELU() (erf form): decomposed by TorchScript (x * 0.5 * (1 + erf(x / sqrt 2))),
  // the opset-20 Gelu op from dynamo.
  std::string gelu(const std::string& x) {
    const std::string n = fresh("gelu");
    if (style_ == ExportStyle::dynamo) {
      om_.node("Gelu", n, {x}, n + "_out");
      return n + "_out";
    }
    om_.scalar(n + "_sqrt2", std::sqrt(2.0f));
    om_.scalar(n + "_one", 1.0f);
    om_.scalar(n + "_half", 0.5f);
    om_.node("Div", n + "_div", {x, n + "_sqrt2"}, n + "_d");
    om_.node("Erf", n + "_erf", {n + "_d"}, n + "_e");
    om_.node("Add", n + "_add", {n + "_e", n + "_one"}, n + "_a");
    om_.node("Mul", n + "_mul", {x, n + "_a"}, n + "_m");
    om_.node("Mul", n + "_mul2", {n + "_m", n + "_half"}, n + "_out");
    return n + "_out";
  }

  // adaptive_avg_pool2d((1, 1)) + flatten + Linear(c, classes); `batch` the static exports'
  // leading dimension.
  std::string classifier(const std::string& x, int64_t c, int64_t classes, int64_t batch = 1) {
    const std::string pooled = spatial_mean(x);
    std::string flat = "flat";
    if (style_ == ExportStyle::torchscript) {
      auto* f = om_.node("Flatten", "flatten", {pooled}, "flat");
      OnnxModel::i(f, "axis", 1);
    } else {
      flat = reshape_lead(pooled, {batch}, {c});
    }
    const float a = float(std::sqrt(3.0 / double(c)));
    weight("fc.weight", {classes, c}, -a, a);
    weight("fc.bias", {classes}, -0.1f, 0.1f);
    auto* g = om_.node("Gemm", "fc", {flat, "fc.weight", "fc.bias"}, "logits");
    OnnxModel::i(g, "transB", 1);
    OnnxModel::f(g, "alpha", 1.0f);
    OnnxModel::f(g, "beta", 1.0f);
    return "logits";
  }

  // Moves every float initializer's values into PATH.data (external data, 64-byte aligned
  // offsets as onnx.external_data_helper writes them) and writes the model to PATH.
  void save(const std::string& path) {
    if (style_ == ExportStyle::dynamo) {
      const std::string data_name =
          path.substr(path.find_last_of('/') + 1) + ".data";
      std::ofstream data(path + ".data", std::ios::binary);
      int64_t offset = 0;
      for (auto& t : *om_.m.mutable_graph()->mutable_initializer()) {
        if (t.data_type() != onnx::TensorProto::FLOAT || t.float_data_size() < 16) continue;
        const int64_t pad = (64 - offset % 64) % 64;
        const std::string zeros(size_t(pad), '\0');
        data.write(zeros.data(), std::streamsize(pad));
        offset += pad;
        const int64_t bytes = int64_t(t.float_data_size()) * 4;
        data.write(reinterpret_cast<const char*>(t.float_data().data()), std::streamsize(bytes));
        t.clear_float_data();
        t.set_data_location(onnx::TensorProto::EXTERNAL);
        auto kv = [&](const char* k, const std::string& v) {
          auto* e = t.add_external_data();
          e->set_key(k);
          e->set_value(v);
        };
        kv("location", data_name);
        kv("offset", std::to_string(offset));
        kv("length", std::to_string(bytes));
        offset += bytes;
      }
      if (!data) throw std::runtime_error("cannot write " + path + ".data");
    }
    std::ofstream out(path, std::ios::binary);
    out << om_.bytes();
    if (!out) throw std::runtime_error("cannot write " + path);
  }

 private:
  ExportStyle style_;
  bool dynamic_;
  bool dynamic_seq_;
  OnnxModel om_;
  int counter_ = 0;
  uint64_t seed_ = 1000;
};

// torchvision's ResNet stem: a 7x7/2 conv to 64 channels with ReLU, a 3x3/2 max pool.
std::string resnet_stem(NetWriter& w) {
  const std::string x = w.conv_bn("x", 3, 64, 7, 2, 1, "relu");
  auto* mp = w.model().node("MaxPool", "maxpool", {x}, "maxpool_out");
  OnnxModel::ints(mp, "kernel_shape", {3, 3});
  OnnxModel::ints(mp, "strides", {2, 2});
  OnnxModel::ints(mp, "pads", {1, 1, 1, 1});
  return "maxpool_out";
}

// torchvision.models.resnet18: 7x7/2 stem, 3x3/2 max pool, four stages of two BasicBlocks
// (64, 128, 256, 512 channels; 1x1/2 projection where the stride or width changes).
void resnet18(NetWriter& w, int64_t image) {
  w.batch_input("x", {1, 3, image, image});
  std::string x = resnet_stem(w);
  int64_t c = 64;
  for (int64_t width : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const int64_t stride = block == 0 && width != 64 ? 2 : 1;
      std::string identity = x;
      const std::string h = w.conv_bn(x, c, width, 3, stride, 1, "relu");
      const std::string o = w.conv_bn(h, width, width, 3, 1, 1, nullptr);
      if (stride != 1 || c != width) identity = w.conv_bn(x, c, width, 1, stride, 1, nullptr);
      x = w.activation(w.add(o, identity), "relu");
      c = width;
    }
  }
  w.model().output(w.classifier(x, 512, 1000));
}

// torchvision.models.resnet50: resnet18's stem and max pool, four stages of 3, 4, 6 and 3
// Bottlenecks (1x1, then the 3x3 with the stage's stride as torchvision's v1.5 has it, then a
// 1x1 to 4x the width; a strided 1x1 projection on each stage's first block), a 2048-wide
// classifier: torchvision's 25,557,032 parameters (and the batch norms' running statistics).
void resnet50(NetWriter& w, int64_t image, int64_t batch) {
  w.batch_input("x", {batch, 3, image, image});
  std::string x = resnet_stem(w);
  int64_t c = 64;
  const int64_t stages[][2] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};
  for (const auto& [width, blocks] : stages) {
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t stride = block == 0 && width != 64 ? 2 : 1;
      std::string identity = x;
      std::string h = w.conv_bn(x, c, width, 1, 1, 1, "relu");
      h = w.conv_bn(h, width, width, 3, stride, 1, "relu");
      const std::string o = w.conv_bn(h, width, 4 * width, 1, 1, 1, nullptr);
      if (block == 0) identity = w.conv_bn(x, c, 4 * width, 1, stride, 1, nullptr);
      x = w.activation(w.add(o, identity), "relu");
      c = 4 * width;
    }
  }
  w.model().output(w.classifier(x, 2048, 1000, batch));
}

// torchvision.models.mobilenet_v2: inverted residuals (t, c, n, s) with ReLU6, 1280-wide head.
void mobilenet_v2(NetWriter& w, int64_t image) {
  w.batch_input("x", {1, 3, image, image});
  std::string x = w.conv_bn("x", 3, 32, 3, 2, 1, "relu6");
  int64_t c = 32;
  const int64_t config[][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                               {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& [t, out, n, s] : config) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t stride = i == 0 ? s : 1, hidden = c * t;
      std::string h = x;
      if (t != 1) h = w.conv_bn(h, c, hidden, 1, 1, 1, "relu6");
      h = w.conv_bn(h, hidden, hidden, 3, stride, hidden, "relu6");
      h = w.conv_bn(h, hidden, out, 1, 1, 1, nullptr);
      x = stride == 1 && c == out ? w.add(x, h) : h;
      c = out;
    }
  }
  x = w.conv_bn(x, c, 1280, 1, 1, 1, "relu6");
  w.model().output(w.classifier(x, 1280, 1000));
}

// torchvision.models.efficientnet_b0: MBConv blocks (expand, k, stride, out, repeats) with
// SiLU, squeeze-excitation (a quarter of the block's input channels) and residuals.
void efficientnet_b0(NetWriter& w, int64_t image) {
  w.batch_input("x", {1, 3, image, image});
  std::string x = w.conv_bn("x", 3, 32, 3, 2, 1, "silu");
  int64_t c = 32;
  const int64_t config[][5] = {{1, 3, 1, 16, 1},  {6, 3, 2, 24, 2},  {6, 5, 2, 40, 2},
                               {6, 3, 2, 80, 3},  {6, 5, 1, 112, 3}, {6, 5, 2, 192, 4},
                               {6, 3, 1, 320, 1}};
  for (const auto& [t, k, s, out, n] : config) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t stride = i == 0 ? s : 1, hidden = c * t, squeeze = std::max<int64_t>(1, c / 4);
      std::string h = x;
      if (t != 1) h = w.conv_bn(h, c, hidden, 1, 1, 1, "silu");
      h = w.conv_bn(h, hidden, hidden, k, stride, hidden, "silu");
      // Squeeze-excitation: mean -> 1x1 conv -> SiLU -> 1x1 conv -> sigmoid -> scale.
      std::string se = w.spatial_mean(h);
      se = w.activation(w.conv_bias(se, hidden, squeeze), "silu");
      se = w.activation(w.conv_bias(se, squeeze, hidden), "sigmoid");
      h = w.binary("Mul", h, se);
      h = w.conv_bn(h, hidden, out, 1, 1, 1, nullptr);
      x = stride == 1 && c == out ? w.add(h, x) : h;
      c = out;
    }
  }
  x = w.conv_bn(x, c, 1280, 1, 1, 1, "silu");
  w.model().output(w.classifier(x, 1280, 1000));
}

// timm vit_tiny_patch16_224: 16x16 patches embedded by a strided conv, a class token, learned
// position embeddings, 12 pre-norm blocks of 3-head attention (d = 192) and a 4x GELU MLP, the
// class token's final norm into a 1000-way head.
void vit_tiny(NetWriter& w, int64_t image) {
  const int64_t d = 192, heads = 3, hd = d / heads, depth = 12, p = 16;
  const int64_t tokens = (image / p) * (image / p) + 1;
  w.batch_input("x", {1, 3, image, image});
  const float a = float(std::sqrt(3.0 / double(3 * p * p)));
  w.weight("patch_embed.proj.weight", {d, 3, p, p}, -a, a);
  w.weight("patch_embed.proj.bias", {d}, -0.1f, 0.1f);
  auto* pe = w.model().node("Conv", "patch_embed",
                            {"x", "patch_embed.proj.weight", "patch_embed.proj.bias"}, "patches");
  OnnxModel::ints(pe, "kernel_shape", {p, p});
  OnnxModel::ints(pe, "strides", {p, p});
  OnnxModel::ints(pe, "pads", {0, 0, 0, 0});
  OnnxModel::ints(pe, "dilations", {1, 1});
  OnnxModel::i(pe, "group", 1);
  // flatten(2).transpose(1, 2), then cat(cls_token, x) and + pos_embed.
  std::string x = w.transpose(w.reshape_lead("patches", {1}, {d, tokens - 1}), {0, 2, 1});
  w.weight("cls_token", {1, 1, d}, -0.02f, 0.02f);
  w.weight("pos_embed", {1, tokens, d}, -0.02f, 0.02f);
  // cls_token.expand(B, -1, -1): an Expand to the batch's size (a no-op at batch 1).
  std::string cls = "cls_token";
  if (w.dynamic()) cls = w.expand_lead(cls, x, {1, d});
  OnnxModel::i(w.model().node("Concat", "cat_cls", {cls, x}, "with_cls"), "axis", 1);
  x = w.add("with_cls", "pos_embed");
  for (int64_t b = 0; b < depth; ++b) {
    // Attention: qkv -> [1, T, 3, heads, hd] -> [3, 1, heads, T, hd] -> unbind(0).
    std::string h = w.layer_norm(x, d);
    std::string qkv = w.transpose(w.reshape_lead(w.linear(h, d, 3 * d), {1}, {tokens, 3, heads, hd}),
                                  {2, 0, 3, 1, 4});
    const std::string q = w.gather(qkv, 0, 0), k = w.gather(qkv, 0, 1), v = w.gather(qkv, 0, 2);
    std::string att = w.binary("MatMul", w.scale(q, 1.0f / std::sqrt(float(hd))),
                               w.transpose(k, {0, 1, 3, 2}));
    h = w.binary("MatMul", w.softmax(att), v);
    h = w.reshape_lead(w.transpose(h, {0, 2, 1, 3}), {1}, {tokens, d});
    x = w.add(x, w.linear(h, d, d));
    // MLP.
    h = w.linear(w.gelu(w.linear(w.layer_norm(x, d), d, 4 * d)), 4 * d, d);
    x = w.add(x, h);
  }
  cls = w.gather(w.layer_norm(x, d), 1, 0);  // x[:, 0]: [1, d]
  const float ah = float(std::sqrt(3.0 / double(d)));
  w.weight("head.weight", {1000, d}, -ah, ah);
  w.weight("head.bias", {1000}, -0.1f, 0.1f);
  auto* g = w.model().node("Gemm", "head", {cls, "head.weight", "head.bias"}, "logits");
  OnnxModel::i(g, "transB", 1);
  w.model().output("logits");
}

// A BERT-base-shaped encoder (transformers BertModel: hidden 768, 12 heads, FFN 3072, vocab
// 30522, 128 tokens) with 2 of BERT-base's 12 layers, from token ids and an attention mask:
// word, position and token-type embeddings (the last two from constant ids, folded at import),
// the mask as (1 - mask[:, None, None, :].float()) * finfo.min added to the scores.
void bert_encoder(NetWriter& w, int64_t seq) {
  const int64_t d = 768, heads = 12, hd = d / heads, ffn = 3072, vocab = 30522, layers = 2;
  w.batch_input("input_ids", {1, seq}, onnx::TensorProto::INT64);
  w.batch_input("attention_mask", {1, seq}, onnx::TensorProto::INT64);
  // The registered buffers position_ids = arange(512) and token_type_ids = zeros(512), cut to
  // the sequence ([:, :S]; at a static length the exporters fold the cut).
  const int64_t buf = w.dynamic_seq() ? 512 : seq;
  std::vector<int64_t> pos(static_cast<size_t>(buf)), zeros(static_cast<size_t>(buf), 0);
  for (int64_t i = 0; i < buf; ++i) pos[size_t(i)] = i;
  w.int_tensor("position_ids", {1, buf}, pos);
  w.int_tensor("token_type_ids", {1, buf}, zeros);
  std::string position_ids = "position_ids", token_type_ids = "token_type_ids";
  if (w.dynamic_seq()) {
    const std::string len = w.seq_size("input_ids");
    position_ids = w.cut_to("position_ids", len, {1});
    token_type_ids = w.cut_to("token_type_ids", len, {1});
  }
  std::string x = w.add(w.add(w.embedding("embeddings.word_embeddings.weight", vocab, d, "input_ids"),
                              w.embedding("embeddings.token_type_embeddings.weight", 2, d,
                                          token_type_ids)),
                        w.embedding("embeddings.position_embeddings.weight", 512, d, position_ids));
  x = w.layer_norm(x, d, 1e-12f);
  // The extended mask [1, 1, 1, S].
  const std::string m4 = w.unsqueeze(w.unsqueeze("attention_mask", 1), 2);
  const std::string mc = w.fresh("mask_cast");
  OnnxModel::i(w.model().node("Cast", mc, {m4}, mc + "_out"), "to", onnx::TensorProto::FLOAT);
  w.model().scalar("mask_one", 1.0f);
  const std::string mask = w.scale(w.binary("Sub", "mask_one", mc + "_out"), -3.4028234663852886e38f);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string q = w.heads(w.linear(x, d, d), seq, heads, hd),
                      k = w.heads(w.linear(x, d, d), seq, heads, hd),
                      v = w.heads(w.linear(x, d, d), seq, heads, hd);
    std::string s = w.binary("MatMul", q, w.transpose(k, {0, 1, 3, 2}));
    const std::string sq = w.fresh("sqrt_hd");
    w.model().scalar(sq, 8.0f);
    s = w.add(w.binary("Div", s, sq), mask);
    std::string h = w.merge_heads(w.transpose(w.binary("MatMul", w.softmax(s), v), {0, 2, 1, 3}),
                                  seq, d);
    x = w.layer_norm(w.add(w.linear(h, d, d), x), d, 1e-12f);
    h = w.linear(w.gelu(w.linear(x, d, ffn)), ffn, d);
    x = w.layer_norm(w.add(h, x), d, 1e-12f);
  }
  w.model().output(x);
}

// A GPT-2 block (transformers GPT2Model, n_embd 768, 12 heads, vocab 50257) from token ids:
// token and position embeddings, ln_1, c_attn as Conv1D (Reshape, Gemm, Reshape) split into
// q, k, v, the causal mask as where(mask, scores, finfo.min) on a constant [1, 1, S, S] mask,
// c_proj, ln_2, the gelu_new MLP, residuals, ln_f.
void gpt2_block(NetWriter& w, int64_t seq) {
  const int64_t d = 768, heads = 12, hd = d / heads, vocab = 50257;
  w.batch_input("input_ids", {1, seq}, onnx::TensorProto::INT64);
  std::string position_ids = "position_ids", seq_len;
  if (w.dynamic_seq()) {
    // torch.arange(0, S).unsqueeze(0): Range on the input's length.
    seq_len = w.seq_size("input_ids");
    w.int_scalar("range_start", 0);
    w.int_scalar("range_delta", 1);
    w.model().node("Squeeze", "seq_scalar", {seq_len}, "seq_scalar_out");
    w.model().node("Range", "positions", {"range_start", "seq_scalar_out", "range_delta"}, "positions_out");
    position_ids = w.unsqueeze("positions_out", 0);
  } else {
    std::vector<int64_t> pos(static_cast<size_t>(seq));
    for (int64_t i = 0; i < seq; ++i) pos[size_t(i)] = i;
    w.int_tensor("position_ids", {1, seq}, pos);
  }
  std::string x = w.add(w.embedding("wte.weight", vocab, d, "input_ids"),
                        w.embedding("wpe.weight", 1024, d, position_ids));
  std::string h = w.layer_norm(x, d, 1e-5f);
  std::string qkv[3];
  w.split3(w.conv1d(h, seq, d, 3 * d), 2, d, qkv);
  std::string s = w.binary("MatMul", w.heads(qkv[0], seq, heads, hd),
                           w.transpose(w.heads(qkv[1], seq, heads, hd), {0, 1, 3, 2}));
  s = w.scale(s, 1.0f / std::sqrt(float(hd)));
  // The causal mask: bool [1, 1, S, S], lower triangular (with a dynamic length, the
  // registered bias [1, 1, 1024, 1024] cut to [:, :, :S, :S]; the exporters fold it otherwise).
  const int64_t mask_size = w.dynamic_seq() ? 1024 : seq;
  auto* cm = w.model().m.mutable_graph()->add_initializer();
  cm->set_name("causal_mask");
  cm->set_data_type(onnx::TensorProto::BOOL);
  for (int64_t dim : {int64_t(1), int64_t(1), mask_size, mask_size}) cm->add_dims(dim);
  std::string mask_bytes(size_t(mask_size * mask_size), '\0');
  for (int64_t i = 0; i < mask_size; ++i) {
    for (int64_t j = 0; j <= i; ++j) mask_bytes[size_t(i * mask_size + j)] = 1;
  }
  cm->set_raw_data(mask_bytes);
  std::string causal = "causal_mask";
  if (w.dynamic_seq()) causal = w.cut_to("causal_mask", seq_len, {2, 3});
  w.model().scalar("mask_value", -3.4028234663852886e38f);
  const std::string wh = w.fresh("where");
  w.model().node("Where", wh, {causal, s, "mask_value"}, wh + "_out");
  h = w.merge_heads(w.transpose(w.binary("MatMul", w.softmax(wh + "_out"), w.heads(qkv[2], seq, heads, hd)),
                                {0, 2, 1, 3}),
                    seq, d);
  x = w.add(w.conv1d(h, seq, d, d), x);
  h = w.conv1d(w.gelu_tanh(w.conv1d(w.layer_norm(x, d, 1e-5f), seq, d, 4 * d)), seq, 4 * d, d);
  x = w.add(h, x);
  w.model().output(w.layer_norm(x, d, 1e-5f));
}

}  // namespace

const std::vector<std::string>& network_names() {
  static const std::vector<std::string> n = {"resnet18",     "resnet50",        "resnet50_b4",
                                             "mobilenet_v2", "efficientnet_b0", "vit_tiny",
                                             "bert_encoder", "gpt2_block"};
  return n;
}

std::string network_list() {
  std::string list;
  for (const auto& n : network_names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

const char* style_name(ExportStyle s) {
  return s == ExportStyle::dynamo ? "dynamo" : "torchscript";
}

std::string write_network(const std::string& name, ExportStyle style, const std::string& dir,
                          int64_t image, bool dynamic_batch, bool dynamic_seq) {
  const bool tokens = name == "bert_encoder" || name == "gpt2_block";
  NetWriter w(style, dynamic_batch, dynamic_seq && tokens);
  if (name == "resnet18") {
    resnet18(w, image);
  } else if (name == "resnet50" || name == "resnet50_b4") {
    resnet50(w, image, name == "resnet50" ? 1 : 4);
  } else if (name == "mobilenet_v2") {
    mobilenet_v2(w, image);
  } else if (name == "efficientnet_b0") {
    efficientnet_b0(w, image);
  } else if (name == "vit_tiny") {
    vit_tiny(w, image);
  } else if (name == "bert_encoder") {
    bert_encoder(w, 128);
  } else if (name == "gpt2_block") {
    gpt2_block(w, 128);
  } else {
    throw std::runtime_error("no network '" + name + "' (" + network_list() + ")");
  }
  const std::string path =
      dir + "/" + name + "_" + style_name(style) + (dynamic_batch ? "_dynbatch" : "") +
      (dynamic_seq && tokens ? "_dynseq" : "") + ".onnx";
  w.save(path);
  return path;
}

}  // namespace opfuse::testing
