// The ONNX blocks of tests/frontend (see blocks.h).
#include "tests/frontend/blocks.h"

#include <cmath>

#include "fusion/graph/host_tensor.h"

namespace opfuse::testing {

namespace {

uint64_t g_seed = 100;  // the next weight's seed; reset per model, so a block's weights repeat
void weight(OnnxModel& om, const std::string& name, const std::vector<int64_t>& dims,
            float scale = 0.3f) {
  size_t n = 1;
  for (int64_t d : dims) n *= size_t(d);
  om.init(name, dims, random_values(n, -scale, scale, g_seed++));
}

void conv(OnnxModel& om, const std::string& name, const std::string& x, const std::string& out,
          int64_t cin, int64_t cout, int64_t k, int64_t groups = 1) {
  weight(om, name + "_w", {cout, cin / groups, k, k});
  weight(om, name + "_b", {cout}, 0.1f);
  auto* n = om.node("Conv", name, {x, name + "_w", name + "_b"}, out);
  OnnxModel::ints(n, "kernel_shape", {k, k});
  OnnxModel::ints(n, "pads", {k / 2, k / 2, k / 2, k / 2});
  OnnxModel::i(n, "group", groups);
}

// torch.nn.ReLU6 at opset 13: Clip with the bounds as inputs.
void relu6(OnnxModel& om, const std::string& name, const std::string& x, const std::string& out) {
  om.scalar(name + "_lo", 0.0f);
  om.scalar(name + "_hi", 6.0f);
  om.node("Clip", name, {x, name + "_lo", name + "_hi"}, out);
}

// nn.Linear on a 3-D input: MatMul with the transposed weight, then Add of the bias.
void linear(OnnxModel& om, const std::string& name, const std::string& x, const std::string& out,
            int64_t k, int64_t n) {
  weight(om, name + "_w", {k, n}, 0.25f);
  weight(om, name + "_b", {n}, 0.1f);
  om.node("MatMul", name + "_mm", {x, name + "_w"}, name + "_mmo");
  om.node("Add", name + "_add", {name + "_mmo", name + "_b"}, out);
}

// nn.LayerNorm: LayerNormalization at opset 17, decomposed at opset 13.
void layer_norm(OnnxModel& om, int opset, const std::string& name, const std::string& x,
                const std::string& out, int64_t d) {
  om.init(name + "_g", {d}, random_values(size_t(d), 0.5f, 1.5f, g_seed++));
  om.init(name + "_b", {d}, random_values(size_t(d), -0.2f, 0.2f, g_seed++));
  if (opset >= 17) {
    auto* n = om.node("LayerNormalization", name, {x, name + "_g", name + "_b"}, out);
    OnnxModel::i(n, "axis", -1);
    OnnxModel::f(n, "epsilon", 1e-5f);
    return;
  }
  auto* m0 = om.node("ReduceMean", name + "_mean", {x}, name + "_m");
  OnnxModel::ints(m0, "axes", {-1});
  om.node("Sub", name + "_sub", {x, name + "_m"}, name + "_c");
  om.scalar(name + "_two", 2.0f);
  om.node("Pow", name + "_pow", {name + "_c", name + "_two"}, name + "_sq");
  auto* m1 = om.node("ReduceMean", name + "_var", {name + "_sq"}, name + "_v");
  OnnxModel::ints(m1, "axes", {-1});
  om.scalar(name + "_eps", 1e-5f);
  om.node("Add", name + "_addeps", {name + "_v", name + "_eps"}, name + "_ve");
  om.node("Sqrt", name + "_sqrt", {name + "_ve"}, name + "_s");
  om.node("Div", name + "_div", {name + "_c", name + "_s"}, name + "_n");
  om.node("Mul", name + "_mul", {name + "_n", name + "_g"}, name + "_ng");
  om.node("Add", name + "_addb", {name + "_ng", name + "_b"}, out);
}

// nn.GELU() below opset 20: x * 0.5 * (1 + erf(x / sqrt 2)), in the exporter's order.
void gelu(OnnxModel& om, const std::string& name, const std::string& x, const std::string& out) {
  om.constant(name + "_sqrt2", 1.4142135381698608f);
  om.node("Div", name + "_div", {x, name + "_sqrt2"}, name + "_d");
  om.node("Erf", name + "_erf", {name + "_d"}, name + "_e");
  om.scalar(name + "_one", 1.0f);
  om.node("Add", name + "_add", {name + "_e", name + "_one"}, name + "_a");
  om.node("Mul", name + "_mul", {x, name + "_a"}, name + "_m");
  om.scalar(name + "_half", 0.5f);
  om.node("Mul", name + "_mulhalf", {name + "_m", name + "_half"}, out);
}

}  // namespace

const std::vector<Block>& blocks() {
  static const std::vector<Block> b = {
      {"depthwise_separable",
       [](OnnxModel& om, int, int64_t s) {
         om.input("x", {1, 16, 12 * s, 12 * s});
         conv(om, "dw", "x", "dwo", 16, 16, 3, 16);  // BatchNorm folded into the bias
         relu6(om, "act1", "dwo", "a1");
         conv(om, "pw", "a1", "pwo", 16, 32, 1);
         relu6(om, "act2", "pwo", "y");
         om.output("y");
       },
       {{"relu6", 2}},
       {{"relu6", 2}}},
      {"residual",
       [](OnnxModel& om, int, int64_t s) {
         om.input("x", {1, 8, 10 * s, 10 * s});
         conv(om, "c1", "x", "c1o", 8, 8, 3);
         om.node("Relu", "r1", {"c1o"}, "r1o");
         conv(om, "c2", "r1o", "c2o", 8, 8, 3);
         om.node("Add", "skip", {"c2o", "x"}, "s");
         om.node("Relu", "r2", {"s"}, "y");
         om.output("y");
       },
       {},
       {}},
      {"transformer_encoder",
       [](OnnxModel& om, int opset, int64_t s) {
         const int64_t L = 16 * s, D = 32, F = 64;
         om.input("x", {1, L, D});
         layer_norm(om, opset, "ln1", "x", "h", D);
         linear(om, "q", "h", "q", D, D);
         linear(om, "k", "h", "k", D, D);
         linear(om, "v", "h", "v", D, D);
         auto* t = om.node("Transpose", "kt", {"k"}, "kT");
         OnnxModel::ints(t, "perm", {0, 2, 1});
         om.node("MatMul", "qk", {"q", "kT"}, "s");
         om.constant("scale", float(std::sqrt(double(D))));
         om.node("Div", "scale_div", {"s", "scale"}, "ss");
         auto* sm = om.node("Softmax", "softmax", {"ss"}, "p");
         OnnxModel::i(sm, "axis", -1);
         om.node("MatMul", "pv", {"p", "v"}, "o");
         linear(om, "proj", "o", "po", D, D);
         om.node("Add", "res1", {"x", "po"}, "x1");
         layer_norm(om, opset, "ln2", "x1", "h2", D);
         linear(om, "fc1", "h2", "f1", D, F);
         gelu(om, "gelu", "f1", "g");
         linear(om, "fc2", "g", "f2", F, D);
         om.node("Add", "res2", {"x1", "f2"}, "x2");
         // The exporter's shape arithmetic: y = x2.reshape(x2.shape[0], -1).
         om.node("Shape", "shape", {"x2"}, "shp");
         om.init_ints("zero", {0});
         om.node("Gather", "batch", {"shp", "zero"}, "n");
         om.init_ints("minus_one", {-1});
         auto* c = om.node("Concat", "target", {"n", "minus_one"}, "tgt");
         OnnxModel::i(c, "axis", 0);
         om.node("Reshape", "flatten", {"x2", "tgt"}, "y");
         om.output("y");
       },
       {{"layer_norm_affine", 2}, {"linear", 6}, {"gelu_erf", 1}},
       {{"linear", 6}, {"gelu_erf", 1}}},
      {"detection_head",
       [](OnnxModel& om, int, int64_t s) {
         om.input("x", {1, 16, 8 * s, 8 * s});
         conv(om, "stem", "x", "so", 16, 16, 3);
         om.node("Relu", "stem_relu", {"so"}, "f");
         conv(om, "box", "f", "bo", 16, 12, 1);  // 3 anchors x 4 coordinates
         auto* t = om.node("Transpose", "box_t", {"bo"}, "bt");
         OnnxModel::ints(t, "perm", {0, 2, 3, 1});
         auto* fl = om.node("Flatten", "box_flat", {"bt"}, "boxes");
         OnnxModel::i(fl, "axis", 1);
         conv(om, "cls", "f", "co", 16, 6, 1);
         om.node("Sigmoid", "cls_sigmoid", {"co"}, "scores");
         om.output("boxes");
         om.output("scores");
       },
       {},
       {}},
      {"swiglu_mlp",
       [](OnnxModel& om, int, int64_t s) {
         const int64_t L = 8 * s, D = 32, F = 48;
         om.input("x", {1, L, D});
         linear(om, "gate", "x", "gt", D, F);
         om.node("Sigmoid", "gate_sig", {"gt"}, "gs");
         om.node("Mul", "silu", {"gt", "gs"}, "sl");  // F.silu at opset < 14... as x*sigmoid(x)
         linear(om, "up", "x", "u", D, F);
         om.node("Mul", "glu", {"sl", "u"}, "h");
         linear(om, "down", "h", "y", F, D);
         om.output("y");
       },
       {{"linear", 3}, {"silu", 1}},
       {{"linear", 3}, {"silu", 1}}},
  };
  return b;
}

std::string block_bytes(const Block& b, int opset, int64_t scale) {
  OnnxModel om(opset);
  g_seed = 100;
  b.build(om, opset, scale);
  return om.bytes();
}

}  // namespace opfuse::testing
