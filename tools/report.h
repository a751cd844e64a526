#pragma once

#include <string>
#include <vector>

namespace opfuse::tools {

struct ReportOptions {
  std::string models_dir;          // models/ of the source tree
  std::string out_dir = "report";  // results.json, summary.md, plans/
  double seconds_per_kernel = 0.25;
  std::string only;  // run only this model (empty: the whole zoo)
  // A Python with PyTorch for the eager / torch.compile rows (bench/torch_zoo.py); empty, or
  // one that cannot import torch: those rows are not measured.
  std::string python;
  // Which build of the zoo: "host", or an explicit ISA ("x86-avx2", "x86-avx512"), measured
  // against that ISA's roofline; Halide's autoschedulers are built for the host only.
  std::string target = "host";
  // Whole networks (ONNX files; tools/run.sh passes the corpus's dynamo exports): each run
  // through `run_tool` (opfuse-run, Halide's JIT), the planner's plan and the unfused one,
  // `network_reps` runs each; the fused plan's outputs checked against the reference executor.
  std::vector<std::string> networks;
  std::string run_tool;
  int network_reps = 20;
};

// The main job: plans every zoo model, checks each host kernel against the reference
// executor, times every strategy against the roofline measured in the same run, prints a
// table and writes the report folder. Returns 0 when every check passed.
int run_report(const ReportOptions& options);

}  // namespace opfuse::tools
