#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::tools {

// `opfuse zoo --out DIR`: writes every zoo model at both sizes as DIR/<size>/<name>.json.
int write_zoo(const std::string& out_dir);

// `opfuse check GRAPH`: loads a .json or .onnx graph, validates it and prints its nodes with
// fusion kind and output shape; runs it through the reference executor when `run` is set.
// `dims`: NAME=N sizes of symbolic dimensions; each symbol not given is analysed (how one
// compiled library serves its sizes, fusion/frontend/dynamic.h) and the graph shown at 1.
int check_graph(const std::string& path, bool run, const std::vector<std::string>& dims = {});

struct PlanCommand {
  std::string graph;
  std::string profile = "host";
  std::string cost_model = "roofline";  // or learned:WEIGHTS.json
  std::string rules;                    // extra rule file
  std::string json_out;                 // write the plan JSON here
  std::string dot_out;                  // write the DOT rendering here
  bool no_fusion = false;
  double latency_bound_us = 0;
  double time_limit_s = 0;    // planner budget; 0: none
  double p99_bound_us = 0;    // 7.7 T_max
  double jitter_bound = 1.2;  // 7.7 jitter_fused < jitter_bound * jitter_unfused
  std::string measured;       // an `opfuse explore` folder with measured distributions
  bool show_log = false;
  std::vector<std::string> dims;  // NAME=N sizes of symbolic dimensions
};

// `opfuse plan GRAPH`: plans fusion and prints the plan as a table with its reasons.
int plan_command(const PlanCommand& c);

struct CompileCommand {
  std::string model;
  std::string target = "host";
  std::string out_dir;
  std::string name;  // default: the model file's stem, made a C identifier
  std::string strategy = "fused";
  std::string profile;
  std::string plan;
  // Where the weights go: "embed" (constant data in the library), "file" (NAME.weights beside
  // it, loaded and checked by the library), "args" (every weight a buffer argument), or
  // "auto": embedded up to embed_limit_mib, else a file.
  std::string weights = "auto";
  double embed_limit_mib = 128;
  bool shared = false;  // also NAME.so, for runtime::Model::open
  // NAME=N (built at that size) or NAME=MIN..MAX (a dynamic batch: one library for the range).
  std::vector<std::string> dims;
  std::vector<int64_t> buckets;  // a dynamic batch's generated sizes; empty: the default
};

// `opfuse compile MODEL --target T --out DIR`: runs the graph generator (`generator`, the
// same the CMake function runs) to write DIR/<name>.a, DIR/<name>.h and DIR/<name>.plan.json
// (and DIR/<name>.weights, DIR/<name>.so as asked).
int compile_command(const CompileCommand& c, const std::string& generator);

// `opfuse calibrate --out FILE`: measures this machine and writes its profile.
int calibrate_command(const std::string& out, bool quick, bool host = false);

}  // namespace opfuse::tools
