#include "tools/graph_commands.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

#include "fusion/frontend/dynamic.h"
#include "fusion/frontend/load_model.h"
#include "fusion/graph/json_io.h"
#include "fusion/graph/op_schema.h"
#include "fusion/graph/zoo.h"
#include "fusion/hardware/calibrate.h"
#include "fusion/hardware/host.h"
#include "fusion/planner/planner.h"
#include "fusion/reference/executor.h"
#include "generators/dispatch.h"
#include "schedules/group_schedule.h"
#include "tools/explore/explore.h"

namespace opfuse::tools {

namespace fs = std::filesystem;

namespace {

// Writes `text` to `path` and says so; std::runtime_error if it cannot.
void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int write_zoo(const std::string& out_dir) {
  for (graph::ZooSize size : {graph::ZooSize::cpu, graph::ZooSize::gpu}) {
    const fs::path dir = fs::path(out_dir) / graph::to_string(size);
    fs::create_directories(dir);
    for (const auto& name : graph::zoo_names()) {
      const fs::path file = dir / (name + ".json");
      graph::save_graph_json(graph::zoo_model(name, size), file.string());
      std::printf("wrote %s\n", file.c_str());
    }
  }
  return 0;
}

int check_graph(const std::string& path, bool run, const std::vector<std::string>& dim_specs) {
  const graph::DimBindings dims = fusion::parse_bindings(dim_specs, "opfuse check");
  const auto declared = fusion::declared_symbols(path);
  graph::DimBindings shown = dims;
  for (const auto& [symbol, uses] : declared) {
    if (dims.count(symbol)) continue;
    const std::string where = fusion::uses_to_string(uses);
    graph::DimBindings others = dims;
    for (const auto& [s, u] : declared) {
      if (s != symbol && !others.count(s)) others[s] = 1;
    }
    const fusion::SymbolBehaviour b = fusion::analyse_symbol(path, symbol, others);
    if (b.separable) {
      std::printf("symbol %s (%s): separable along axis 0 of %zu tensors; a library serves any "
                  "size (opfuse compile --dim %s=MIN..MAX)\n",
                  symbol.c_str(), where.c_str(), b.tensors.size(), symbol.c_str());
    } else {
      std::printf("symbol %s (%s): not separable: %s\n", symbol.c_str(), where.c_str(),
                  b.why_not.c_str());
    }
    shown[symbol] = 1;
    std::printf("  shown below at %s = 1\n", symbol.c_str());
  }
  std::vector<std::string> rewrites;
  const graph::Graph g = fusion::load_model(path, shown, &rewrites);
  for (const auto& r : rewrites) std::printf("%s\n", r.c_str());
  std::printf("graph '%s': %zu nodes, %zu inputs, %zu params, %zu outputs - valid\n",
              g.name.c_str(), g.nodes().size(), g.inputs().size(), g.params().size(),
              g.outputs().size());
  for (const auto& name : g.inputs()) {
    const graph::Tensor& t = g.tensor(name);
    std::printf("  input %-18s %-4s %s", name.c_str(), graph::to_string(t.dtype),
                graph::shape_to_string(t.shape).c_str());
    if (graph::is_integer(t.dtype)) {  // what random inputs (and peers' inputs) may hold
      std::printf("  values in [0, %lld)", static_cast<long long>(graph::index_bound(g, name)));
    }
    std::printf("\n");
  }
  std::printf("  %-24s %-16s %-24s %s\n", "node", "op", "fusion kind", "output shape");
  for (size_t i : g.topo_order()) {
    const graph::Node& n = g.nodes()[i];
    std::printf("  %-24s %-16s %-24s %s\n", n.name.c_str(), n.op.c_str(),
                graph::to_string(graph::schema_of(n).kind),
                graph::shape_to_string(g.tensor(n.outputs[0]).shape).c_str());
  }
  if (run) {
    const auto t0 = std::chrono::steady_clock::now();
    graph::TensorMap values = reference::run(g, graph::random_inputs(g, 1));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& out : g.outputs()) {
      const graph::HostTensor& t = values.at(out);
      double sum = 0;
      for (float v : t.data) sum += v;
      std::printf("  reference output %-16s %s  sum %.6g\n", out.c_str(),
                  graph::shape_to_string(t.shape).c_str(), sum);
    }
    std::printf("  reference executor: %.3f s\n", s);
  }
  return 0;
}

int plan_command(const PlanCommand& c) {
  std::vector<std::string> rewrites;
  const graph::Graph g = fusion::load_model(c.graph, fusion::parse_bindings(c.dims, "opfuse plan"), &rewrites);
  const fusion::HardwareProfile profile = fusion::load_profile(c.profile);
  const std::unique_ptr<fusion::CostModel> model_ptr =
      fusion::make_cost_model(c.cost_model, profile);
  const fusion::CostModel& model = *model_ptr;
  fusion::PlannerOptions options;
  options.enable_fusion = !c.no_fusion;
  options.latency_bound_s = c.latency_bound_us * 1e-6;
  options.p99_bound_s = c.p99_bound_us * 1e-6;
  options.time_limit_s = c.time_limit_s;
  options.jitter_bound = c.jitter_bound;
  if (!c.measured.empty()) {
    options.measured_tail =
        explore::tail_of(explore::merge_results({c.measured + "/results.jsonl"}));
    if (!options.measured_tail) {
      throw std::invalid_argument(c.measured + ": no measured planner and unfused plans in it");
    }
  }
  if (!c.rules.empty()) {
    for (auto& r : fusion::load_rules(c.rules)) options.rules.push_back(std::move(r));
  }
  fusion::FusionPlan plan = fusion::plan_fusion(g, model, options);
  plan.log.insert(plan.log.begin(), rewrites.begin(), rewrites.end());
  for (const auto& r : rewrites) std::printf("%s\n", r.c_str());
  // The records the generator would emit for this profile's target.
  const schedules::PipelineSchedule records = schedules::schedule_plan(g, plan, schedules::facts_of(profile));
  std::fputs(fusion::plan_to_table(plan).c_str(), stdout);
  std::printf("schedule records (%s, %d cores):\n",
              records.target.gpu ? "GPU" : (std::to_string(records.target.lanes) + " f32 lanes, " +
                                            std::to_string(records.target.vector_registers) +
                                            " vector registers").c_str(),
              records.target.cores);
  std::fputs(schedules::schedule_to_table(records).c_str(), stdout);
  if (c.show_log) {
    std::printf("decision log:\n");
    for (const auto& l : plan.log) std::printf("  %s\n", l.c_str());
  }
  if (!c.json_out.empty()) write_file(c.json_out, schedules::plan_to_json(plan, records));
  if (!c.dot_out.empty()) {
    write_file(c.dot_out, fusion::plan_to_dot(plan, g, schedules::schedule_notes(records)));
  }
  return 0;
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

void run_or_throw(const std::string& cmd, const std::string& what) {
  if (std::system(cmd.c_str()) != 0) {
    throw std::runtime_error(what + " failed (command: " + cmd + ")");
  }
}

// The C++ compiler for the weights file's entry point and for --shared: $CXX, else the one
// opfuse was built with.
std::string cxx() {
  const char* env = std::getenv("CXX");
  return env && *env ? env : OPFUSE_CXX;
}

// NAME_entry.cpp (the weights file's entry point) -> NAME_entry.o.
std::string compile_entry(const std::string& dir, const std::string& name) {
  const std::string entry = dir + name + "_entry";
  run_or_throw(shell_quote(cxx()) + " -O2 -fPIC -std=c++17 -I" + shell_quote(OPFUSE_HALIDE_INCLUDE) +
                   " -c " + shell_quote(entry + ".cpp") + " -o " + shell_quote(entry + ".o"),
               "compiling the entry point " + entry + ".cpp");
  return entry + ".o";
}

// NAME.a -> NAME.so. -Bsymbolic: the library's calls bind to its own Halide runtime, never
// to one a host program exports.
void link_shared(const std::string& dir, const std::string& name) {
  run_or_throw(shell_quote(cxx()) + " -shared -o " + shell_quote(dir + name + ".so") +
                   " -Wl,--whole-archive " + shell_quote(dir + name + ".a") +
                   " -Wl,--no-whole-archive -Wl,-Bsymbolic -lpthread -ldl",
               "linking " + dir + name + ".so");
}

// The generator's `dims`: SYMBOL:N,... (a generator parameter's value holds no '=').
std::string dims_param(const graph::DimBindings& dims) {
  std::string s;
  for (const auto& [symbol, size] : dims) s += (s.empty() ? "" : ",") + symbol + ":" + std::to_string(size);
  return s;
}

// The generator on `c.model` making the function `fn` (files DIR/fn.*) for `target`, with the
// options every build shares; the caller appends its own.
std::string generator_command(const CompileCommand& c, const std::string& generator,
                              const std::string& fn, const std::string& emit,
                              const std::string& target, const std::string& plan_out,
                              const graph::DimBindings& dims) {
  std::string cmd = shell_quote(generator) + " -g opfuse_graph -o " + shell_quote(c.out_dir) +
                    " -f " + shell_quote(fn) + " -n " + shell_quote(fn) + " -e " + emit +
                    " target=" + target +
                    " graph=" + shell_quote(fs::absolute(c.model).string()) +
                    " strategy=" + c.strategy + " plan_out=" + shell_quote(plan_out);
  if (!c.profile.empty()) cmd += " profile=" + shell_quote(c.profile);
  if (!c.plan.empty()) cmd += " plan=" + shell_quote(fs::absolute(c.plan).string());
  if (!dims.empty()) cmd += " dims=" + shell_quote(dims_param(dims));
  return cmd;
}

// Runs the generator for `weights` (embed, file or args) and makes the library's files.
int build_library(const CompileCommand& c, const std::string& generator, const std::string& name,
                  const std::string& target, const std::string& weights, double weight_bytes,
                  const graph::DimBindings& dims) {
  const bool cuda = c.target == "host-cuda";
  const bool file = weights == "file";
  fs::create_directories(c.out_dir);
  const std::string dir = c.out_dir + "/";
  // With a weights file the generated function is NAME_impl; NAME is the entry point that
  // loads the weights and calls it.
  const std::string fn = file ? name + "_impl" : name;
  std::string cmd = generator_command(c, generator, fn,
                                      std::string("static_library,h,stmt") + (cuda ? ",device_code" : ""),
                                      target, dir + name + ".plan.json", dims);
  if (weights == "embed") cmd += " embed_weights=true";
  if (file) cmd += " weights_out=" + shell_quote(fs::absolute(dir + name).string());
  std::printf("compiling %s for %s (%s, %.1f MiB of weights: %s)...\n", c.model.c_str(),
              target.c_str(), c.strategy.c_str(), weight_bytes / 1048576.0,
              weights == "embed" ? "inside the library"
                                 : file ? "in a weights file" : "as arguments");
  run_or_throw(cmd, "the generator on " + c.model);
  if (file) {
    // The entry point joins the generated code in one archive; the rest is renamed to NAME.
    const std::string entry = dir + name + "_entry";
    compile_entry(dir, name);
    fs::rename(dir + fn + ".a", dir + name + ".a");
    run_or_throw("ar rcs " + shell_quote(dir + name + ".a") + " " + shell_quote(entry + ".o"),
                 "adding the entry point to " + dir + name + ".a");
    fs::rename(dir + fn + ".stmt", dir + name + ".stmt");
    if (cuda) fs::rename(dir + fn + ".device_code", dir + name + ".device_code");
    for (const std::string& f : {entry + ".o", entry + ".cpp", dir + fn + ".h"}) fs::remove(f);
  }
  if (c.shared) link_shared(dir, name);
  std::printf("wrote %s%s.a%s, %s.h (C ABI: %s, as halide_buffer_t*), %s.plan.json%s%s\n",
              dir.c_str(), name.c_str(), c.shared ? (", " + name + ".so").c_str() : "",
              name.c_str(),
              weights == "args" ? "inputs, then params, then outputs"
                                : "inputs, then outputs",
              name.c_str(), file ? (", " + name + ".weights (loaded by the library)").c_str() : "",
              cuda ? (", " + name + ".device_code (the PTX)").c_str() : "");
  return 0;
}

}  // namespace

// A dynamic library (exercise 7.6): one generated function per combination of its
// dimensions' sizes, all taking the weights of one file, and an entry point that serves them
// (generators/weights_entry.h, Dispatch). A range (a batch) is served at any size by running
// functions on slices of it; slicing is exact only when samples are independent, which the
// model is checked for first (fusion/frontend/dynamic.h); a symbol that is not (a sequence
// length) is refused a range and takes a list of sizes, a function each.
int build_dynamic_library(const CompileCommand& c, const std::string& generator,
                          const std::string& name, const std::string& target,
                          const std::vector<fusion::DimRange>& ranges,
                          const graph::DimBindings& fixed, double weight_bytes) {
  std::string symbols;
  for (const auto& r : ranges) symbols += (symbols.empty() ? "" : " and ") + r.symbol;
  if (c.target == "host-opencl" || c.target == "host-cuda") {
    throw std::invalid_argument("a dynamic " + symbols + " is built for CPU targets only; for " +
                                c.target + " give each one size (--dim " + ranges[0].symbol +
                                "=N)");
  }
  if (c.weights != "auto" && c.weights != "file") {
    throw std::invalid_argument("--weights " + c.weights + ": a dynamic " + symbols +
                                "'s library keeps its weights in one file, which every size's "
                                "function reads (--weights file)");
  }
  // The listed dimensions at their first size, for the analysis of a range.
  graph::DimBindings listed_at = fixed;
  for (const auto& r : ranges) {
    if (!r.sizes.empty()) listed_at[r.symbol] = r.sizes.front();
  }
  generators::Dispatch dispatch;
  bool has_range = false;
  for (const auto& range : ranges) {
    const std::string& sym = range.symbol;
    generators::DispatchDim d;
    d.symbol = sym;
    // A list of sizes: a function each, those sizes only (any symbol). A range: slices of the
    // batch, which must be separable.
    d.exact = !range.sizes.empty();
    if (!d.exact) {
      has_range = true;
      const fusion::SymbolBehaviour b = fusion::analyse_symbol(c.model, sym, listed_at);
      if (!b.separable) {
        throw std::invalid_argument(c.model + ": one library cannot serve every " + sym + " in " +
                                    std::to_string(range.min) + ".." + std::to_string(range.max) +
                                    ": " + b.why_not + "; list the sizes it must serve (--dim " +
                                    sym + "=N1,N2,...), a function each");
      }
    }
    d.sizes = d.exact ? range.sizes : c.buckets;
    if (d.sizes.empty()) {
      // Where batching stops paying, measured through the JIT on 2 Zen 4 cores: ResNet-18 takes
      // 31.6 ms an image at batch 1, 26.3 at 4 and 29.5 at 8; the GPT-2 block 17.2 ms a sequence
      // at 1 and 16.2 at 4 (and as libraries on 2 Zen 5 cores, batch 8 in 42.9 ms from
      // functions at 1, 2, 4 against 51.1 from 1, 2, 4, 8). Each size costs a generator run and
      // its code in the library.
      for (int64_t s = 1; s <= std::min<int64_t>(range.max, 4); s *= 2) d.sizes.push_back(s);
    }
    std::sort(d.sizes.begin(), d.sizes.end());
    d.sizes.erase(std::unique(d.sizes.begin(), d.sizes.end()), d.sizes.end());
    d.min = d.exact ? d.sizes.front() : range.min;
    d.max = d.exact ? d.sizes.back() : range.max;
    if (!d.exact && (d.sizes.front() != 1 || d.sizes.back() > range.max)) {
      throw std::invalid_argument("--buckets: the sizes must include 1 and stay within " + sym +
                                  "=" + std::to_string(range.min) + ".." +
                                  std::to_string(range.max));
    }
    dispatch.dims.push_back(std::move(d));
  }
  if (!has_range && !c.buckets.empty()) {
    throw std::invalid_argument("--buckets: --dim " + ranges[0].symbol +
                                " lists the sizes already");
  }
  const std::string spec = generators::dispatch_to_string(dispatch);
  fs::create_directories(c.out_dir);
  const std::string dir = c.out_dir + "/";
  std::string serves;
  for (const auto& d : dispatch.dims) {
    std::string sizes;
    for (int64_t v : d.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(v);
    serves += (serves.empty() ? "" : "; ") + d.symbol + " = " +
              (d.exact ? sizes
                       : std::to_string(d.min) + ".." + std::to_string(d.max) +
                             " from functions at " + sizes);
  }
  const auto combinations = dispatch.combinations();
  std::printf(
      "compiling %s for %s (%s, %.1f MiB of weights in a weights file), %s: %zu "
      "function%s...\n",
      c.model.c_str(), target.c_str(), c.strategy.c_str(), weight_bytes / 1048576.0, serves.c_str(),
      combinations.size(), combinations.size() == 1 ? "" : "s");
  std::vector<std::string> objects;
  for (size_t i = 0; i < combinations.size(); ++i) {
    const std::string fn = generators::dispatch_function(name, combinations[i]);
    const std::string stem = fn.substr(0, fn.size() - std::string("_impl").size());
    graph::DimBindings dims = fixed;
    std::string at;
    for (size_t k = 0; k < dispatch.dims.size(); ++k) {
      dims[dispatch.dims[k].symbol] = combinations[i][k];
      at += (at.empty() ? "" : ", ") + dispatch.dims[k].symbol + " = " +
            std::to_string(combinations[i][k]);
    }
    // One Halide runtime in the library: the first function's.
    std::string cmd =
        generator_command(c, generator, fn, "o", target + (i == 0 ? "" : "-no_runtime"),
                          dir + stem + ".plan.json", dims);
    cmd += " dispatch=" + shell_quote(spec);
    if (i == 0) {
      cmd += " weights_out=" + shell_quote(fs::absolute(dir + name).string());
    } else {
      cmd += " weights_from_file=true";
    }
    const auto t0 = std::chrono::steady_clock::now();
    run_or_throw(cmd, "the generator on " + c.model + " at " + at);
    std::printf("  %s: %.1f s\n", at.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    objects.push_back(dir + fn + ".o");
  }
  objects.push_back(compile_entry(dir, name));
  fs::remove(dir + name + ".a");
  std::string ar = "ar rcs " + shell_quote(dir + name + ".a");
  for (const auto& o : objects) ar += " " + shell_quote(o);
  run_or_throw(ar, "archiving " + dir + name + ".a");
  for (const auto& o : objects) fs::remove(o);
  fs::remove(dir + name + "_entry.cpp");
  if (c.shared) link_shared(dir, name);
  std::printf(
      "wrote %s%s.a%s, %s.h (C ABI: inputs, then outputs, as halide_buffer_t*; %s), "
      "%s.weights, %s_b*.plan.json\n",
      dir.c_str(), name.c_str(), c.shared ? (", " + name + ".so").c_str() : "", name.c_str(),
      serves.c_str(), name.c_str(), name.c_str());
  return 0;
}

int compile_command(const CompileCommand& c, const std::string& generator) {
  // Every symbolic dimension the model declares gets one size (NAME=N), a list of sizes
  // (NAME=N1,N2,...: a function each) or, one of them, a range the library serves
  // (NAME=MIN..MAX).
  graph::DimBindings fixed;
  std::vector<fusion::DimRange> dynamic;
  const auto declared = fusion::declared_symbols(c.model);
  for (const auto& spec : c.dims) {
    const fusion::DimRange r = fusion::parse_dim(spec);
    if (r.min == r.max && r.sizes.size() <= 1) {
      fixed[r.symbol] = r.min;
      continue;
    }
    for (const auto& d : dynamic) {
      if (d.sizes.empty() && r.sizes.empty()) {
        throw std::invalid_argument("--dim " + d.symbol + " and --dim " + r.symbol +
                                    " are both ranges: a library slices one dimension; list the "
                                    "other's sizes (--dim " +
                                    r.symbol + "=N1,N2,...) or give it one");
      }
    }
    if (!declared.count(r.symbol)) {
      throw std::invalid_argument("--dim " + spec + ": no input of " + c.model +
                                  " has a dimension named '" + r.symbol + "'");
    }
    dynamic.push_back(r);
  }
  auto is_dynamic = [&](const std::string& symbol) {
    return std::any_of(dynamic.begin(), dynamic.end(),
                       [&](const auto& d) { return d.symbol == symbol; });
  };
  for (const auto& [symbol, uses] : declared) {
    if (fixed.count(symbol) || is_dynamic(symbol)) continue;
    throw std::invalid_argument(c.model + ": input " + fusion::uses_to_string({uses.front()}) +
                                " is the symbolic dimension '" + symbol +
                                "': give it a size (--dim " + symbol +
                                "=N), the sizes the library serves (--dim " + symbol +
                                "=N1,N2,...) or a range (--dim " + symbol + "=MIN..MAX)");
  }
  graph::DimBindings at = fixed;
  for (const auto& d : dynamic) at[d.symbol] = d.min;
  // Load first: a model the frontend refuses is reported here, not inside the generator.
  std::vector<std::string> rewrites;
  fusion::LoadOptions load;
  load.winograd = c.target != "host-cuda" && c.target != "host-opencl";
  const graph::Graph g = fusion::load_model(c.model, at, &rewrites, load);
  std::string name = c.name;
  if (name.empty()) {
    name = fs::path(c.model).stem().string();
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "m_" + name;
  }
  static const std::map<std::string, std::string> targets = {
      {"host", "host"},
      {"x86-avx2", OPFUSE_X86_AVX2_TARGET},
      {"x86-avx512", OPFUSE_X86_AVX512_TARGET},
      {"host-opencl", "host-opencl"},
      {"host-cuda", OPFUSE_CUDA_TARGET}};
  const auto t = targets.find(c.target);
  if (t == targets.end()) {
    throw std::invalid_argument("unknown target '" + c.target +
                                "' (host, x86-avx2, x86-avx512, host-opencl, host-cuda)");
  }
  const std::string target = t->second;
  for (const auto& r : rewrites) std::printf("%s\n", r.c_str());
  double weight_bytes = 0;
  for (const auto& p : g.params()) {
    const graph::Tensor& pt = g.tensor(p);
    weight_bytes += double(graph::num_elements(pt.shape)) * graph::dtype_bytes(pt.dtype);
  }
  // Where "auto" draws the line, measured on 2 Zen 4 cores: embedding ResNet-18's 46 MB of
  // weights took the generator 15 s and 339 MB of memory (9.9 s, 166 MB as arguments), GPT-2's
  // 186 MB took 11.6 s and 2.0 GB (2.3 s, 0.4 GB): LLVM holds each constant several times, about
  // 10x its size, and x86-64's small code model caps an object's data at 2 GiB. Beyond
  // 128 MiB a weights file costs nothing at compile time and one mapping at load.
  if (!dynamic.empty()) {
    return build_dynamic_library(c, generator, name, target, dynamic, fixed, weight_bytes);
  }
  std::string weights = c.weights;
  if (weights == "auto") weights = weight_bytes <= c.embed_limit_mib * 1048576.0 ? "embed" : "file";
  return build_library(c, generator, name, target, weights, weight_bytes, fixed);
}

int calibrate_command(const std::string& out, bool quick, bool host) {
  if (host) {
    write_file(out, fusion::profile_to_json(fusion::host_profile()));
    std::printf("wrote the host profile to %s\n", out.c_str());
    return 0;
  }
  fusion::CalibrationOptions o;
  o.quick = quick;
  std::printf("calibrating %s (%s, %d vector registers): FMA peak, bandwidth per level, "
              "latency...\n",
              fusion::host_cpu_model().c_str(), o.isa.name.c_str(), o.isa.vector_registers);
  // The base gives what is not measured (launch overhead, NUMA latencies).
  const fusion::HardwareProfile p = fusion::calibrate(fusion::builtin_profile("epyc-avx512-2c"), o);
  std::printf("  FMA peak         %8.1f GFLOP/s (%d cores, %s)\n", p.peak_flops_f32 / 1e9, p.cores,
              o.isa.name.c_str());
  for (const auto& l : p.levels) {
    std::printf("  %-5s %9.0f KiB %8.1f GB/s\n", l.name.c_str(), l.size_bytes / 1024,
                l.bandwidth_Bps / 1e9);
  }
  std::printf("  memory latency   %8.1f ns\n", p.memory_latency_s * 1e9);
  write_file(out, fusion::profile_to_json(p));
  return 0;
}

}  // namespace opfuse::tools
