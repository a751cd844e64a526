// opfuse: the command line. `opfuse demo` runs a fused kernel and checks it.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "tools/demo.h"

int main(int argc, char** argv) {
  CLI::App app{"opfuse: an operator-fusion compiler built on Halide"};
  app.require_subcommand(1);

  opfuse::tools::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand("demo", "run a fused kernel and check it against C++");
  demo_cmd->add_option("--elements", demo.elements, "tensor size")->check(CLI::Range(1, 1 << 28));
  demo_cmd->add_option("--repeats", demo.repeats, "timed calls")->check(CLI::Range(1, 10000));

  CLI11_PARSE(app, argc, argv);
  try {
    if (*demo_cmd) return opfuse::tools::run_demo(demo);
  } catch (const std::exception& e) {
    std::cerr << "opfuse: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
