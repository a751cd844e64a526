// Vendor baselines for zoo models: what a user would run instead of a fusing compiler.
//
//   cbr_pool, mixed   oneDNN: convolution with batch norm folded into its weights and ReLU as a
//                     post-op, then oneDNN pooling; oneDNN chooses its own layouts (`any`),
//                     the reorders of the user's NHWC input and output are inside the timed
//                     call, the weights' once at setup
//   mlp, attention    OpenBLAS sgemm for every matmul, plain C++ loops for bias, GELU and
//                     softmax between them (an unfused vendor pipeline)
//
// Each writes the model's outputs into the ZooCase, so its results are checked like any
// kernel's. Built only where the libraries are found (OPFUSE_HAVE_ONEDNN, OPFUSE_HAVE_OPENBLAS).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bench/zoo_model.h"

namespace opfuse::bench {

struct VendorBaseline {
  std::string name;           // "oneDNN", "OpenBLAS"
  std::function<void()> run;  // one inference
  // What actually ran: oneDNN's impl_info_str() of every primitive, OpenBLAS's core.
  std::string implementation;
  // A library's reference (unoptimised C++) code path ran: never counted as a baseline.
  bool reference_code = false;
};

std::optional<VendorBaseline> vendor_baseline(const std::string& model, ZooCase& c);

}  // namespace opfuse::bench
