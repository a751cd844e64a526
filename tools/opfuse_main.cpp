// opfuse: the command line.
//   opfuse demo                 the zoo: plans, checks, timings against the roofline, report
//   opfuse check GRAPH [--run]  validate a graph file (.json or .onnx) and describe it
//   opfuse zoo --out DIR        write the built-in model zoo as graph files
//   opfuse plan GRAPH           plan fusion and explain it
//   opfuse calibrate            measure this machine's profile
//   opfuse calibrate-anchors    each anchor class's share of the peak here, into the host
//                               profile (opfuse-calibrate-anchors: JIT)
//   opfuse explore ...          measured schedule exploration (runs opfuse-explore)
//   opfuse compile MODEL        a fused library, its header and its plan, AOT (the generator)
//   opfuse run MODEL            the fused plan through the JIT, for a quick check (opfuse-run)
//   opfuse check-library MODEL LIB  a compiled library against the reference, no libHalide
//                               (opfuse-check-library: an OpenCL library runs on PoCL)
#include <cstdlib>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <vector>

#include "tools/graph_commands.h"
#include "tools/report.h"

namespace {

// The tool NAME beside this executable (build/tools/).
std::string sibling_path(const char* argv0, const char* name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(argv0) : self).parent_path() / name;
}

// `opfuse explore` and `opfuse run` are opfuse-explore and opfuse-run, beside this binary:
// they JIT-compile with Halide, which must not share a process with the AOT kernels' OpenCL
// runtime (two LLVMs).
int exec_sibling(const char* name, int argc, char** argv) {
  const std::string tool = sibling_path(argv[0], name);
  std::vector<char*> args{const_cast<char*>(tool.c_str())};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(tool.c_str(), args.data());
  std::cerr << "opfuse: cannot run " << tool << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "explore") == 0) {
    return exec_sibling("opfuse-explore", argc, argv);
  }
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return exec_sibling("opfuse-run", argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "check-library") == 0) {
    return exec_sibling("opfuse-check-library", argc, argv);
  }
  if (argc >= 2 && std::strcmp(argv[1], "calibrate-anchors") == 0) {
    return exec_sibling("opfuse-calibrate-anchors", argc, argv);
  }
  CLI::App app{"opfuse: an operator-fusion compiler built on Halide"};
  app.require_subcommand(1);

  opfuse::tools::ReportOptions demo;
  demo.models_dir = OPFUSE_MODELS_DIR;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo",
      "the zoo: plan, check against the reference, and time fused vs unfused vs autoschedulers");
  demo_cmd->add_option("--out", demo.out_dir, "report folder");
  demo_cmd->add_option("--model", demo.only, "only this zoo model");
  demo_cmd->add_option("--target", demo.target,
                       "the zoo's build to measure: host (default), x86-avx2, x86-avx512");
  // PyTorch rows come from the project venv (tools/setup.sh exports OPFUSE_VENV) when it has
  // torch (OPFUSE_WITH_TORCH=1).
  if (const char* venv = std::getenv("OPFUSE_VENV")) demo.python = std::string(venv) + "/bin/python";
  demo_cmd->add_option("--python", demo.python,
                       "a Python with PyTorch, for the eager and torch.compile rows");
  demo_cmd->add_option("--seconds", demo.seconds_per_kernel, "timing budget per kernel")
      ->check(CLI::Range(0.01, 60.0));
  demo_cmd
      ->add_option("--network", demo.networks,
                   "a whole network (.onnx), repeatable: fused and unfused through the JIT, "
                   "checked against the reference (tools/run.sh passes the corpus's)")
      ->check(CLI::ExistingFile);
  demo_cmd->add_option("--network-reps", demo.network_reps, "timed runs a network plan")
      ->check(CLI::Range(1, 1000));
  demo.run_tool = sibling_path(argv[0], "opfuse-run");

  std::string graph_path;
  bool run_reference = false;
  CLI::App* check_cmd = app.add_subcommand("check", "validate a graph file and describe it");
  check_cmd->add_option("graph", graph_path, "graph file (.json or .onnx)")->required();
  check_cmd->add_flag("--run", run_reference, "also run the reference executor on random inputs");
  std::vector<std::string> check_dims;
  check_cmd->add_option("--dim", check_dims, "NAME=N: a symbolic dimension's size, repeatable");

  std::string zoo_dir = "models";
  CLI::App* zoo_cmd = app.add_subcommand("zoo", "write the built-in model zoo as graph files");
  zoo_cmd->add_option("--out", zoo_dir, "output folder (cpu/ and gpu/ inside)");

  opfuse::tools::PlanCommand plan;
  CLI::App* plan_cmd = app.add_subcommand("plan", "plan fusion for a graph and explain each group");
  plan_cmd->add_option("graph", plan.graph, "graph file (.json or .onnx)")->required();
  plan_cmd->add_option("--profile", plan.profile,
                       "hardware profile: host (default: this machine, measured once), epyc-avx512-2c, x86-avx2-8c, h200, or a .json file");
  plan_cmd->add_option("--cost-model", plan.cost_model,
                       "roofline (default) or learned:WEIGHTS.json (opfuse explore learn)");
  plan_cmd->add_option("--rules", plan.rules, "extra fusion rules, one 'name: pattern' a line");
  plan_cmd->add_option("--json", plan.json_out, "write the plan (decision log) as JSON");
  plan_cmd->add_option("--dot", plan.dot_out, "write the plan as a DOT graph");
  plan_cmd->add_option("--latency-bound-us", plan.latency_bound_us, "L_max on the critical path");
  plan_cmd
      ->add_option("--time-limit", plan.time_limit_s,
                   "planner wall-time budget, seconds: past it the plan found so far stands "
                   "(legal, never costlier than unfused), and the log says so")
      ->check(CLI::NonNegativeNumber);
  plan_cmd->add_option("--p99-bound-us", plan.p99_bound_us,
                       "7.7 T_max: fuse only if T99_fused < T_max (else the unfused plan)");
  plan_cmd->add_option("--jitter-bound", plan.jitter_bound,
                       "7.7: fuse only if jitter_fused < this x jitter_unfused (default 1.2)");
  plan_cmd->add_option("--measured", plan.measured,
                       "an `opfuse explore` folder: measured p50/p99 for the tail bounds");
  plan_cmd->add_flag("--no-fusion", plan.no_fusion, "the unfused plan");
  plan_cmd->add_flag("--log", plan.show_log, "print every decision");
  plan_cmd->add_option("--dim", plan.dims, "NAME=N: a symbolic dimension's size, repeatable");

  std::string calibrate_out = "profile.json";
  bool calibrate_quick = false;
  CLI::App* calibrate_cmd =
      app.add_subcommand("calibrate", "measure this machine's hardware profile");
  calibrate_cmd->add_option("--out", calibrate_out, "profile JSON to write");
  calibrate_cmd->add_flag("--quick", calibrate_quick, "short measurements");
  bool calibrate_host = false;
  calibrate_cmd->add_flag("--host", calibrate_host,
                          "write the `host` profile the planner uses (its cached measurement, "
                          "made now if none is cached) instead of measuring anew");

  opfuse::tools::CompileCommand compile;
  CLI::App* compile_cmd = app.add_subcommand(
      "compile", "AOT: a fused library (.a), its header and its plan for a model (.json or .onnx)");
  compile_cmd->add_option("model", compile.model, "graph file (.json or .onnx)")->required();
  compile_cmd->add_option("--target", compile.target,
                          "host, x86-avx2, x86-avx512, host-opencl or host-cuda")
      ->check(CLI::IsMember({"host", "x86-avx2", "x86-avx512", "host-opencl", "host-cuda"}));
  compile_cmd->add_option("--out", compile.out_dir, "output folder")->required();
  compile_cmd->add_option("--name", compile.name, "function name (default: from the file name)");
  compile_cmd->add_option("--strategy", compile.strategy, "fused or unfused")
      ->check(CLI::IsMember({"fused", "unfused"}));
  compile_cmd->add_option("--profile", compile.profile, "hardware profile for the planner");
  compile_cmd->add_option("--plan", compile.plan, "a plan JSON to build instead of the planner's");
  compile_cmd->add_option("--weights", compile.weights,
                          "embed: constant data inside the library; file: NAME.weights beside "
                          "it, loaded and checked by the library; args: every weight a buffer "
                          "argument; auto (default): embed up to --embed-limit, else file")
      ->check(CLI::IsMember({"auto", "embed", "file", "args"}));
  compile_cmd->add_option("--embed-limit", compile.embed_limit_mib,
                          "MiB of weights up to which auto embeds them (default 128)");
  compile_cmd->add_flag("--shared", compile.shared,
                        "also link NAME.so, for opfuse::runtime::Model::open");
  compile_cmd->add_option("--dim", compile.dims,
                          "NAME=N: a symbolic dimension built at one size; NAME=MIN..MAX: a "
                          "dynamic one (a batch), every size in the range served by one library");
  compile_cmd->add_option("--buckets", compile.buckets,
                          "a dynamic batch's sizes with a generated function each (default: "
                          "the powers of two up to 4 within the range; 1 always), e.g. 1,2,4,8")
      ->delimiter(',');
  compile_cmd->footer(
      "`opfuse run MODEL [--input NAME=FILE] [--check] [--reps N]` runs the fused plan through "
      "the JIT for a quick check.");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*demo_cmd) return opfuse::tools::run_report(demo);
    if (*check_cmd) return opfuse::tools::check_graph(graph_path, run_reference, check_dims);
    if (*zoo_cmd) return opfuse::tools::write_zoo(zoo_dir);
    if (*plan_cmd) return opfuse::tools::plan_command(plan);
    if (*calibrate_cmd)
      return opfuse::tools::calibrate_command(calibrate_out, calibrate_quick, calibrate_host);
    if (*compile_cmd) return opfuse::tools::compile_command(compile, OPFUSE_GENERATOR);
  } catch (const std::exception& e) {
    std::cerr << "opfuse: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
