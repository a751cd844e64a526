// Every operator, lowered to Halide and realised with a root schedule, against the reference
// executor on random inputs of several shapes.
//
// Tolerances, per op family, |halide - reference| <= atol + rtol * |reference|:
//   exact (0, 0)        relu, leaky_relu, clamp, relu6, add/sub/mul/div, bias_add, transpose,
//                       reshape, concat, max_pool: one correctly rounded f32 op (or none) per
//                       element, the same in both.
//   transcendental      sigmoid, tanh, exp, gelu: (1e-6, 1e-6); lower.cpp's exp is within
//                       4.4e-7 relative, its tanh and erf within a few 1e-7 absolute, the
//                       reference evaluates in double.
//   normalisations      batch_norm (1e-5, 1e-6), softmax (1e-5, 1e-6): a handful of f32
//                       roundings against a double reference.
//   reductions          conv2d, matmul, linear, layer_norm, pools, attention: (1e-4, 1e-4);
//                       f32 sums of K <= 1024 terms of magnitude <= 1 differ from the double
//                       reference by at most ~K * 2^-24 ~ 6e-5 of the sum's scale.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include "Halide.h"
#include "fusion/graph/builder.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/op_schema.h"
#include "fusion/ops/host_buffer.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "tests/testing.h"

using namespace opfuse::graph;
using opfuse::reference::Tolerance;
using opfuse::testing::check_root_matches_reference;

namespace {

constexpr Tolerance kExact{0, 0};
constexpr Tolerance kTranscendental{1e-6, 1e-6};
constexpr Tolerance kNormalisation{1e-5, 1e-6};
constexpr Tolerance kReduction{1e-4, 1e-4};

const std::vector<Shape> kShapes = {{7}, {3, 17}, {2, 3, 5, 9}};

template <typename Build>
Graph one_op(const std::string& name, const Shape& s, Build build, Layout layout = Layout::none) {
  GraphBuilder g(name);
  auto x = g.input("x", s, layout);
  g.output(build(g, x));
  return g.build();
}

}  // namespace

TEST_CASE("elementwise ops") {
  using B = GraphBuilder;
  const std::vector<std::tuple<const char*, Tolerance, std::function<B::T(B&, B::T)>>> ops = {
      {"relu", kExact, [](B& g, B::T x) { return g.relu(x); }},
      {"leaky_relu", kExact, [](B& g, B::T x) { return g.leaky_relu(x, 0.2); }},
      {"clamp", kExact, [](B& g, B::T x) { return g.clamp(x, -0.25, 0.5); }},
      {"relu6", kExact,
       [](B& g, B::T x) {
         return g.relu6(g.mul(x, g.param("k", {1}, {8, 8})));
       }},
      // x / 6 is a multiply by 1/6 in the kernels: one rounding from the reference.
      {"hard_sigmoid", kTranscendental,
       [](B& g, B::T x) { return g.hard_sigmoid(g.mul(x, g.param("k", {1}, {8, 8})), 1.0 / 6); }},
      {"hard_swish", kTranscendental,
       [](B& g, B::T x) { return g.hard_swish(g.mul(x, g.param("k", {1}, {8, 8}))); }},
      {"sigmoid", kTranscendental, [](B& g, B::T x) { return g.sigmoid(x); }},
      {"tanh", kTranscendental, [](B& g, B::T x) { return g.tanh(x); }},
      {"exp", kTranscendental, [](B& g, B::T x) { return g.exp(x); }},
      {"gelu", kTranscendental, [](B& g, B::T x) { return g.gelu(x); }},
      {"gelu_tanh", kTranscendental, [](B& g, B::T x) { return g.gelu(x, true); }},
      {"erf", kTranscendental, [](B& g, B::T x) { return g.erf(x); }},
      {"silu", kTranscendental, [](B& g, B::T x) { return g.silu(x); }},
      {"neg", kExact, [](B& g, B::T x) { return g.neg(x); }},
      // sqrt and 1/x are correctly rounded in f32; positive inputs via exp.
      {"sqrt", kTranscendental, [](B& g, B::T x) { return g.sqrt(g.exp(x)); }},
      {"reciprocal", kTranscendental, [](B& g, B::T x) { return g.reciprocal(g.exp(x)); }},
      {"pow2", kExact, [](B& g, B::T x) { return g.pow(x, 2); }},
      {"pow3", kTranscendental, [](B& g, B::T x) { return g.pow(x, 3); }},
      {"pow1.5", kTranscendental, [](B& g, B::T x) { return g.pow(g.exp(x), 1.5); }},
  };
  for (const auto& [name, tol, build] : ops) {
    for (const Shape& s : kShapes) {
      INFO(name << " " << shape_to_string(s));
      check_root_matches_reference(one_op(name, s, build), tol);
    }
  }
}

namespace {

// Every output of `g`, whose input "x" holds x0 + i / per_unit (i = 0 .. n - 1), against the
// reference, within `tol` (`softmax_tol` for the output named `softmax`).
void check_line(const Graph& g, int64_t n, float x0, int per_unit, Tolerance tol,
                const std::string& softmax = "", Tolerance softmax_tol = kNormalisation) {
  HostTensor line({n});
  for (int64_t i = 0; i < n; ++i) line.data[size_t(i)] = x0 + float(i) / float(per_unit);
  const TensorMap in{{"x", line}};
  const TensorMap got = opfuse::ops::realize_root(g, in);
  const TensorMap want = opfuse::reference::run(g, in);
  for (const auto& out : g.outputs()) {
    CAPTURE(out);
    const auto c = opfuse::reference::compare(got.at(out).data, want.at(out).data,
                                              out == softmax ? softmax_tol : tol);
    CHECK_MESSAGE(c.ok(), c.summary());
  }
}

}  // namespace

TEST_CASE("erf and GELU over the whole line, not only near 0") {
  // Random inputs lie near 0, where an approximation of erf is at its best; its tails (erf
  // is 1 in f32 past |x| = 4) are where a cheaper one would go wrong. Every 1/256 over
  // [-12, 12], within (1e-6, 1e-6).
  GraphBuilder b("erf_line");
  const int64_t n = 24 * 256 + 1;
  auto x = b.input("x", {n});
  b.output(b.erf(x));
  b.output(b.gelu(x));
  check_line(b.build(), n, -12.0f, 256, kTranscendental);
}

TEST_CASE("exp and what is built on it over the whole line") {
  // lower.cpp's exp rounds x log2 e in the mantissa and builds 2^k in the exponent bits: its
  // edges are where k leaves the normal range (|x| near 87-89) and where r changes sign.
  // Every 1/64 over [-100, 88.5] (exp(88.5) = 2.7e38, near the largest f32), within (1e-6,
  // 1e-6); past 88.72 exp is inf in f32, and must stay so.
  GraphBuilder b("exp_line");
  const int64_t n = 188 * 64 + 33;
  auto x = b.input("x", {n});
  b.output(b.exp(x));
  b.output(b.sigmoid(x));
  b.output(b.silu(x));
  b.output(b.tanh(x));
  const std::string soft = b.softmax(b.reshape(x, {1, n}));  // a row of 12065: sums in f32
  b.output(soft);
  check_line(b.build(), n, -100.0f, 64, kTranscendental, soft);

  GraphBuilder o("exp_overflow");
  auto y = o.input("x", {4});
  o.output(o.exp(y));
  HostTensor big({4});
  big.data = {88.75f, 89.0f, 100.0f, 1000.0f};
  const TensorMap inf = opfuse::ops::realize_root(o.build(), {{"x", big}});
  for (float v : inf.begin()->second.data) CHECK(std::isinf(v));
}

TEST_CASE("binary ops broadcast as numpy") {
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{5}, {5}}, {{4, 5}, {5}}, {{2, 1, 6}, {3, 1}}, {{1}, {3, 4}}, {{2, 3, 4, 5}, {3, 1, 1}}};
  for (const char* op : {"add", "sub", "mul", "div"}) {
    for (const auto& [a, b] : pairs) {
      CAPTURE(op);
      CAPTURE(shape_to_string(a) + " " + shape_to_string(b));
      GraphBuilder g(op);
      auto x = g.input("a", a), y = g.input("b", b);
      const std::string o = op;
      g.output(o == "add"   ? g.add(x, y)
               : o == "sub" ? g.sub(x, y)
               : o == "mul" ? g.mul(x, y)
                            : g.div(x, y));
      check_root_matches_reference(g.build(), kExact);
    }
  }
}

TEST_CASE("bias_add, batch_norm, layer_norm, softmax") {
  check_root_matches_reference(
      one_op("bias_add", {2, 6, 4, 4},
             [](GraphBuilder& g, auto x) { return g.bias_add(x, g.param("b", {6}), 1); }),
      kExact);
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    CAPTURE(to_string(l));
    check_root_matches_reference(
        one_op(
            "bn", {2, 5, 7, 6}, [](GraphBuilder& g, auto x) { return g.batch_norm(x); }, l),
        kNormalisation);
  }
  for (int64_t axis : {-1, 1}) {
    CAPTURE(axis);
    check_root_matches_reference(
        one_op("ln", {3, 4, 33}, [&](GraphBuilder& g, auto x) { return g.layer_norm(x, axis); }),
        kReduction);
  }
  for (int64_t axis : {-1, 0, 1}) {
    CAPTURE(axis);
    check_root_matches_reference(
        one_op("softmax", {5, 19, 3}, [&](GraphBuilder& g, auto x) { return g.softmax(x, axis); }),
        kNormalisation);
  }
}

TEST_CASE("softmax is numerically stable for large inputs") {
  GraphBuilder g("softmax_large");
  auto x = g.input("x", {4, 64});
  g.output(g.softmax(g.mul(x, g.param("k", {1}, {1000, 1000}))));  // logits up to +-1000
  check_root_matches_reference(g.build(), kNormalisation);
}

TEST_CASE("conv2d: layouts, strides, pads, dilations, groups, depthwise, bias") {
  struct Case {
    const char* name;
    Layout layout;
    int64_t cin, cout, k, groups;
    Conv2dOptions opts;
    bool bias;
  };
  Conv2dOptions plain, strided, padded, dilated;
  strided.strides = {2, 2};
  padded.pads = {1, 2, 1, 0};
  dilated.dilations = {2, 2};
  dilated.pads = {2, 2, 2, 2};
  const std::vector<Case> cases = {
      {"nchw_3x3", Layout::NCHW, 4, 6, 3, 1, plain, false},
      {"nhwc_3x3_bias", Layout::NHWC, 4, 6, 3, 1, plain, true},
      {"nchw_stride2", Layout::NCHW, 3, 5, 3, 1, strided, true},
      {"nhwc_asym_pads", Layout::NHWC, 3, 4, 3, 1, padded, false},
      {"nchw_dilated", Layout::NCHW, 2, 3, 3, 1, dilated, false},
      {"nhwc_groups2", Layout::NHWC, 4, 6, 3, 2, padded, true},
      {"nchw_depthwise", Layout::NCHW, 6, 6, 3, 6, padded, false},
      {"nhwc_1x1", Layout::NHWC, 8, 4, 1, 1, plain, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    GraphBuilder g(c.name);
    const Shape s = c.layout == Layout::NHWC ? Shape{2, 9, 11, c.cin} : Shape{2, c.cin, 9, 11};
    auto x = g.input("x", s, c.layout);
    Conv2dOptions o = c.opts;
    o.groups = c.groups;
    auto w = g.param("w", {c.cout, c.cin / c.groups, c.k, c.k});
    g.output(g.conv2d(x, w, o, c.bias ? g.param("b", {c.cout}) : ""));
    check_root_matches_reference(g.build(), kReduction);
  }
}

TEST_CASE("matmul, batched matmul, linear") {
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{5, 7}, {7, 3}}, {{2, 5, 7}, {2, 7, 3}}, {{2, 3, 4, 8}, {8, 5}}, {{3, 1, 4, 6}, {2, 6, 5}}};
  for (const auto& [a, b] : pairs) {
    CAPTURE(shape_to_string(a) + " x " + shape_to_string(b));
    GraphBuilder g("matmul");
    auto x = g.input("a", a), y = g.input("b", b);
    g.output(g.matmul(x, y));
    check_root_matches_reference(g.build(), kReduction);
  }
  for (bool bias : {false, true}) {
    GraphBuilder g("linear");
    auto x = g.input("x", {2, 3, 16});
    g.output(g.linear(x, g.param("w", {16, 9}), bias ? g.param("b", {9}) : ""));
    check_root_matches_reference(g.build(), kReduction);
  }
}

TEST_CASE("pools") {
  for (Layout l : {Layout::NCHW, Layout::NHWC}) {
    const Shape s = l == Layout::NHWC ? Shape{2, 9, 10, 3} : Shape{2, 3, 9, 10};
    for (auto [k, st, p] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 1}}) {
      CAPTURE(to_string(l));
      CAPTURE(k);
      CAPTURE(p);
      check_root_matches_reference(
          one_op(
              "max", s, [&](GraphBuilder& g, auto x) { return g.max_pool(x, k, st, p); }, l),
          kExact);
      check_root_matches_reference(
          one_op(
              "avg", s, [&](GraphBuilder& g, auto x) { return g.avg_pool(x, k, st, p); }, l),
          kReduction);
    }
    check_root_matches_reference(
        one_op(
            "gap", s, [](GraphBuilder& g, auto x) { return g.global_avg_pool(x); }, l),
        kReduction);
  }
  // count_include_pad = 1 divides by the full window, padding included.
  check_root_matches_reference(
      one_op("avg_incl", {1, 2, 5, 5},
             [](GraphBuilder& g, auto x) { return g.avg_pool(x, 3, 2, 1, true); }),
      kReduction);
}

TEST_CASE("transpose, reshape, concat") {
  check_root_matches_reference(one_op("t", {2, 3, 4, 5},
                                      [](GraphBuilder& g, auto x) {
                                        return g.transpose(x, {0, 2, 3, 1});
                                      }),
                               kExact);
  check_root_matches_reference(one_op("t2", {3, 7},
                                      [](GraphBuilder& g, auto x) {
                                        return g.transpose(x, {1, 0});
                                      }),
                               kExact);
  check_root_matches_reference(one_op("r", {2, 3, 4, 5},
                                      [](GraphBuilder& g, auto x) {
                                        return g.reshape(x, {6, -1});
                                      }),
                               kExact);
  check_root_matches_reference(one_op("r2", {6, 10},
                                      [](GraphBuilder& g, auto x) {
                                        return g.reshape(x, {3, 0, 2});
                                      }),
                               kExact);
  // Shared leading and trailing dims map one to one, the dims between through the offset.
  for (const auto& [in_shape, out_shape] :
       std::vector<std::pair<Shape, std::vector<int64_t>>>{
           {{2, 3, 4, 5}, {2, 12, 5}},   // lead and trail shared
           {{2, 3, 20}, {2, 3, 4, 5}},   // lead shared, the last dim split
           {{1, 1, 1, 32}, {1, 32}},     // a global pool's output flattened
           {{1, 32}, {1, 32, 1, 1}},     // and back
           {{4, 6}, {2, 2, 3, 2}}}) {    // nothing shared
    CAPTURE(out_shape.size());
    check_root_matches_reference(one_op("r3", in_shape,
                                        [&](GraphBuilder& g, auto x) {
                                          return g.reshape(x, out_shape);
                                        }),
                                 kExact);
  }
  // ONNX Slice: negative indices, clamped ends, steps forward and backward.
  struct SliceCase {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  for (const auto& [starts, ends, axes, steps] : std::vector<SliceCase>{
           {{1}, {3}, {1}, {}},                       // one axis
           {{0, -3}, {INT64_MAX, -1}, {0, 3}, {}},    // open end, negative indices
           {{4, 0}, {-100, 5}, {2, 3}, {-2, 2}},      // backward with a clamped end, step 2
           {{1, 0, 1, 0}, {2, 3, 4, 5}, {}, {1, 1, 2, 3}}}) {
    CAPTURE(starts.size());
    check_root_matches_reference(one_op("s", {2, 3, 5, 7},
                                        [&](GraphBuilder& g, auto x) {
                                          return g.slice(x, starts, ends, axes, steps);
                                        }),
                                 kExact);
  }
  for (int64_t axis : {0, 1, -1}) {
    CAPTURE(axis);
    GraphBuilder g("concat");
    auto a = g.input("a", {2, 3, 4}), b = g.input("b", {2, 3, 4});
    auto c = g.relu(a);
    g.output(g.concat({a, b, c}, axis));
    check_root_matches_reference(g.build(), kExact);
  }
  GraphBuilder g("concat_uneven");
  auto a = g.input("a", {2, 1, 4}), b = g.input("b", {2, 5, 4});
  g.output(g.concat({a, b}, 1));
  check_root_matches_reference(g.build(), kExact);
}

TEST_CASE("reductions over axes, where, expand, gather") {
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    for (const auto& [axes, keep] : std::vector<std::pair<std::vector<int64_t>, bool>>{
             {{-1}, true}, {{1}, false}, {{0, 2}, true}, {{}, true}, {{1, 3}, false}}) {
      CAPTURE(op);
      CAPTURE(shape_to_string(axes));
      CAPTURE(keep);
      GraphBuilder g(op);
      g.output(g.reduce(op, g.input("x", {2, 3, 5, 9}), axes, keep));
      check_root_matches_reference(g.build(),
                                   std::string(op) == "reduce_max" ? kExact : kReduction);
    }
  }
  {
    GraphBuilder g("where");
    auto x = g.input("x", {3, 8}), y = g.input("y", {8});
    auto mask = g.param("mask", {3, 1}, {0, 1.5});  // about a third of the rows are 0 (false)
    g.output(g.where(mask, x, g.relu(y)));
    check_root_matches_reference(g.build(), kExact);
  }
  check_root_matches_reference(one_op("expand", {3, 1},
                                      [](GraphBuilder& g, auto x) {
                                        return g.expand(x, {2, 3, 4});
                                      }),
                               kExact);
  check_root_matches_reference(one_op("gather", {4, 6, 5},
                                      [](GraphBuilder& g, auto x) {
                                        return g.gather(x, 1, {5, 0, -1, 2});
                                      }),
                               kExact);
  check_root_matches_reference(
      one_op("gather_scalar", {3, 4, 5},
             [](GraphBuilder& g, auto x) { return g.gather(x, 0, {1}, true); }),
      kExact);
  opfuse::testing::check_graph_error(
      [] {
        GraphBuilder bad("bad");
        bad.output(bad.gather(bad.input("x", {3, 4}), 1, {4}));
        bad.build();
      },
      {"index 4", "axis 1", "extent 4"});
}

TEST_CASE("integer tensors: embedding lookups by token ids, masks cast to f32") {
  {
    GraphBuilder g("embedding");
    auto table = g.param("table", {50, 16});
    auto ids = g.input("ids", {2, 7}, Layout::none, DType::i64);
    g.output(g.gather(table, ids, 0));
    const Graph graph = g.build();
    CHECK(graph.tensor(graph.outputs()[0]).shape == Shape{2, 7, 16});
    CHECK(opfuse::graph::index_bound(graph, "ids") == 50);
    check_root_matches_reference(graph, kExact);
  }
  {
    // Along a middle axis, by i32 indices moved by a reshape first.
    GraphBuilder g("gather_axis1");
    auto x = g.input("x", {4, 6, 5});
    auto idx = g.reshape(g.input("idx", {3}, Layout::none, DType::i32), {3, 1});
    g.output(g.gather(x, idx, 1));
    const Graph graph = g.build();
    CHECK(graph.tensor(graph.outputs()[0]).shape == Shape{4, 3, 1, 5});
    CHECK(opfuse::graph::index_bound(graph, "idx") == 6);
    check_root_matches_reference(graph, kExact);
  }
  {
    GraphBuilder g("mask");
    auto x = g.input("x", {2, 7});
    auto m = g.input("m", {2, 7}, Layout::none, DType::i64);
    g.output(g.mul(x, g.cast(m)));
    const Graph graph = g.build();
    CHECK(opfuse::graph::index_bound(graph, "m") == 2);
    check_root_matches_reference(graph, kExact);
  }
  // What an integer tensor cannot do, by name.
  opfuse::testing::check_graph_error(
      [] {
        GraphBuilder bad("bad");
        bad.output(bad.relu(bad.input("ids", {3}, Layout::none, DType::i64)));
        bad.build();
      },
      {"relu", "reads the i64 tensor 'ids'", "only index (gather)"});
  opfuse::testing::check_graph_error(
      [] {
        GraphBuilder bad("bad");
        bad.output(bad.gather(bad.param("table", {5, 2}), bad.input("f", {3}), 0));
        bad.build();
      },
      {"indices 'f' are f32", "i64 or i32"});
  opfuse::testing::check_graph_error(
      [] {
        GraphBuilder bad("bad");
        bad.output(bad.reshape(bad.input("ids", {3}, Layout::none, DType::i64), {3, 1}));
        bad.build();
      },
      {"output", "is i64", "f32 and f16 outputs"});
  // The reference refuses an id outside the table (the kernels clamp it).
  GraphBuilder g("lookup");
  g.output(g.gather(g.param("table", {5, 2}), g.input("ids", {3}, Layout::none, DType::i64), 0));
  const Graph graph = g.build();
  opfuse::graph::TensorMap in;
  in["ids"] = opfuse::graph::HostTensor({3});
  in["ids"].data = {0, 7, 1};
  opfuse::testing::check_graph_error([&] { opfuse::reference::run(graph, in); },
                                     {"index 7", "out of range", "extent 5"});
}

TEST_CASE("scaled dot-product attention as a composition") {
  GraphBuilder g("sdpa");
  auto q = g.input("q", {2, 9, 16}), k = g.input("k", {2, 11, 16}), v = g.input("v", {2, 11, 8});
  g.output(g.attention(q, k, v));
  Graph graph = g.build();
  std::vector<std::string> ops;
  for (const Node& n : graph.nodes()) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"transpose", "matmul", "mul", "softmax", "matmul"});
  CHECK(graph.tensor(graph.outputs()[0]).shape == Shape{2, 9, 8});
  check_root_matches_reference(graph, kReduction);
}

TEST_CASE("f16 storage: inputs and outputs held as f16, computed in f32") {
  GraphBuilder g("f16");
  auto x = g.input("x", {4, 33}, Layout::none, DType::f16);
  auto y = g.input("y", {4, 33}, Layout::none, DType::f16);
  g.output(g.relu(g.add(x, y)));
  Graph graph = g.build();
  CHECK(graph.tensor(graph.outputs()[0]).dtype == DType::f16);
  // Both sides round each op's result to f16 (the reference after each op, Halide on the final
  // store; relu is exact, so the two agree to within one f16 rounding: 2^-11 relative).
  check_root_matches_reference(graph, {std::ldexp(1.0, -11), 1e-7});
}

TEST_CASE("f16 inputs: the Halide-free conversion rounds as Halide's float16_t does") {
  // ops::f16_bits feeds f16 inputs without libHalide (a PoCL process); Halide's own
  // float16_t is the oracle: normals, subnormals, ties to even, overflow, signs, NaN.
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f,
                           -1e6f, 6.1035156e-05f, 6.0e-08f, 2.9e-08f, 3.0e-08f,
                           std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), 1.0f + std::ldexp(1.0f, -11),
                           1.0f + std::ldexp(3.0f, -11), INFINITY, -INFINITY};
  for (int e = -30; e <= 16; ++e) {
    for (int m = 0; m < 64; ++m) xs.push_back(std::ldexp(1.0f + float(m) / 64 + 1e-3f * (m % 3), e));
  }
  for (float x : xs) {
    CAPTURE(x);
    CHECK(opfuse::ops::f16_bits(x) == Halide::float16_t(x).to_bits());
    CHECK(opfuse::ops::f16_bits(-x) == Halide::float16_t(-x).to_bits());
  }
  const uint16_t nan = opfuse::ops::f16_bits(NAN);
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x3ff) != 0);
}

TEST_CASE("conv weights packed for NHWC register blocks read back as the weights") {
  // [Cout, Cin, KH, KW] = [48, Cin, 3, 2]: blocks of 8 and 16 lanes (Cout a multiple), Cout
  // innermost for 32 lanes (not one), and rank 4 or 6 as packed_weight_extents says; Cin 5
  // in one chunk, 64 in two of 32.
  for (int64_t cin : {5, 64}) {
    const Shape shape = {48, cin, 3, 2};
    const int chunk = opfuse::ops::conv_weight_chunk(cin);
    CHECK(chunk == (cin == 64 ? 32 : 5));
    Halide::Buffer<float> w(opfuse::ops::halide_extents(shape));
    w.for_each_element([&](int kw, int kh, int ci, int co) {
      w(kw, kh, ci, co) = float(((co * cin + ci) * 3 + kh) * 2 + kw);
    });
    for (int lanes : {8, 16, 32}) {
      CAPTURE(cin);
      CAPTURE(lanes);
      const int block = opfuse::ops::weight_block(shape, lanes);
      CHECK(block == (lanes == 32 ? 0 : lanes));
      Halide::Buffer<> packed = opfuse::ops::pack_weights(w, block);
      const std::vector<int> extents = opfuse::ops::packed_weight_extents(shape, block);
      REQUIRE(packed.dimensions() == int(extents.size()));
      CHECK(packed.dimensions() == (block > 0 ? 6 : 4));
      for (int d = 0; d < packed.dimensions(); ++d) CHECK(packed.dim(d).extent() == extents[d]);
      if (block > 0) {
        // A block's weights lie together: its lanes, then the chunk's input channels, kw,
        // kh, then the chunks; the order its loops read them in.
        Halide::Buffer<float> p(packed);
        CHECK(p(1, 0, 0, 0, 0, 0) == w(0, 0, 0, 1));
        CHECK(p(0, 1, 0, 0, 0, 0) == w(0, 0, 1, 0));
        CHECK(p(0, 0, 1, 0, 0, 0) == w(1, 0, 0, 0));
        CHECK(p(0, 0, 0, 1, 0, 0) == w(0, 1, 0, 0));
        CHECK(p(0, 0, 0, 0, 0, 1) == w(0, 0, 0, block));
        CHECK(&p(0, 1, 0, 0, 0, 0) - &p(0, 0, 0, 0, 0, 0) == block);
        CHECK(&p(0, 0, 1, 0, 0, 0) - &p(0, 0, 0, 0, 0, 0) == block * chunk);
        CHECK(&p(0, 0, 0, 0, 0, 1) - &p(0, 0, 0, 0, 0, 0) == block * cin * 3 * 2);
        if (cin == 64) {
          CHECK(p(0, 0, 0, 0, 1, 0) == w(0, 0, 32, 0));
          CHECK(&p(0, 0, 0, 0, 1, 0) - &p(0, 0, 0, 0, 0, 0) == block * 32 * 3 * 2);
        }
      }
      Halide::Func f;
      const std::vector<Halide::Var> v = opfuse::ops::halide_args(opfuse::ops::make_vars(4));
      f(v) = packed(opfuse::ops::packed_weight_index(v, block, cin));
      Halide::Buffer<float> back = f.realize(opfuse::ops::halide_extents(shape));
      int wrong = 0;
      back.for_each_element([&](int kw, int kh, int ci, int co) {
        wrong += back(kw, kh, ci, co) != w(kw, kh, ci, co);
      });
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("linear weights packed in panels of columns read back as the weights") {
  // [K, N] = [5, 128]: two panels of 64 columns, rank 3 (lane, k, panel); N = 96 is no
  // multiple of the panel and stays row-major.
  const Shape shape = {5, 128};
  REQUIRE(opfuse::ops::weight_block(shape, 16) == opfuse::graph::kWeightPanel);
  CHECK(opfuse::ops::weight_block({5, 96}, 16) == 0);
  Halide::Buffer<float> w(opfuse::ops::halide_extents(shape));
  w.for_each_element([&](int n, int k) { w(n, k) = float(k * 128 + n); });
  const int p = int(opfuse::graph::kWeightPanel);
  Halide::Buffer<float> packed(opfuse::ops::pack_weights(w, p));
  CHECK(opfuse::ops::packed_weight_extents(shape, p) == std::vector<int>{p, 5, 2});
  REQUIRE(packed.dimensions() == 3);
  CHECK(packed(1, 0, 0) == w(1, 0));
  CHECK(packed(0, 1, 0) == w(0, 1));
  CHECK(packed(3, 4, 1) == w(p + 3, 4));
  CHECK(&packed(0, 1, 0) - &packed(0, 0, 0) == p);  // a panel's row, then the next row
  // The index the lowering reads through.
  Halide::Var n("n"), k("k");
  Halide::Func f("f");
  f(n, k) = packed(opfuse::ops::packed_weight_index({n, k}, p, 0));
  Halide::Buffer<float> back = f.realize({128, 5});
  back.for_each_element([&](int x, int y) { CHECK(back(x, y) == w(x, y)); });
}

TEST_CASE("linear weights whose columns end inside a panel are padded to it with zeros") {
  // [K, N] = [3, 600]: 9 whole panels and one of 24 columns, stored as 10 (640 columns, 1/15
  // more); [3, 96] would store a third more and stays row-major, as [3, 40] (under a panel).
  const int p = int(opfuse::graph::kWeightPanel);
  CHECK(opfuse::graph::linear_weight_panel({3, 96}) == 0);
  CHECK(opfuse::graph::linear_weight_panel({3, 40}) == 0);
  CHECK(opfuse::graph::linear_weight_panel({3, 1000}) == p);
  const Shape shape = {3, 600};
  REQUIRE(opfuse::ops::weight_block(shape, 16) == p);
  Halide::Buffer<float> w(opfuse::ops::halide_extents(shape));
  w.for_each_element([&](int n, int k) { w(n, k) = float(1 + k * 600 + n); });
  Halide::Buffer<float> packed(opfuse::ops::pack_weights(w, p));
  CHECK(opfuse::ops::packed_weight_extents(shape, p) == std::vector<int>{p, 3, 10});
  REQUIRE(packed.dimensions() == 3);
  REQUIRE(packed.dim(2).extent() == 10);
  int wrong = 0, padding = 0;
  packed.for_each_element([&](int l, int k, int j) {
    const int col = j * p + l;
    if (col < 600) {
      wrong += packed(l, k, j) != w(col, k);
    } else {
      padding += packed(l, k, j) != 0.0f;
    }
  });
  CHECK(wrong == 0);
  CHECK(padding == 0);
  Halide::Var n("n"), k("k");
  Halide::Func f("f");
  f(n, k) = packed(opfuse::ops::packed_weight_index({n, k}, p, 0));
  Halide::Buffer<float> back = f.realize({600, 3});
  int differ = 0;
  back.for_each_element([&](int x, int y) { differ += back(x, y) != w(x, y); });
  CHECK(differ == 0);
}

// A library's arguments are buffers named after their tensors (a generator's Inputs, which,
// unlike ImageParams, do not reserve their names); a node whose name sanitises to one of them
// (the dynamo exporter's node 'linear_11_bias' beside its weight 'linear_11.bias') must not
// take that name: Halide merges bounds by name, and the weight's 1-D box and the node's 2-D
// one met in an internal error of bounds inference (BERT's and ViT's libraries with their
// weights as arguments).
TEST_CASE("a node named as an argument buffer keeps a name of its own") {
  const Graph g = graph_from_json_string(R"({
    "format": "opfuse.graph", "version": 1, "name": "clash",
    "inputs": [{"name": "x", "shape": [4, 8]}],
    "params": [{"name": "lin.w", "shape": [8, 6], "init": [-0.5, 0.5]},
               {"name": "lin.b", "shape": [6], "init": [-0.5, 0.5]}],
    "nodes": [{"name": "lin_b", "op": "linear", "inputs": ["x", "lin.w", "lin.b"]},
              {"name": "act", "op": "relu", "inputs": ["lin_b"]}],
    "outputs": ["act"]})");
  std::vector<Halide::Buffer<>> keep;
  const opfuse::ops::LoweredGraph lowered = opfuse::ops::lower(
      g, opfuse::ops::buffer_sources(g, random_inputs(g, 7), param_values(g), keep));
  std::set<std::string> argument_names = {"act_out"};  // the output's argument
  for (const auto& name : g.tensor_names()) {
    if (g.tensor(name).kind != TensorKind::intermediate) {
      argument_names.insert(opfuse::ops::halide_safe_name(name));
    }
  }
  for (const opfuse::ops::LoweredNode& n : lowered.nodes) {
    for (const Halide::Func& f : n.funcs) {
      CAPTURE(f.name());
      CHECK(argument_names.count(f.name()) == 0);
    }
  }
  check_root_matches_reference(g, kReduction);
}
