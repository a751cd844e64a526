// runtime::Model on libraries from `opfuse compile --shared`: a zoo model with its weights in a
// file beside the library (on the host and on PoCL) and the same model with them inside,
// opened by path, run by name
// and against the reference executor; bad calls, bad libraries and bad weights files (missing,
// truncated, corrupted, another model's, not a weights file) fail cleanly, never with a crash
// or a wrong answer; concurrent first calls load the weights once.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/zoo_model.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/op_schema.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "generators/dispatch.h"
#include "runtime/kernel.h"
#include "runtime/model.h"
#include "runtime/pool_allocator.h"
#include "runtime/weights_file.h"
#include "tests/kernel_check.h"

using namespace opfuse;
namespace fs = std::filesystem;
using runtime::Model;
using testing::error_of;

namespace {

const std::string kLibs = OPFUSE_MODEL_LIBS;  // file/, embed/ and other/ (mlp)

// cbr_pool's input (seed 5) and its reference output.
struct Case {
  bench::ModelTensors t{OPFUSE_MODELS_DIR, "cbr_pool", 5};
  graph::TensorMap want = reference::run(t.graph, t.inputs, t.params);
  runtime::Tensor x() const { return runtime::Tensor::f32(t.in("x"), {1, 56, 56, 32}); }
  bool matches(const runtime::OwnedTensor& y) const {
    const auto& w = want.at(t.graph.outputs()[0]).data;
    std::vector<float> got(y.as<float>(), y.as<float>() + y.elements());
    return got.size() == w.size() && reference::compare(got, w, testing::kZooTolerance).ok();
  }
};

// A folder holding a copy of the weights-file library and, beside it, `weights` (if given):
// a library as a user might deploy it. dlopen keeps each copy's state apart.
struct Deployed {
  fs::path dir;
  explicit Deployed(const std::string& tag, const std::vector<char>* weights) {
    dir = fs::temp_directory_path() / ("opfuse_model_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(kLibs + "/file/cbr_pool.so", dir / "cbr_pool.so");
    if (weights) {
      std::ofstream f(dir / "cbr_pool.weights", std::ios::binary);
      f.write(weights->data(), std::streamsize(weights->size()));
    }
  }
  ~Deployed() { fs::remove_all(dir); }
  std::string so() const { return (dir / "cbr_pool.so").string(); }
};

std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a library with a weights file takes the input alone and matches the reference") {
  Case c;
  for (const std::string kind : {"file", "embed"}) {
    CAPTURE(kind);
    const Model m = Model::open(kLibs + "/" + kind + "/cbr_pool.so");
    REQUIRE(m.inputs().size() == 1);
    CHECK(m.inputs()[0].name == "x");
    CHECK(m.inputs()[0].shape == std::vector<int64_t>{1, 56, 56, 32});
    CHECK(m.inputs()[0].dtype == runtime::DType::f32);
    REQUIRE(m.outputs().size() == 1);
    CHECK(m.outputs()[0].name == "max_pool_0");
    CHECK(m.outputs()[0].shape == std::vector<int64_t>{1, 28, 28, 32});
    const auto out = m.run({{"x", c.x()}});
    REQUIRE(out.count("max_pool_0") == 1);
    CHECK(c.matches(out.at("max_pool_0")));
    // Into the caller's buffer, as the C entry point takes it.
    runtime::OwnedTensor y({1, 28, 28, 32}, runtime::DType::f32);
    m.run({c.x()}, {y.view()});
    CHECK(c.matches(y));
  }
  CHECK(error_of([&] { Model::open(kLibs + "/embed/cbr_pool.so").load_weights("x"); })
            .find("carries its weights inside") != std::string::npos);
}

TEST_CASE("a weights file stores a linear layer's columns in panels; the library matches") {
  // mlp: x [128, 256] -> linear [256, 1024] -> bias, gelu -> linear [1024, 256]. Both weights
  // have columns in multiples of graph::kWeightPanel: the file holds them as
  // [N / panel, K, panel], and the library reads them so.
  bench::ModelTensors t{OPFUSE_MODELS_DIR, "mlp", 3};
  const graph::TensorMap want = reference::run(t.graph, t.inputs, t.params);
  const std::vector<char> file = read_all(kLibs + "/other/mlp.weights");
  REQUIRE(file.size() > sizeof(weights::Header));
  weights::Header h;
  std::memcpy(&h, file.data(), sizeof h);
  int panels = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    weights::Entry e;
    REQUIRE(file.size() >= sizeof h + (i + 1) * sizeof e);
    std::memcpy(&e, file.data() + sizeof h + i * sizeof e, sizeof e);
    if (e.rank != 2) continue;
    CAPTURE(e.name);
    CHECK(e.layout == weights::kColumnPanels);
    CHECK(e.block == graph::kWeightPanel);
    const graph::HostTensor& w = t.params.at(e.name);
    const int64_t k = e.dims[0], n = e.dims[1], p = e.block;
    REQUIRE(e.offset + uint64_t(k * n) * sizeof(float) <= file.size());
    const float* stored = reinterpret_cast<const float*>(file.data() + e.offset);
    // Panel j, row r, lane l holds w[r, j * p + l].
    for (int64_t j : {int64_t(0), n / p - 1}) {
      for (int64_t r : {int64_t(0), int64_t(1), k - 1}) {
        for (int64_t l : {int64_t(0), p - 1}) {
          CHECK(stored[(j * k + r) * p + l] == w.data[size_t(r * n + j * p + l)]);
        }
      }
    }
    ++panels;
  }
  CHECK(panels == 2);
  const Model m = Model::open(kLibs + "/other/mlp.so");
  const auto out = m.run({{"x", runtime::Tensor::f32(t.in("x"), {128, 256})}});
  const std::string name = t.graph.outputs()[0];
  REQUIRE(out.count(name) == 1);
  const runtime::OwnedTensor& y = out.at(name);
  std::vector<float> got(y.as<float>(), y.as<float>() + y.elements());
  CHECK(reference::compare(got, want.at(name).data, testing::kZooTolerance).ok());
}

TEST_CASE("a library's intermediates come from the pool, reused across calls") {
  // mlp's library stores its gelu [128, 1024] (132 rows with its blocks' overreach) with
  // halide_malloc on every call. Its own Halide runtime allocates from the pool that
  // Model::open installs there (runtime/pool_allocator.h): freed, the block waits in the pool
  // for the next call, where malloc would map a fresh one each time.
  bench::ModelTensors t{OPFUSE_MODELS_DIR, "mlp", 3};
  const Model m = Model::open(kLibs + "/other/mlp.so");
  const auto x = runtime::Tensor::f32(t.in("x"), {128, 256});
  m.run({{"x", x}});
  const size_t after_first = runtime::pooled_bytes();
  CHECK(after_first >= size_t(128) * 1024 * sizeof(float));
  for (int i = 0; i < 10; ++i) m.run({{"x", x}});
  CHECK(runtime::pooled_bytes() <= 2 * after_first);  // reused, not grown
  const graph::TensorMap want = reference::run(t.graph, t.inputs, t.params);
  const std::string name = t.graph.outputs()[0];
  const runtime::OwnedTensor y = m.run({{"x", x}}).at(name);
  std::vector<float> got(y.as<float>(), y.as<float>() + y.elements());
  CHECK(reference::compare(got, want.at(name).data, testing::kZooTolerance).ok());
}

TEST_CASE("a weights file on a GPU-style target: copied to the device once, right every call") {
  Case c;
  const Model m = Model::open(kLibs + "/opencl/cbr_pool.so");
  REQUIRE(m.inputs().size() == 1);
  for (int i = 0; i < 3; ++i) CHECK(c.matches(m.run({{"x", c.x()}}).at("max_pool_0")));
}

TEST_CASE("bad calls name the argument and what was expected") {
  Case c;
  const Model m = Model::open(kLibs + "/file/cbr_pool.so");
  CHECK(error_of([&] { m.run({{"y", c.x()}}); }).find("input 'x' is not given (f32 [1,56,56,32])") !=
        std::string::npos);
  CHECK(error_of([&] { m.run({{"x", c.x()}, {"z", c.x()}}); })
            .find("has no input 'z' (inputs: x)") != std::string::npos);
  runtime::Tensor wrong = c.x();
  wrong.shape = {1, 56, 56, 16};
  CHECK(error_of([&] { m.run({{"x", wrong}}); })
            .find("input 'x' must have shape [1,56,56,32], got [1,56,56,16]") != std::string::npos);
  wrong = c.x();
  wrong.dtype = runtime::DType::i64;
  CHECK(error_of([&] { m.run({{"x", wrong}}); }).find("input 'x' must be f32, got i64") !=
        std::string::npos);
  CHECK(error_of([&] { m.output("logits"); }).find("no output 'logits' (outputs: max_pool_0)") !=
        std::string::npos);
}

TEST_CASE("a missing library or entry point is an error naming the file") {
  CHECK(error_of([] { Model::open("/nonexistent/m.so"); }).find("cannot open compiled model /nonexistent/m.so") !=
        std::string::npos);
  CHECK(error_of([] { Model::open(kLibs + "/file/cbr_pool.so", "resnet"); })
            .find("has no symbol resnet_argv") != std::string::npos);
}

TEST_CASE("bad weights files are refused with what is wrong, and the good one stays") {
  Case c;
  const std::vector<char> good = read_all(kLibs + "/file/cbr_pool.weights");
  REQUIRE(good.size() > 4096);
  std::vector<char> truncated(good.begin(), good.begin() + good.size() / 2);
  std::vector<char> header_only(good.begin(), good.begin() + 20);
  std::vector<char> corrupted = good;
  corrupted[corrupted.size() - 100] ^= 0x10;  // one bit of the last weights
  const std::vector<char> other = read_all(kLibs + "/other/mlp.weights");
  const std::vector<char> not_weights = read_all(kLibs + "/file/cbr_pool.plan.json");
  const struct {
    const char* tag;
    const std::vector<char>* file;
    const char* says;
  } cases[] = {
      {"missing", nullptr, "cannot open weights file"},
      {"truncated", &truncated, "truncated"},
      {"header", &header_only, "not even a header"},
      {"corrupted", &corrupted, "the file is corrupted"},
      {"other", &other, "belongs to another model"},
      {"plan", &not_weights, "not an opfuse weights file"},
  };
  for (const auto& k : cases) {
    CAPTURE(k.tag);
    Deployed d(k.tag, k.file);
    // Opened, the library loads the file beside it (when there is none, the one where opfuse
    // compile wrote it, which is good: that case is checked by path below).
    if (k.file) {
      const std::string e = error_of([&] { Model::open(d.so()); });
      CHECK(e.find(k.says) != std::string::npos);
      CHECK(e.find(d.dir.string()) != std::string::npos);  // names the file
    }
    // Through the C entry point: the first call loads the file, fails, and says why.
    void* h = dlopen(d.so().c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h);
    auto argv = reinterpret_cast<runtime::ArgvFunction>(dlsym(h, "cbr_pool_argv"));
    auto md = reinterpret_cast<runtime::MetadataFunction>(dlsym(h, "cbr_pool_metadata"));
    auto load = reinterpret_cast<int (*)(const char*)>(dlsym(h, "cbr_pool_load_weights"));
    REQUIRE((argv && md && load));
    void* set = dlsym(h, "halide_set_error_handler");
    REQUIRE(set);
    runtime::install_error_handler_into(set);
    const Model m("cbr_pool", argv, md);
    if (k.file) {
      CHECK(error_of([&] { m.run({{"x", c.x()}}); }).find(k.says) != std::string::npos);
    }
    const std::string bad = k.file ? (d.dir / "cbr_pool.weights").string() : (d.dir / "none").string();
    auto load_bad = [&] { runtime::check(load(bad.c_str()), "cbr_pool"); };
    CHECK(error_of(load_bad).find(k.says) != std::string::npos);
    // The good file loads; a bad one after it is refused and the good weights stay.
    REQUIRE(load((kLibs + "/file/cbr_pool.weights").c_str()) == 0);
    CHECK(error_of(load_bad).find(k.says) != std::string::npos);
    CHECK(c.matches(m.run({{"x", c.x()}}).at("max_pool_0")));
    dlclose(h);
  }
}

TEST_CASE("8 threads make the first calls at once: the weights load once, every answer right") {
  Case c;
  Deployed d("threads", nullptr);
  fs::copy_file(kLibs + "/file/cbr_pool.weights", d.dir / "cbr_pool.weights");
  void* h = dlopen(d.so().c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h);
  const Model m("cbr_pool", reinterpret_cast<runtime::ArgvFunction>(dlsym(h, "cbr_pool_argv")),
                reinterpret_cast<runtime::MetadataFunction>(dlsym(h, "cbr_pool_metadata")));
  std::atomic<int> right{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        try {
          (c.matches(m.run({{"x", c.x()}}).at("max_pool_0")) ? right : wrong)++;
        } catch (...) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(right == 40);
  CHECK(wrong == 0);
  dlclose(h);
}

namespace {

// A graph file with symbolic dimensions at given sizes: its inputs (seeded by the sizes) and
// the reference's outputs.
struct SizedCase {
  graph::Graph g;
  graph::TensorMap in, want;
  SizedCase(const std::string& path, const graph::DimBindings& dims, uint64_t seed)
      : g(graph::load_graph_json(path, dims)),
        in(graph::random_inputs(g, seed)),
        want(reference::run(g, in)) {}
  std::map<std::string, runtime::Tensor> inputs() const {
    std::map<std::string, runtime::Tensor> out;
    for (const auto& name : g.inputs())
      out[name] = runtime::Tensor::f32(in.at(name).data.data(), in.at(name).shape);
    return out;
  }
  // `t` is the graph's only output, within the zoo's tolerance.
  bool matches(const runtime::OwnedTensor& t) const {
    const auto& w = want.at(g.outputs().front());
    if (t.shape != w.shape) return false;
    std::vector<float> got(t.as<float>(), t.as<float>() + t.elements());
    return reference::compare(got, w.data, testing::kZooTolerance).ok();
  }
};

// dyn_block (x, y [batch, 8, 8, 16] -> relu(conv(x) + y)) at one batch size.
struct DynCase : SizedCase {
  explicit DynCase(int64_t n) : SizedCase(OPFUSE_DYN_BLOCK, {{"batch", n}}, uint64_t(n)) {}
};

}  // namespace

TEST_CASE("a dynamic batch: one library, any size in its range, checked shapes") {
  const Model m = Model::open(kLibs + "/dynamic/dyn_block.so");
  REQUIRE(m.dynamic_dims().size() == 1);
  REQUIRE(m.dynamic("batch"));
  CHECK(m.dynamic("batch")->min == 1);
  CHECK(m.dynamic("batch")->max == 8);
  CHECK(m.dynamic("batch")->sizes.empty());
  CHECK_FALSE(m.dynamic("seq"));
  CHECK(m.input("x").shape == std::vector<int64_t>{-1, 8, 8, 16});
  CHECK(m.input("x").dim_names == std::vector<std::string>{"batch", "", "", ""});
  CHECK(m.output("act").shape == std::vector<int64_t>{-1, 8, 8, 16});
  // 1, 2 and 4 have functions of their own; 3, 7 and 8 are slices of them.
  for (int64_t n : {1, 3, 4, 7, 8}) {
    const DynCase c(n);
    const auto out = m.run(c.inputs());
    CHECK_MESSAGE(c.matches(out.at("act")), "batch " << n);
  }
  const DynCase three(3), four(4);
  std::map<std::string, runtime::Tensor> mixed = three.inputs();
  mixed["y"] = four.inputs().at("y");
  CHECK(error_of([&] { m.run(mixed); }).find("input 'y' has batch = 4 but input 'x' has 3") !=
        std::string::npos);
  std::vector<float> big(9 * 8 * 8 * 16);
  std::map<std::string, runtime::Tensor> nine = {{"x", runtime::Tensor::f32(big.data(), {9, 8, 8, 16})},
                                                 {"y", runtime::Tensor::f32(big.data(), {9, 8, 8, 16})}};
  CHECK(error_of([&] { m.run(nine); })
            .find("input 'x' has batch = 9, outside the sizes the library was compiled for, 1..8") !=
        std::string::npos);
  std::map<std::string, runtime::Tensor> wrong = three.inputs();
  wrong["y"] = runtime::Tensor::f32(big.data(), {3, 8, 8, 15});
  CHECK(error_of([&] { m.run(wrong); }).find("input 'y' must have shape [batch,8,8,16], got [3,8,8,15]") !=
        std::string::npos);
  // The entry point checks for itself, for callers of the C ABI.
  std::vector<float> out(9 * 8 * 8 * 16);
  runtime::HostBuffers bufs({runtime::Tensor::f32(big.data(), {9, 8, 8, 16}),
                             runtime::Tensor::f32(big.data(), {9, 8, 8, 16}),
                             runtime::Tensor::f32(out.data(), {9, 8, 8, 16})});
  void* argv[] = {&bufs[0], &bufs[1], &bufs[2]};
  CHECK(m.entry()(argv) != 0);
}

TEST_CASE("a dynamic batch from 8 threads at mixed sizes: every answer right") {
  const Model m = Model::open(kLibs + "/dynamic/dyn_block.so");
  std::vector<DynCase> cases;
  for (int64_t n = 1; n <= 8; ++n) cases.emplace_back(n);
  std::atomic<int> right{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const DynCase& c = cases[size_t((t + 3 * i) % 8)];
        try {
          (c.matches(m.run(c.inputs()).at("act")) ? right : wrong)++;
        } catch (...) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(right == 48);
  CHECK(wrong == 0);
}

namespace {

// dyn_seq (x [batch, seq, 16], m [seq, 8] -> softmax over seq of linear(x) + m) at one size.
struct SeqCase : SizedCase {
  SeqCase(int64_t batch, int64_t seq)
      : SizedCase(OPFUSE_DYN_SEQ, {{"batch", batch}, {"seq", seq}}, uint64_t(10 * batch + seq)) {}
};

}  // namespace

TEST_CASE("a dynamic batch and a listed sequence length in one library") {
  const Model m = Model::open(kLibs + "/dynamic/dyn_seq.so");
  REQUIRE(m.dynamic_dims().size() == 2);
  REQUIRE(m.dynamic("batch"));
  CHECK(m.dynamic("batch")->min == 1);
  CHECK(m.dynamic("batch")->max == 5);
  CHECK(m.dynamic("batch")->sizes.empty());
  REQUIRE(m.dynamic("seq"));
  CHECK(m.dynamic("seq")->sizes == std::vector<int64_t>{3, 6});
  CHECK(m.input("x").shape == std::vector<int64_t>{-1, -1, 16});
  CHECK(m.input("x").dim_names == std::vector<std::string>{"batch", "seq", ""});
  CHECK(m.input("m").dim_names == std::vector<std::string>{"seq", ""});
  CHECK(m.output("attn").dim_names == std::vector<std::string>{"batch", "seq", ""});
  // Batches 3 and 5 are slices (functions at 1 and 2), at each listed length.
  for (int64_t seq : {3, 6}) {
    for (int64_t batch : {1, 2, 3, 5}) {
      const SeqCase c(batch, seq);
      CHECK_MESSAGE(c.matches(m.run(c.inputs()).at("attn")), "batch " << batch << ", seq " << seq);
    }
  }
  const SeqCase three(3, 3), six(3, 6), four(2, 4);
  CHECK(error_of([&] {
          m.run(four.inputs());
        }).find("has seq = 4, not one of the sizes the library was compiled for: 3, 6") !=
        std::string::npos);
  std::map<std::string, runtime::Tensor> mixed = three.inputs();
  mixed["m"] = six.inputs().at("m");
  CHECK(error_of([&] { m.run(mixed); }).find("input 'm' has seq = 6 but input 'x' has 3") !=
        std::string::npos);
  const SeqCase big(6, 3);
  CHECK(error_of([&] {
          m.run(big.inputs());
        }).find("has batch = 6, outside the sizes the library was compiled for, 1..5") !=
        std::string::npos);
  // The entry point checks for itself, for callers of the C ABI: sequences that disagree, and
  // a length it has no function for.
  std::vector<float> out(3 * 6 * 8);
  {
    runtime::HostBuffers bufs(
        {mixed.at("x"), mixed.at("m"), runtime::Tensor::f32(out.data(), {3, 3, 8})});
    void* argv[] = {&bufs[0], &bufs[1], &bufs[2]};
    CHECK(m.entry()(argv) != 0);
  }
  {
    const auto in = four.inputs();
    runtime::HostBuffers bufs(
        {in.at("x"), in.at("m"), runtime::Tensor::f32(out.data(), {2, 4, 8})});
    void* argv[] = {&bufs[0], &bufs[1], &bufs[2]};
    CHECK(m.entry()(argv) != 0);
  }
  {  // and runs a right call through the C ABI too
    const auto in = six.inputs();
    runtime::HostBuffers bufs(
        {in.at("x"), in.at("m"), runtime::Tensor::f32(out.data(), {3, 6, 8})});
    void* argv[] = {&bufs[0], &bufs[1], &bufs[2]};
    REQUIRE(m.entry()(argv) == 0);
    const auto& w = six.want.at("attn");
    CHECK(reference::compare(out, w.data, testing::kZooTolerance).ok());
  }
}

TEST_CASE("a library's dynamic dimensions as the command line gives them to the generator") {
  const generators::Dispatch d =
      generators::parse_dispatch("batch:1..16:4,1,2;seq:exact:128,32,77");
  REQUIRE(d.dims.size() == 2);
  CHECK(d.dims[0].symbol == "batch");
  CHECK_FALSE(d.dims[0].exact);
  CHECK(d.dims[0].min == 1);
  CHECK(d.dims[0].max == 16);
  CHECK(d.dims[0].sizes == std::vector<int64_t>{1, 2, 4});
  CHECK(d.dims[1].exact);
  CHECK(d.dims[1].min == 32);
  CHECK(d.dims[1].max == 128);
  CHECK(generators::dispatch_to_string(d) == "batch:1..16:1,2,4;seq:exact:32,77,128");
  const auto combos = d.combinations();
  REQUIRE(combos.size() == 9);
  CHECK(combos[0] == std::vector<int64_t>{1, 32});
  CHECK(combos[1] == std::vector<int64_t>{1, 77});
  CHECK(combos[3] == std::vector<int64_t>{2, 32});
  CHECK(generators::dispatch_function("gpt2", combos[5]) == "gpt2_b2x128_impl");
  CHECK(generators::dispatch_function("gpt2", {4}) == "gpt2_b4_impl");
  auto refused = [](const std::string& text) {
    return error_of([&] { generators::parse_dispatch(text); });
  };
  CHECK(refused("batch:1..8:1,2;n:1..4:1").find("more than one range") != std::string::npos);
  CHECK(refused("batch:1..8:1;batch:exact:3").find("batch twice") != std::string::npos);
  CHECK(refused("batch:1..8:2,4").find("the sizes must include 1") != std::string::npos);
  CHECK(refused("seq:exact:32,32").find("a size twice") != std::string::npos);
  CHECK(refused("seq:exact:").find("in 'seq:exact:'") != std::string::npos);
  CHECK(refused("batch:1..8:1;").find("malformed in ''") != std::string::npos);
}

TEST_CASE("a symbolic batch built at one size by CMake (DIMS batch=3)") {
  const Model& m = runtime::Registry::global().find("dyn_block_b3", "fused", "host").function();
  CHECK(m.dynamic_dims().empty());
  CHECK(m.input("x").shape == std::vector<int64_t>{3, 8, 8, 16});
  const DynCase c(3);
  CHECK(c.matches(m.run(c.inputs()).at("act")));
}

TEST_CASE("a dynamic batch's C entry slices buffers whose batch axis does not start at 0") {
  const Model m = Model::open(kLibs + "/dynamic/dyn_block.so");
  const DynCase c(3);
  const size_t row = 8 * 8 * 16;
  // Rows 2..4 of 6-row arrays, as Halide::Runtime::Buffer::crop leaves them: min 2, host at row 2.
  std::vector<float> x(6 * row, 0.f), y(6 * row, 0.f), out(6 * row, -1.f);
  std::copy(c.in.at("x").data.begin(), c.in.at("x").data.end(), x.begin() + 2 * row);
  std::copy(c.in.at("y").data.begin(), c.in.at("y").data.end(), y.begin() + 2 * row);
  runtime::HostBuffers bufs({runtime::Tensor::f32(x.data() + 2 * row, {3, 8, 8, 16}),
                             runtime::Tensor::f32(y.data() + 2 * row, {3, 8, 8, 16}),
                             runtime::Tensor::f32(out.data() + 2 * row, {3, 8, 8, 16})});
  for (auto& b : bufs) b.dim[3].min = 2;
  void* argv[] = {&bufs[0], &bufs[1], &bufs[2]};
  REQUIRE(m.entry()(argv) == 0);
  runtime::OwnedTensor got({3, 8, 8, 16}, runtime::DType::f32);
  std::copy(out.begin() + 2 * row, out.begin() + 5 * row, got.as<float>());
  CHECK(c.matches(got));
  CHECK(out[0] == -1.f);            // nothing written before the crop
  CHECK(out[5 * row] == -1.f);      // nor after it
}
