// The zoo's registry: every AOT-built kernel linked into the program, as a Model labelled by
// model x strategy x target.
//
//   Kernel    a Model with its labels; run() as Model::run, plus the timing hook
//   Registry  every kernel linked into the program, registered at start-up by the code
//             opfuse_add_fused_library() generates
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/model.h"

namespace opfuse::runtime {

class Kernel {
 public:
  Kernel(std::string model, std::string strategy, std::string target, ArgvFunction fn,
         MetadataFunction metadata);

  const std::string& model() const { return model_; }
  const std::string& strategy() const { return strategy_; }
  const std::string& target() const { return target_; }  // host, host-opencl, host-cuda
  std::string name() const { return model_ + "/" + strategy_ + "/" + target_; }
  // Graph inputs then params (weights as arguments), in the generated function's order; then
  // outputs.
  const std::vector<ArgInfo>& inputs() const { return fn_.inputs(); }
  const std::vector<ArgInfo>& outputs() const { return fn_.outputs(); }
  const Model& function() const { return fn_; }

  void run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const;
  ArgvFunction entry() const { return fn_.entry(); }

 private:
  std::string model_, strategy_, target_;
  Model fn_;
};

class Registry {
 public:
  static Registry& global();
  void add(Kernel k);
  // std::out_of_range listing what is registered if there is no such kernel.
  const Kernel& find(const std::string& model, const std::string& strategy,
                     const std::string& target = "host") const;
  std::vector<const Kernel*> all() const;

 private:
  std::vector<Kernel> kernels_;
};

// A static object of this type registers a kernel before main() runs.
struct Registration {
  Registration(const char* model, const char* strategy, const char* target, ArgvFunction fn,
               MetadataFunction metadata);
};

// Called after every successful run with the kernel and its wall time (seconds); empty by
// default. Set it before starting threads that run kernels.
void set_timing_hook(std::function<void(const Kernel&, double)> hook);

}  // namespace opfuse::runtime
