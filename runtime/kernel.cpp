#include "runtime/kernel.h"

#include <chrono>
#include <mutex>
#include <stdexcept>

namespace opfuse::runtime {
namespace {

std::function<void(const Kernel&, double)>& timing_hook() {
  static std::function<void(const Kernel&, double)> hook;
  return hook;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Kernel::Kernel(std::string model, std::string strategy, std::string target, ArgvFunction fn,
               MetadataFunction metadata)
    : model_(std::move(model)),
      strategy_(std::move(strategy)),
      target_(std::move(target)),
      fn_(model_ + "/" + strategy_ + "/" + target_, fn, metadata) {}

void Kernel::run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const {
  const auto t0 = std::chrono::steady_clock::now();
  fn_.run(inputs, outputs);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timing_hook()) timing_hook()(*this, seconds);
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add(Kernel k) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  kernels_.push_back(std::move(k));
}

const Kernel& Registry::find(const std::string& model, const std::string& strategy,
                             const std::string& target) const {
  for (const Kernel& k : kernels_) {
    if (k.model() == model && k.strategy() == strategy && k.target() == target) return k;
  }
  std::string known;
  for (const Kernel& k : kernels_) known += (known.empty() ? "" : ", ") + k.name();
  throw std::out_of_range(
      "no kernel " + model + "/" + strategy + "/" + target +
      " is linked into this program (available: " + (known.empty() ? "none" : known) + ")");
}

std::vector<const Kernel*> Registry::all() const {
  std::vector<const Kernel*> out;
  for (const Kernel& k : kernels_) out.push_back(&k);
  return out;
}

Registration::Registration(const char* model, const char* strategy, const char* target,
                           ArgvFunction fn, MetadataFunction metadata) {
  Registry::global().add(Kernel(model, strategy, target, fn, metadata));
}

void set_timing_hook(std::function<void(const Kernel&, double)> hook) {
  timing_hook() = std::move(hook);
}

}  // namespace opfuse::runtime
