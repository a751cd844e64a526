// The generic graph generator: any graph file, any strategy, any target, ahead of time.
//
//   GeneratorParams  graph     the graph file (.json, or .onnx)
//                    strategy  fused | unfused | autoscheduler (set by CMake's AUTOSCHEDULER)
//                    profile   hardware profile for the cost model (default: "host", this
//                              machine measured for the target's ISA, on CPU targets; h200 on
//                              GPU targets)
//                    plan_out  where to write the plan JSON (the decision log)
//                    plan      a user's plan JSON to build instead of the planner's
//
//                    embed_weights  params as constant data inside the library (opfuse
//                              compile's default for models up to its --embed-limit): the
//                              function takes inputs and outputs only
//                    weights_out  DIR/NAME: params in a weights file, DIR/NAME.weights, with
//                              DIR/NAME_entry.cpp, the entry point NAME taking inputs and
//                              outputs only, and its header DIR/NAME.h; the generated function
//                              (named NAME_impl by the caller) takes the params as arguments
//                              (generators/weights_entry.h)
//
// The C ABI of the generated function: every graph input, then every param (weights; none
// with embed_weights), in declaration order, then every graph output, each a halide_buffer_t in row-major order
// (Halide dimension 0 is the tensor's last axis); names are the tensor names made C-safe.
#include <fstream>
#include <thread>

#include "Halide.h"
#include "fusion/frontend/load_model.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "fusion/planner/planner.h"
#include "generators/weights_entry.h"
#include "schedules/emitter.h"

namespace {

using namespace Halide;
using namespace opfuse;

class GraphGenerator : public Generator<GraphGenerator> {
 public:
  GeneratorParam<std::string> graph_file{"graph", ""};
  GeneratorParam<std::string> strategy{"strategy", "fused"};
  GeneratorParam<std::string> profile{"profile", ""};
  GeneratorParam<std::string> plan_out{"plan_out", ""};
  // A plan JSON whose groups replace the planner's (strategy fused): opfuse checks them and
  // schedules them as given.
  GeneratorParam<std::string> plan_in{"plan", ""};
  // Weights inside the library: every param becomes constant data of the object file, and
  // the generated function takes the graph's inputs and outputs only.
  GeneratorParam<bool> embed_weights{"embed_weights", false};
  // Weights in a file beside the library, loaded and checked by its entry point.
  GeneratorParam<std::string> weights_out{"weights_out", ""};

  void configure() {
    const std::string path = graph_file;
    _halide_user_assert(!path.empty())
        << "opfuse graph generator: set the 'graph' GeneratorParam to a graph file";
    try {
      graph_ = fusion::load_model(path, &rewrites_);
    } catch (const std::exception& e) {
      _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
    }
    _halide_user_assert(!(embed_weights && !std::string(weights_out).empty()))
        << "opfuse graph generator: embed_weights and weights_out exclude each other";
    std::set<std::string> names;
    auto declare = [&](const std::string& tensor) {
      const std::string name = ops::halide_safe_name(tensor);
      _halide_user_assert(names.insert(name).second)
          << "opfuse graph generator: two tensors of " << path << " map to the C name " << name;
      return name;
    };
    for (const auto& name : graph_.tensor_names()) {
      const graph::Tensor& t = graph_.tensor(name);
      if (t.kind == graph::TensorKind::intermediate) continue;
      if (t.kind == graph::TensorKind::param && embed_weights) continue;
      const Type type = ops::halide_type(t.dtype);
      const std::string c_name = declare(name);
      inputs_.push_back({name, add_input<Buffer<>>(c_name, type, int(t.shape.size()))});
      args_.push_back({name, c_name,
                       t.kind == graph::TensorKind::param ? generators::PipelineArg::weight
                                                          : generators::PipelineArg::input,
                       type});
    }
    for (const auto& name : graph_.outputs()) {
      const graph::Tensor& t = graph_.tensor(name);
      const Type type = ops::halide_type(t.dtype);
      const std::string c_name = declare(name + "_out");
      outputs_.push_back(add_output<Buffer<>>(c_name, type, int(t.shape.size())));
      args_.push_back({name, c_name, generators::PipelineArg::output, type});
    }
  }

  void generate() {
    // --- Plan and records (they need the graph and the target only) ------------------
    const std::string strat = strategy;
    const bool autoscheduled = using_autoscheduler();
    _halide_user_assert(autoscheduled || strat == "fused" || strat == "unfused")
        << "opfuse graph generator: strategy '" << strat
        << "' is neither fused nor unfused, and no autoscheduler was set";
    const bool gpu = get_target().has_gpu_feature();
    schedules::PipelineSchedule records;
    if (!autoscheduled) records = plan_and_schedule(gpu);
    // Embedded weights that blocks read Cout-innermost are stored so in the object: no
    // repack on every call.
    const std::set<std::string> packed =
        embed_weights && !autoscheduled ? schedules::weights_to_pack(graph_, records)
                                        : std::set<std::string>{};

    // --- Algorithm -------------------------------------------------------------------
    std::map<std::string, Func> sources;
    for (auto& [name, in] : inputs_) sources[name] = Func(*in);
    if (embed_weights) {
      for (const auto& name : graph_.params()) {
        const graph::Tensor& t = graph_.tensor(name);
        Buffer<> b = ops::tensor_buffer(t, graph::param_values(t));
        if (packed.count(name)) b = ops::cout_innermost(b);
        constants_.push_back(b);
        Func c(ops::halide_safe_name(name) + "_const");
        const std::vector<Var> v = ops::halide_args(ops::make_vars(t.shape.size()));
        c(v) = b(std::vector<Expr>(v.begin(), v.end()));
        sources[name] = c;
      }
    }
    lowered_ = ops::lower(graph_, sources);
    schedules::Pipeline pipe{&graph_, &lowered_, {}, packed};
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const graph::Tensor& t = graph_.tensor(graph_.outputs()[i]);
      std::vector<Var> v = ops::halide_args(ops::make_vars(t.shape.size()));
      Expr e = lowered_.outputs[i](std::vector<Expr>(v.begin(), v.end()));
      (*outputs_[i])(v) = t.dtype == graph::DType::f16 ? cast(Float(16), e) : e;
      pipe.outputs.push_back(Func(*outputs_[i]));
    }
    const std::string weights_prefix = weights_out;
    if (!weights_prefix.empty()) {
      try {
        generators::write_weights_entry(weights_prefix, graph_, args_, gpu);
      } catch (const std::exception& e) {
        _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
      }
    }

    // --- Estimates -------------------------------------------------------------------
    for (auto& [name, in] : inputs_) {
      const graph::Shape& s = graph_.tensor(name).shape;
      Region r;
      for (auto it = s.rbegin(); it != s.rend(); ++it) r.emplace_back(0, int(*it));
      in->set_estimates(r);
      for (size_t d = 0; d < s.size(); ++d) in->dim(int(d)).set_bounds(0, int(s[s.size() - 1 - d]));
    }
    schedules::set_output_estimates(pipe);
    schedules::bound_outputs(pipe);  // static shapes: exact regions, no over-approximation

    // --- Schedule --------------------------------------------------------------------
    if (autoscheduled) return;
    schedules::apply_schedule(pipe, records);
  }

  // The plan (the planner's, or a user's) and its records; writes the plan JSON.
  schedules::PipelineSchedule plan_and_schedule(bool gpu) {
    // The default: on a GPU target the H200's, on a CPU target this machine's, measured once
    // (fusion/hardware/host.h) for the ISA being compiled for, which may not be the host's.
    const std::string prof =
        std::string(profile).empty() ? (gpu ? "h200" : "host") : std::string(profile);
    fusion::HardwareProfile hw;
    try {
      hw = schedules::profile_for(prof, get_target());
    } catch (const std::exception& e) {
      _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
    }
    const fusion::RooflineCostModel model(hw);
    fusion::PlannerOptions options;
    options.enable_fusion = std::string(strategy) == "fused";
    const std::string user_plan = plan_in;
    fusion::FusionPlan plan;
    if (!user_plan.empty() && options.enable_fusion) {
      try {
        plan = fusion::plan_from_user_groups(graph_, model,
                                             fusion::user_groups_from_plan_file(user_plan));
      } catch (const std::exception& e) {
        _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
      }
    } else {
      plan = fusion::plan_fusion(graph_, model, options);
    }
    plan.log.insert(plan.log.begin(), rewrites_.begin(), rewrites_.end());
    const int cores = gpu ? 1 : int(std::max(1u, std::thread::hardware_concurrency()));
    schedules::PipelineSchedule records;
    try {
      records = schedules::schedule_plan(graph_, plan, schedules::target_facts(get_target(), hw, cores));
    } catch (const std::exception& e) {
      _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
    }
    const std::string out = plan_out;
    if (!out.empty()) {
      std::ofstream f(out);
      f << schedules::plan_to_json(plan, records);  // the records are what is emitted
    }
    return records;
  }

 private:
  graph::Graph graph_;
  std::vector<std::string> rewrites_;  // canonicalisation of an ONNX model, for the plan log
  ops::LoweredGraph lowered_;
  std::vector<std::pair<std::string, Input<Buffer<>>*>> inputs_;
  std::vector<Buffer<>> constants_;  // embedded weights
  std::vector<Output<Buffer<>>*> outputs_;
  std::vector<generators::PipelineArg> args_;  // the generated function's, in order
};

}  // namespace

HALIDE_REGISTER_GENERATOR(GraphGenerator, opfuse_graph)
