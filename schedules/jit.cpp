#include "schedules/jit.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "Halide.h"
#include "fusion/hardware/calibrate.h"
#include "fusion/ops/lower.h"
#include "fusion/ops/realize.h"
#include "runtime/block_pool.h"
#include "runtime/thread_pool.h"
#include "schedules/emitter.h"

namespace opfuse::schedules {

using namespace Halide;

namespace {

// Heap accounting for the JIT pipelines' allocations, which come from the block pool the AOT
// libraries use (runtime/block_pool.h: the most recently freed block that fits, so that a
// plan that stores intermediates pays neither fresh pages nor cold lines on every call).
// Halide's handlers are plain function pointers, so the counters are per process: one
// CompiledPlan is measured at a time; the idle blocks are freed when a CompiledPlan is
// destroyed.
std::atomic<int64_t> g_heap_now{0}, g_heap_peak{0};

void* counting_malloc(JITUserContext*, size_t bytes) {
  void* p = runtime::pool_allocate(bytes);
  if (!p) return nullptr;
  const int64_t now = g_heap_now += int64_t(bytes);
  int64_t peak = g_heap_peak.load();
  while (now > peak && !g_heap_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void counting_free(JITUserContext*, void* ptr) {
  g_heap_now -= int64_t(runtime::pool_release(ptr));
}

// A timed run's context: the trace handler stamps each root Func's production (the events
// Func::trace_realizations emits around it, on the thread that runs the pipeline's top level).
// Productions fused by compute_with nest; the time between two stamps goes to the innermost
// open production, so none is counted twice.
struct TimingContext : JITUserContext {
  std::map<std::string, double>* seconds = nullptr;
  std::vector<std::string> open;
  std::chrono::steady_clock::time_point last;
};

int32_t timing_trace(JITUserContext* uc, const halide_trace_event_t* e) {
  if (e->event != halide_trace_produce && e->event != halide_trace_end_produce) return 0;
  auto* ctx = static_cast<TimingContext*>(uc);
  const auto now = std::chrono::steady_clock::now();
  if (!ctx->open.empty()) {
    (*ctx->seconds)[ctx->open.back()] += std::chrono::duration<double>(now - ctx->last).count();
  }
  if (e->event == halide_trace_produce) {
    ctx->open.emplace_back(e->func);
  } else if (!ctx->open.empty()) {
    ctx->open.pop_back();
  }
  ctx->last = now;
  return 0;
}

// The pipeline's outputs and every Func the schedule stores at the root: the productions a
// timed run stamps.
std::vector<Func> root_funcs(const std::vector<Func>& outputs) {
  // The Funcs the outputs call, and the wrappers (Func::in) their consumers call instead:
  // a materialized anchor is often computed in its wrapper.
  std::map<std::string, Internal::Function> all;
  std::vector<Internal::Function> todo;
  for (const Func& f : outputs) todo.push_back(f.function());
  while (!todo.empty()) {
    const Internal::Function f = todo.back();
    todo.pop_back();
    if (!all.emplace(f.name(), f).second) continue;
    for (const auto& [name, fn] : Internal::find_direct_calls(f)) todo.push_back(fn);
    for (const auto& [name, ptr] : f.wrappers()) todo.emplace_back(ptr);
  }
  std::set<std::string> output_names;
  for (const Func& f : outputs) output_names.insert(f.name());
  std::vector<Func> roots;
  for (const auto& [name, fn] : all) {
    // Scheduling is done: the levels are fixed as lowering would fix them.
    LoopLevel at = fn.schedule().compute_level();
    at.lock();
    if (output_names.count(name) || at.is_root()) roots.emplace_back(fn);
  }
  return roots;
}

// The parallel loops on the spinning pool (runtime/thread_pool.h: why). The tasks Halide passes
// take the JIT's user context where the pool's take a void*: the same pointer.
int spinning_do_par_for(JITUserContext* uc, int (*f)(JITUserContext*, int, uint8_t*), int min,
                        int size, uint8_t* closure) {
  return runtime::spinning_do_par_for(uc, reinterpret_cast<runtime::ParTask>(f), min, size, closure);
}

}  // namespace

struct CompiledPlan::Impl {
  const graph::Graph* graph;
  std::vector<Buffer<>> keep;  // input and param buffers the pipeline reads
  std::vector<Buffer<float>> outs;
  Halide::Pipeline pipeline;
  Target target;
  bool timed = false;
  std::map<std::string, double> root_seconds;  // of the last timed run, by Func
  schedules::PipelineSchedule schedule;
  size_t peak = 0;
};

CompiledPlan::CompiledPlan(const graph::Graph& g, const fusion::FusionPlan& plan,
                           const graph::TensorMap& inputs, const graph::TensorMap& params,
                           bool timed)
    : impl_(std::make_unique<Impl>()) {
  try {
    compile(g, plan, inputs, params, timed);
  } catch (const Halide::Error& e) {
    // Halide's errors are not std::exceptions: callers see one type, with Halide's message.
    throw std::runtime_error(std::string("Halide could not compile the plan: ") + e.what());
  }
}

void CompiledPlan::compile(const graph::Graph& g, const fusion::FusionPlan& plan,
                           const graph::TensorMap& inputs, const graph::TensorMap& params,
                           bool timed) {
  for (const auto& name : g.tensor_names()) {
    if (g.tensor(name).kind != graph::TensorKind::intermediate &&
        g.tensor(name).dtype == graph::DType::f16) {
      throw graph::GraphError("realize_with_plan: f16 tensors are not supported, '" + name +
                              "' is f16");
    }
  }
  impl_->graph = &g;
  impl_->target = get_jit_target_from_environment();
  impl_->timed = timed;
  // No GPU limits: the JIT runs on the host's CPU.
  schedules::TargetFacts facts = target_facts(
      impl_->target, fusion::HardwareProfile{}, int(std::max(1u, std::thread::hardware_concurrency())));
  facts.l1_bytes = int(fusion::host_cache_bytes(1, facts.l1_bytes));  // the JIT runs here
  impl_->schedule = schedules::schedule_plan(g, plan, facts);
  // The params' values are known here: the weights the blocks read Cout-innermost are stored
  // so once.
  const std::set<std::string> packed = schedules::weights_to_pack(g, impl_->schedule);
  const std::map<std::string, Func> sources = ops::buffer_sources(
      g, inputs, params, impl_->keep, packed, impl_->target.natural_vector_size(Halide::Float(32)));
  ops::LoweredGraph lowered = ops::lower(g, sources);
  Pipeline pipe{&g, &lowered, {}, packed};
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const graph::Tensor& t = g.tensor(g.outputs()[i]);
    Func out(ops::halide_safe_name(t.name) + "_out");
    const std::vector<Var> v = ops::halide_args(ops::make_vars(t.shape.size()));
    out(v) = lowered.outputs[i](std::vector<Expr>(v.begin(), v.end()));
    pipe.outputs.push_back(out);
    impl_->outs.emplace_back(std::vector<int>(t.shape.rbegin(), t.shape.rend()));
  }
  bound_outputs(pipe);
  apply_schedule(pipe, impl_->schedule);
  if (timed) {
    // Traced at their production only: no per-element events, nothing inside the loops.
    for (Func f : root_funcs(pipe.outputs)) f.trace_realizations();
  }
  impl_->pipeline = Halide::Pipeline(pipe.outputs);
  impl_->pipeline.jit_handlers().custom_malloc = counting_malloc;
  impl_->pipeline.jit_handlers().custom_free = counting_free;
  if (runtime::spinning_pool_enabled()) {
    impl_->pipeline.jit_handlers().custom_do_par_for = spinning_do_par_for;
  }
  impl_->pipeline.compile_jit(impl_->target);
}

CompiledPlan::~CompiledPlan() { runtime::pool_trim(); }

const schedules::PipelineSchedule& CompiledPlan::schedule() const { return impl_->schedule; }

const std::map<std::string, double>& CompiledPlan::root_seconds() const {
  return impl_->root_seconds;
}

void CompiledPlan::run() {
  std::vector<Buffer<>> bufs(impl_->outs.begin(), impl_->outs.end());
  g_heap_now = 0;
  g_heap_peak = 0;
  TimingContext ctx;
  if (impl_->timed) {
    impl_->root_seconds.clear();
    ctx.seconds = &impl_->root_seconds;
    ctx.handlers.custom_trace = timing_trace;
  }
  try {
    impl_->pipeline.realize(&ctx, Realization(bufs), impl_->target);
  } catch (const Halide::Error& e) {
    throw std::runtime_error(std::string("the compiled plan failed to run: ") + e.what());
  }
  impl_->peak = size_t(g_heap_peak.load());
}

void CompiledPlan::set_inputs(const graph::TensorMap& inputs) {
  const graph::Graph& g = *impl_->graph;
  std::map<std::string, size_t> slot;  // buffer_sources keeps one per input and param, in order
  for (const auto& name : g.tensor_names()) {
    if (g.tensor(name).kind == graph::TensorKind::intermediate) continue;
    const size_t next = slot.size();
    slot[name] = next;
  }
  for (const auto& [name, value] : inputs) {
    if (!g.has_tensor(name) || g.tensor(name).kind != graph::TensorKind::input) {
      throw graph::GraphError("set_inputs: '" + name + "' is no graph input");
    }
    const graph::Tensor& t = g.tensor(name);
    if (value.shape != t.shape) {
      throw graph::GraphError("set_inputs: input '" + name + "' is " + graph::shape_to_string(t.shape) +
                              ", given " + graph::shape_to_string(value.shape));
    }
    impl_->keep.at(slot.at(name)).copy_from(Halide::Buffer<>(ops::tensor_buffer(t, value)));
  }
}

graph::TensorMap CompiledPlan::outputs() const {
  const graph::Graph& g = *impl_->graph;
  graph::TensorMap result;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    graph::HostTensor h(g.tensor(g.outputs()[i]).shape);
    std::copy(impl_->outs[i].data(), impl_->outs[i].data() + h.size(), h.data.begin());
    result[g.outputs()[i]] = std::move(h);
  }
  return result;
}

size_t CompiledPlan::peak_heap_bytes() const { return impl_->peak; }

graph::TensorMap realize_with_plan(const graph::Graph& g, const fusion::FusionPlan& plan,
                                   const graph::TensorMap& inputs, const graph::TensorMap& params) {
  CompiledPlan c(g, plan, inputs, params);
  c.run();
  return c.outputs();
}

std::vector<GroupTime> times_by_group(const graph::Graph& g, const fusion::FusionPlan& plan,
                                      const std::map<std::string, double>& func_seconds) {
  // Func name -> node: the longest node name (as lowered) the Func's name starts with, then
  // '_' or '$' or its end (a node's Funcs are "<node>", "<node>_acc", "<node>_global_wrapper$0").
  // A graph output's copy ("<tensor>_out") goes to the group of the node that produces it.
  std::vector<std::pair<std::string, int>> prefixes;  // (lowered node name, group)
  for (const fusion::FusedGroup& grp : plan.groups) {
    for (const auto& n : grp.nodes) prefixes.emplace_back(ops::halide_safe_name(n), grp.id);
    for (const auto& t : g.outputs()) {
      const graph::Node* p = g.producer(t);
      if (p && std::count(grp.nodes.begin(), grp.nodes.end(), p->name)) {
        prefixes.emplace_back(ops::halide_safe_name(t) + "_out", grp.id);
      }
    }
  }
  std::sort(prefixes.begin(), prefixes.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::vector<GroupTime> out(plan.groups.size() + 1);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    out[i].group = plan.groups[i].id;
    out[i].predicted_s = plan.groups[i].estimate.t_total_s;
  }
  for (const auto& [func, t] : func_seconds) {
    GroupTime* slot = &out.back();
    for (const auto& [name, gid] : prefixes) {
      if (func.rfind(name, 0) != 0) continue;
      const char next = func.size() > name.size() ? func[name.size()] : '\0';
      if (next != '\0' && next != '_' && next != '$') continue;
      for (auto& o : out) {
        if (o.group == gid) slot = &o;
      }
      break;
    }
    slot->measured_s += t;
  }
  return out;
}

}  // namespace opfuse::schedules
