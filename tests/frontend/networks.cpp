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
  NetWriter(ExportStyle style) : style_(style), om_(style == ExportStyle::dynamo ? 20 : 17) {}

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

  std::string activation(const std::string& x, const std::string& act) {
    const std::string a = fresh(act);
    if (act == "relu") {
      om_.node("Relu", a, {x}, a + "_out");
    } else {  // relu6: hardtanh(0, 6) -> Clip with the bounds as inputs
      om_.scalar(a + "_min", 0.0f);
      om_.scalar(a + "_max", 6.0f);
      om_.node("Clip", a, {x, a + "_min", a + "_max"}, a + "_out");
    }
    return a + "_out";
  }

  std::string add(const std::string& a, const std::string& b) {
    const std::string n = fresh("add");
    om_.node("Add", n, {a, b}, n + "_out");
    return n + "_out";
  }

  // adaptive_avg_pool2d((1, 1)) + flatten + Linear(c, classes).
  std::string classifier(const std::string& x, int64_t c, int64_t classes) {
    std::string flat;
    if (style_ == ExportStyle::torchscript) {
      om_.node("GlobalAveragePool", "avgpool", {x}, "pooled");
      auto* f = om_.node("Flatten", "flatten", {"pooled"}, "flat");
      OnnxModel::i(f, "axis", 1);
      flat = "flat";
    } else {
      om_.init_ints("mean_axes", {-1, -2});
      auto* r = om_.node("ReduceMean", "avgpool", {x, "mean_axes"}, "pooled");
      OnnxModel::i(r, "keepdims", 1);
      om_.init_ints("view_shape", {1, c});
      om_.node("Reshape", "view", {"pooled", "view_shape"}, "flat");
      flat = "flat";
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
  OnnxModel om_;
  int counter_ = 0;
  uint64_t seed_ = 1000;
};

// torchvision.models.resnet18: 7x7/2 stem, 3x3/2 max pool, four stages of two BasicBlocks
// (64, 128, 256, 512 channels; 1x1/2 projection where the stride or width changes).
void resnet18(NetWriter& w, int64_t image) {
  w.model().input("x", {1, 3, image, image});
  std::string x = w.conv_bn("x", 3, 64, 7, 2, 1, "relu");
  auto* mp = w.model().node("MaxPool", "maxpool", {x}, "maxpool_out");
  OnnxModel::ints(mp, "kernel_shape", {3, 3});
  OnnxModel::ints(mp, "strides", {2, 2});
  OnnxModel::ints(mp, "pads", {1, 1, 1, 1});
  x = "maxpool_out";
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

// torchvision.models.mobilenet_v2: inverted residuals (t, c, n, s) with ReLU6, 1280-wide head.
void mobilenet_v2(NetWriter& w, int64_t image) {
  w.model().input("x", {1, 3, image, image});
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

}  // namespace

const std::vector<std::string>& network_names() {
  static const std::vector<std::string> n = {"resnet18", "mobilenet_v2"};
  return n;
}

const char* style_name(ExportStyle s) {
  return s == ExportStyle::dynamo ? "dynamo" : "torchscript";
}

std::string write_network(const std::string& name, ExportStyle style, const std::string& dir,
                          int64_t image) {
  NetWriter w(style);
  if (name == "resnet18") {
    resnet18(w, image);
  } else if (name == "mobilenet_v2") {
    mobilenet_v2(w, image);
  } else {
    throw std::runtime_error("no network '" + name + "' (resnet18, mobilenet_v2)");
  }
  const std::string path = dir + "/" + name + "_" + style_name(style) + ".onnx";
  w.save(path);
  return path;
}

}  // namespace opfuse::testing
