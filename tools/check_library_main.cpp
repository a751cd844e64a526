// opfuse-check-library (also `opfuse check-library`): runs a compiled library on a model's
// random inputs through runtime::Model and compares every output with the reference executor.
//
//   opfuse check-library MODEL LIB.so [--dim NAME=N ...] [--seed S]
//
// Unlike `opfuse run --library`, this process never loads libHalide (no JIT, no planner):
// an OpenCL library (`opfuse compile --target host-opencl --shared`) runs here on PoCL, whose
// own LLVM must not meet libHalide's in one process. Exit 1 when an output differs.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "fusion/frontend/dynamic.h"
#include "fusion/frontend/load_model.h"
#include "fusion/reference/compare.h"
#include "fusion/reference/executor.h"
#include "tools/library_run.h"

using namespace opfuse;

int main(int argc, char** argv) {
  CLI::App app{"run a compiled library on a model's inputs and compare it with the reference"};
  std::string model_path, library;
  std::vector<std::string> dim_specs;
  uint64_t seed = 1;
  app.add_option("model", model_path, "the graph file (.json or .onnx) the library was built from")
      ->required();
  app.add_option("library", library, "the library (opfuse compile --shared)")->required();
  app.add_option("--dim", dim_specs, "NAME=N: a symbolic dimension's size, repeatable");
  app.add_option("--seed", seed, "seed of the random inputs (default 1, as opfuse run)");
  CLI11_PARSE(app, argc, argv);
  try {
    const graph::Graph g =
        fusion::load_model(model_path, fusion::parse_bindings(dim_specs, "check-library"));
    const graph::TensorMap in = graph::random_inputs(g, seed);
    tools::LibraryRun lib(library, g, in);
    lib.run();
    const graph::TensorMap got = lib.outputs();
    const graph::TensorMap want = reference::run(g, in);
    int bad = 0;
    for (const auto& name : g.outputs()) {
      const auto c = reference::compare(got.at(name).data, want.at(name).data,
                                        reference::kGraphTolerance);
      double sum = 0;
      for (float v : got.at(name).data) sum += v;
      std::printf("output %s %s sum %g  reference: %s\n", name.c_str(),
                  graph::shape_to_string(got.at(name).shape).c_str(), sum,
                  c.ok() ? "match" : ("MISMATCH (" + c.summary() + ")").c_str());
      bad += c.ok() ? 0 : 1;
    }
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opfuse check-library: %s\n", e.what());
    return 2;
  }
}
