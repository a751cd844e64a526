// The generic graph generator: any graph file, any strategy, any target, ahead of time.
//
//   GeneratorParams  graph     the graph file (.json, or .onnx)
//                    strategy  fused | unfused | autoscheduler (set by CMake's AUTOSCHEDULER)
//                    profile   hardware profile for the cost model (default: "host", this
//                              machine measured for the target's ISA, on CPU targets; h200 on
//                              GPU targets)
//                    plan_out  where to write the plan JSON (the decision log)
//                    plan      a user's plan JSON to build instead of the planner's
//                    dims      sizes of symbolic dimensions, "batch:4" (fusion/frontend/dynamic.h)
//                    dispatch  one size's function of a dynamic dimension's library (its
//                              weights that depend on the size embedded); with weights_out,
//                              also the library's entry point (weights_entry.h, Dispatch)
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
#include <optional>
#include <thread>

#include "Halide.h"
#include "fusion/frontend/dynamic.h"
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
  // The weight arguments come from a weights file that another run of the generator writes (a
  // dynamic batch's other sizes): laid out as weights_out lays them out.
  GeneratorParam<bool> weights_from_file{"weights_from_file", false};
  // Sizes of the model's symbolic dimensions, "batch:4[,other:N]" (a generator parameter's
  // value holds no '='): the graph is built at them.
  GeneratorParam<std::string> dims{"dims", ""};
  // A dynamic library's dimensions, "SYMBOL:MIN..MAX:B1,B2,..." (a batch, served at every size
  // by slices) or "SYMBOL:exact:S1,S2,..." (those sizes), several joined by ';': one generator
  // run per combination of sizes, each making NAME_b<size>[x<size>...]_impl; the one with
  // weights_out writes the entry point that calls them (generators/weights_entry.h).
  GeneratorParam<std::string> dispatch{"dispatch", ""};

  void configure() {
    const std::string path = graph_file;
    const Target target = get_target();
    lanes_ = target.natural_vector_size(Float(32));
    _halide_user_assert(!path.empty())
        << "opfuse graph generator: set the 'graph' GeneratorParam to a graph file";
    try {
      std::vector<std::string> specs;  // "batch:4,other:2" -> batch=4, other=2
      const std::string list = dims;
      if (!list.empty()) specs = fusion::split_commas(list);
      for (auto& spec : specs) {
        if (const size_t colon = spec.find(':'); colon != std::string::npos) spec[colon] = '=';
      }
      bindings_ = fusion::parse_bindings(specs, "the generator's dims");
      load_.winograd = !target.has_gpu_feature();
      graph_ = fusion::load_model(path, bindings_, &rewrites_, load_);
      const std::string d = dispatch;
      if (!d.empty()) {
        dispatch_ = generators::parse_dispatch(d);
        compare_sizes();
      }
    } catch (const std::exception& e) {
      _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
    }
    _halide_user_assert(!(embed_weights && !std::string(weights_out).empty()))
        << "opfuse graph generator: embed_weights and weights_out exclude each other";
    // A weights file stores NHWC convolutions' and linear layers' weights packed (the same for
    // each function reading the file); the generated function's buffers for them have that
    // layout.
    if ((!std::string(weights_out).empty() || weights_from_file) && !target.has_gpu_feature() &&
        !using_autoscheduler()) {
      file_packed_ = schedules::file_packed_weights(graph_);
    }
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
      if (t.kind == graph::TensorKind::param && (embed_weights || own_params_.count(name))) continue;
      const Type type = ops::halide_type(t.dtype);
      const std::string c_name = declare(name);
      inputs_.push_back(
          {name, add_input<Buffer<>>(c_name, type, int(stored_extents(name).size()))});
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
    if (dispatch_) {
      for (size_t k = 0; k < dispatch_->dims.size(); ++k) {
        const std::string& symbol = dispatch_->dims[k].symbol;
        const auto& [other, other_size] = others_[k];
        for (const auto& a : args_) {
          if (a.kind == generators::PipelineArg::weight) continue;
          const graph::Shape &s1 = graph_.tensor(a.tensor).shape,
                             &s2 = other.tensor(a.tensor).shape;
          _halide_user_assert(s1.size() == s2.size())
              << "opfuse graph generator: '" << a.tensor << "' changes rank with " << symbol;
          auto& axes = dispatch_->axes[a.c_name];
          axes.resize(dispatch_->dims.size());
          for (size_t ax = 0; ax < s1.size(); ++ax) {
            if (s1[ax] == s2[ax]) continue;
            // The runtime and the entry point know an axis as the size itself, nothing else.
            _halide_user_assert(s1[ax] == bindings_.at(symbol) && s2[ax] == other_size)
                << "opfuse graph generator: '" << a.tensor << "' axis " << ax << " is " << s1[ax]
                << " at " << symbol << " = " << bindings_.at(symbol)
                << ": an axis of a dynamic library's argument must be the size itself";
            axes[k].push_back(int(ax));
          }
        }
      }
    }
  }

  // A dispatch's function: the model built at other sizes too, one dimension changed at a
  // time. Weights that differ (a causal mask or position ids cut to a sequence length) are
  // this function's own, embedded in it; the others are the weights file's, shared by every
  // function. Every function must agree on which weights are the file's: a listed dimension's
  // sizes (exact) are each compared with all the others; a batch's (separable: no weight
  // depends on it) with one other size.
  void compare_sizes() {
    for (const generators::DispatchDim& d : dispatch_->dims) {
      const int64_t here = bindings_.at(d.symbol);
      std::vector<int64_t> others;
      for (int64_t b : d.sizes) {
        if (b != here && (d.exact || others.empty())) others.push_back(b);
      }
      if (others.empty()) others.push_back(here + 1);
      for (int64_t other : others) {
        graph::DimBindings at = bindings_;
        at[d.symbol] = other;
        graph::Graph g2 = fusion::load_model(graph_file, at, nullptr, load_);
        for (const auto& name : graph_.params()) {
          if (!g2.has_tensor(name)) {
            throw std::runtime_error("weight '" + name + "' exists at " + d.symbol + " = " +
                                     std::to_string(here) + " but not at " + std::to_string(other) +
                                     ": the model's structure depends on it");
          }
          const graph::Tensor &a = graph_.tensor(name), &b = g2.tensor(name);
          if (a.shape != b.shape || graph::param_values(a).data != graph::param_values(b).data) {
            own_params_.insert(name);
          }
        }
        if (other == others.front()) others_.emplace_back(std::move(g2), other);
      }
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
    // Embedded weights that blocks read pre-packed are stored so in the object (no repack on
    // every call), as are a weights file's (file_packed_).
    const std::string weights_prefix = weights_out;
    const std::set<std::string> packed = autoscheduled ? std::set<std::string>{}
                                         : embed_weights
                                             ? schedules::weights_to_pack(graph_, records)
                                             : file_packed_;

    // --- Algorithm -------------------------------------------------------------------
    std::map<std::string, Func> sources;
    for (auto& [name, in] : inputs_) {
      sources[name] = Func(*in);
      if (const int block = stored_block(name); block > 0) {  // seen as the logical weights
        Func w(ops::halide_safe_name(name) + "_unpacked");
        const std::vector<Var> v =
            ops::halide_args(ops::make_vars(graph_.tensor(name).shape.size()));
        w(v) = Func(*in)(ops::packed_weight_index(v, block, graph_.tensor(name).shape[1]));
        sources[name] = w;
      }
    }
    if (embed_weights || !own_params_.empty()) {
      for (const auto& name : graph_.params()) {
        if (!embed_weights && !own_params_.count(name)) continue;
        const graph::Tensor& t = graph_.tensor(name);
        Buffer<> b = ops::tensor_buffer(t, graph::param_values(t));
        sources[name] = ops::buffer_source(ops::halide_safe_name(name) + "_const", b, t.shape,
                                           packed.count(name) > 0, lanes_);
        constants_.push_back(b);
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
    if (!weights_prefix.empty()) {
      try {
        generators::write_weights_entry(weights_prefix, graph_, args_, gpu,
                                        dispatch_ ? &*dispatch_ : nullptr, packed, lanes_);
      } catch (const std::exception& e) {
        _halide_user_error << "opfuse graph generator: " << e.what() << "\n";
      }
    }

    // --- Estimates -------------------------------------------------------------------
    for (auto& [name, in] : inputs_) {
      const std::vector<int> extents = stored_extents(name);
      Region r;
      for (int e : extents) r.emplace_back(0, e);
      in->set_estimates(r);
      for (size_t d = 0; d < extents.size(); ++d) in->dim(int(d)).set_bounds(0, extents[d]);
      const graph::Shape& s = graph_.tensor(name).shape;
      if (file_packed_.count(name) && s.size() == 4 && stored_block(name) == 0) {
        // Cout-innermost, as the weights file stores it: dims kw, kh, ci, co.
        in->dim(3).set_stride(1);
        in->dim(0).set_stride(int(s[0]));
        in->dim(1).set_stride(int(s[0] * s[3]));
        in->dim(2).set_stride(int(s[0] * s[3] * s[2]));
      }
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
  // A weight argument read from a weights file in blocks of output channels
  // (ops::pack_weights): the block, else 0.
  int stored_block(const std::string& tensor) const {
    if (!file_packed_.count(tensor)) return 0;
    return ops::weight_block(graph_.tensor(tensor).shape, lanes_);
  }
  // The extents (Halide's order) of an argument's buffer.
  std::vector<int> stored_extents(const std::string& tensor) const {
    const graph::Shape& s = graph_.tensor(tensor).shape;
    const int block = stored_block(tensor);
    return block > 0 ? ops::packed_weight_extents(s, block) : ops::halide_extents(s);
  }

  graph::Graph graph_;
  int lanes_ = 1;                      // the target's f32 vector lanes
  std::set<std::string> file_packed_;  // weights a weights file stores packed
  graph::DimBindings bindings_;        // the sizes the graph is built at
  std::optional<generators::Dispatch> dispatch_;
  // Per dispatch dimension: the model at another of its sizes, and that size.
  std::vector<std::pair<graph::Graph, int64_t>> others_;
  std::set<std::string> own_params_;  // weights of this size alone, embedded
  std::vector<std::string> rewrites_;  // canonicalisation of an ONNX model, for the plan log
  fusion::LoadOptions load_;           // the target's rewrites (no Winograd on a GPU)
  ops::LoweredGraph lowered_;
  std::vector<std::pair<std::string, Input<Buffer<>>*>> inputs_;
  std::vector<Buffer<>> constants_;  // embedded weights
  std::vector<Output<Buffer<>>*> outputs_;
  std::vector<generators::PipelineArg> args_;  // the generated function's, in order
};

}  // namespace

HALIDE_REGISTER_GENERATOR(GraphGenerator, opfuse_graph)
