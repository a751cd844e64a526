// How a symbolic dimension acts (fusion/frontend/dynamic.h): separable along the batch when
// every sample stays apart (convolutions, a flatten, transposes that move the batch and back,
// reshapes that keep a sample's elements together, as in ViT's attention and both exporters'
// dynamic shape arithmetic); refused, naming the node or tensor, when an op reads across it, a
// reduction removes it, a reshape mixes samples or an output does not carry it first. And the
// JIT's shape cache (schedules/shape_cache.h) that serves such a model at any size.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "fusion/frontend/dynamic.h"
#include "fusion/frontend/load_model.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/onnx_import.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "schedules/shape_cache.h"
#include "tests/frontend/networks.h"
#include "tests/onnx_model.h"

using namespace opfuse;
using opfuse::testing::OnnxModel;

namespace {

fusion::SymbolBehaviour behaviour(const OnnxModel& om) {
  const std::string bytes = om.bytes();
  return fusion::compare_bindings(graph::import_onnx_bytes(bytes, "m.onnx", "", {{"N", 2}}), 2,
                                  graph::import_onnx_bytes(bytes, "m.onnx", "", {{"N", 3}}), 3, "N");
}

void refused(const OnnxModel& om, std::initializer_list<std::string> needles) {
  const fusion::SymbolBehaviour b = behaviour(om);
  CHECK_FALSE(b.separable);
  for (const auto& n : needles) {
    INFO(b.why_not);
    CHECK(b.why_not.find(n) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("a batch is separable through convolutions, a flatten and a linear head") {
  OnnxModel om;
  om.input("x", {1, 4, 6, 6}, /*symbolic=*/true);
  om.init("w", {8, 4, 3, 3}, testing::random_values(8 * 4 * 9, -0.3f, 0.3f, 1));
  auto* c = om.node("Conv", "conv", {"x", "w"}, "c");
  OnnxModel::ints(c, "pads", {1, 1, 1, 1});
  om.node("Relu", "relu", {"c"}, "r");
  OnnxModel::i(om.node("Flatten", "flat", {"r"}, "f"), "axis", 1);
  om.init("fc", {10, 288}, testing::random_values(2880, -0.1f, 0.1f, 2));
  OnnxModel::i(om.node("Gemm", "head", {"f", "fc"}, "y"), "transB", 1);
  om.output("y");
  const fusion::SymbolBehaviour b = behaviour(om);
  INFO(b.why_not);
  CHECK(b.separable);
  CHECK(b.inputs == std::vector<std::string>{"x"});
  CHECK(b.outputs == std::vector<std::string>{"y"});
}

TEST_CASE("a batch moved inside by a transpose and back stays separable") {
  OnnxModel om;
  om.input("x", {1, 3, 4}, true);
  OnnxModel::ints(om.node("Transpose", "t1", {"x"}, "a"), "perm", {1, 0, 2});
  om.node("Softmax", "sm", {"a"}, "s");  // over the last axis, not the batch
  OnnxModel::ints(om.node("Transpose", "t2", {"s"}, "y"), "perm", {1, 0, 2});
  om.output("y");
  CHECK(behaviour(om).separable);
}

TEST_CASE("what mixes samples is refused, naming it") {
  {
    OnnxModel om;
    om.input("x", {1, 4}, true);
    OnnxModel::i(om.node("Softmax", "sm", {"x"}, "y"), "axis", 0);
    om.output("y");
    refused(om, {"node 'sm'", "softmax", "reads across axis 0"});
  }
  {
    OnnxModel om;
    om.input("x", {1, 4}, true);
    auto* r = om.node("ReduceMean", "mean", {"x"}, "y");
    OnnxModel::ints(r, "axes", {0});
    om.output("y");
    refused(om, {"node 'mean'", "reduces N away"});
  }
  {
    // [N, 4] -> [4, N] -> [2N, 2]: rows of the result hold two samples' elements.
    OnnxModel om;
    om.input("x", {1, 4}, true);
    OnnxModel::ints(om.node("Transpose", "t", {"x"}, "a"), "perm", {1, 0});
    om.init_ints("shape", {-1, 2});
    om.node("Reshape", "mix", {"a", "shape"}, "y");
    om.output("y");
    refused(om, {"node 'mix'", "mixes the elements of different N indices"});
  }
  {
    OnnxModel om;
    om.input("x", {1, 4}, true);
    OnnxModel::ints(om.node("Transpose", "t", {"x"}, "y"), "perm", {1, 0});
    om.output("y");
    refused(om, {"output 'y'", "axis 1"});
  }
}

TEST_CASE("the corpus's dynamic-batch exports are separable, shape arithmetic and all") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("opfuse_dyn_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  for (auto style : {testing::ExportStyle::torchscript, testing::ExportStyle::dynamo}) {
    // ViT: Shape -> Gather/Unsqueeze or Shape(start, end) -> Concat -> Reshape, the class
    // token expanded to the batch, qkv moving the batch to axis 1 and back.
    const std::string path = testing::write_network("vit_tiny", style, dir, 32, true);
    const fusion::SymbolBehaviour b = fusion::analyse_symbol(path, "batch");
    INFO(path, ": ", b.why_not);
    CHECK(b.separable);
    CHECK(b.inputs == std::vector<std::string>{"x"});
    // One weights file serves every size: the same weights at batch 1, where the class
    // token's expand copies nothing, as at 3.
    const graph::Graph at1 = fusion::load_model(path, {{"batch", 1}});
    const graph::Graph at3 = fusion::load_model(path, {{"batch", 3}});
    CHECK(at1.params() == at3.params());
    for (const auto& name : at1.params()) {
      CAPTURE(name);
      REQUIRE(at3.has_tensor(name));
      CHECK(at1.tensor(name).shape == at3.tensor(name).shape);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("--dim specs: a size or a range, anything else named") {
  const fusion::DimRange one = fusion::parse_dim("batch=8");
  CHECK(one.symbol == "batch");
  CHECK(one.min == 8);
  CHECK(one.max == 8);
  const fusion::DimRange range = fusion::parse_dim("seq=1..128");
  CHECK(range.min == 1);
  CHECK(range.max == 128);
  for (const char* bad : {"batch", "=3", "batch=0", "batch=5..2", "batch=x", "batch=1..", "b=99999999999"}) {
    bool threw = false;
    try {
      fusion::parse_dim(bad);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find(std::string("--dim ") + bad) != std::string::npos;
    }
    CHECK_MESSAGE(threw, bad);
  }
}

namespace {

// A conv block with a symbolic batch N, written as a file (ShapeCache reads models by path).
std::string write_block(const std::string& name, bool mix_samples) {
  OnnxModel om;
  om.input("x", {1, 4, 6, 6}, true);
  om.init("w", {8, 4, 3, 3}, testing::random_values(8 * 4 * 9, -0.3f, 0.3f, 1));
  auto* c = om.node("Conv", "conv", {"x", "w"}, "c");
  OnnxModel::ints(c, "pads", {1, 1, 1, 1});
  if (mix_samples) {  // softmax over the batch: not separable
    OnnxModel::i(om.node("Softmax", "sm", {"c"}, "y"), "axis", 0);
  } else {
    om.node("Relu", "relu", {"c"}, "y");
  }
  om.output("y");
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".onnx")).string();
  std::ofstream(path, std::ios::binary) << om.bytes();
  return path;
}

bool serves(schedules::ShapeCache& cache, const std::string& path, int64_t n, uint64_t seed) {
  const graph::Graph g = graph::import_onnx(path, {{"N", n}});
  const graph::TensorMap in = graph::random_inputs(g, seed);
  const graph::TensorMap out = cache.run(n, in);
  const graph::TensorMap want = reference::run(g, in);
  return out.at("y").shape == want.at("y").shape &&
         reference::compare(out.at("y").data, want.at("y").data, reference::kGraphTolerance).ok();
}

}  // namespace

TEST_CASE("the JIT's shape cache: buckets, LRU eviction, the predicted bucket compiled ahead") {
  const std::string path = write_block("opfuse_cache_", false);
  schedules::ShapeCache::Options o;
  o.capacity = 2;
  schedules::ShapeCache cache(path, "N", {}, o);
  REQUIRE(cache.separable());
  CHECK(cache.bucket_of(3) == 4);
  CHECK(cache.bucket_of(4) == 4);
  CHECK(serves(cache, path, 3, 1));  // bucket 4: compiled on the call, padded 3 -> 4
  cache.wait_idle();                 // the predictor compiled bucket 8 ahead (above the largest)
  auto st = cache.stats();
  CHECK(st.misses == 1);
  CHECK(st.ahead_compiles == 1);
  CHECK(st.buckets.count(8));
  CHECK(st.buckets.at(8).ahead);
  CHECK(serves(cache, path, 6, 2));  // bucket 8: ready
  CHECK(serves(cache, path, 4, 3));  // bucket 4: still kept
  st = cache.stats();
  CHECK(st.hits == 2);
  CHECK(st.misses == 1);
  CHECK(serves(cache, path, 1, 4));  // bucket 1: more than 2 kept, so the least recent go
  cache.wait_idle();
  st = cache.stats();
  CHECK(st.evictions >= 1);
  CHECK(st.histogram == std::map<int64_t, int64_t>{{1, 1}, {3, 1}, {4, 1}, {6, 1}});
  CHECK_THROWS_AS(cache.run(2, graph::random_inputs(graph::import_onnx(path, {{"N", 3}}), 1)),
                  std::invalid_argument);  // inputs at 3 for a call at 2, refused before a compile
  CHECK_FALSE(cache.stats().buckets.count(2));
  std::filesystem::remove(path);
}

TEST_CASE("the JIT's shape cache from 8 threads at mixed sizes; exact sizes when not separable") {
  const std::string path = write_block("opfuse_cache_threads_", false);
  schedules::ShapeCache cache(path, "N", {});  // 3 kept of 4 buckets: evictions under load
  struct Call {
    graph::TensorMap in, want;
  };
  std::map<int64_t, Call> calls;  // inputs and references made first, on this thread
  for (int64_t n = 1; n <= 5; ++n) {
    const graph::Graph g = graph::import_onnx(path, {{"N", n}});
    calls[n].in = graph::random_inputs(g, uint64_t(n));
    calls[n].want = reference::run(g, calls[n].in);
  }
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const int64_t n = 1 + (t + i) % 5;
        const graph::TensorMap out = cache.run(n, calls.at(n).in);
        right += reference::compare(out.at("y").data, calls.at(n).want.at("y").data,
                                    reference::kGraphTolerance).ok() ? 1 : 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(right == 24);
  cache.wait_idle();
  std::filesystem::remove(path);

  const std::string mixed = write_block("opfuse_cache_mixed_", true);
  schedules::ShapeCache exact(mixed, "N", {});
  CHECK_FALSE(exact.separable());
  CHECK(exact.bucket_of(3) == 3);
  CHECK(serves(exact, mixed, 3, 1));
  exact.wait_idle();
  CHECK(exact.predicted() == -1);  // every size seen is compiled, and none above is guessed
  std::filesystem::remove(mixed);
}
