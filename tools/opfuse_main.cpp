// opfuse: the command line.
//   opfuse demo                 run a fused kernel and check it against C++
//   opfuse check GRAPH [--run]  validate a graph file (.json or .onnx) and describe it
//   opfuse zoo --out DIR        write the built-in model zoo as graph files
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "tools/demo.h"
#include "tools/graph_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"opfuse: an operator-fusion compiler built on Halide"};
  app.require_subcommand(1);

  opfuse::tools::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand("demo", "run a fused kernel and check it against C++");
  demo_cmd->add_option("--elements", demo.elements, "tensor size")->check(CLI::Range(1, 1 << 28));
  demo_cmd->add_option("--repeats", demo.repeats, "timed calls")->check(CLI::Range(1, 10000));

  std::string graph_path;
  bool run_reference = false;
  CLI::App* check_cmd = app.add_subcommand("check", "validate a graph file and describe it");
  check_cmd->add_option("graph", graph_path, "graph file (.json or .onnx)")->required();
  check_cmd->add_flag("--run", run_reference, "also run the reference executor on random inputs");

  std::string zoo_dir = "models";
  CLI::App* zoo_cmd = app.add_subcommand("zoo", "write the built-in model zoo as graph files");
  zoo_cmd->add_option("--out", zoo_dir, "output folder (cpu/ and gpu/ inside)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*demo_cmd) return opfuse::tools::run_demo(demo);
    if (*check_cmd) return opfuse::tools::check_graph(graph_path, run_reference);
    if (*zoo_cmd) return opfuse::tools::write_zoo(zoo_dir);
  } catch (const std::exception& e) {
    std::cerr << "opfuse: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
