// Errors from AOT-built kernels, turned into exceptions that say what went wrong.
//
// A Halide pipeline reports a bad call (a buffer too small, a null host pointer, no GPU
// device) by calling the runtime's error handler and returning a non-zero code. The default
// handler prints to stderr; opfuse's keeps the message for the calling thread so that
// check() can throw it with the kernel's name.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace opfuse::runtime {

// A kernel call that failed: `code` is Halide's error code (HalideRuntime.h, halide_error_code_t).
class KernelError : public std::runtime_error {
 public:
  KernelError(std::string kernel, int code, const std::string& halide_message);
  const std::string& kernel() const { return kernel_; }
  int code() const { return code_; }

 private:
  std::string kernel_;
  int code_;
};

// Installs opfuse's Halide error handler. Idempotent and thread-safe; check() calls it.
void install_error_handler();
// The same handler for another Halide runtime (a shared object's own): `set_error_handler` is
// that runtime's halide_set_error_handler.
void install_error_handler_into(void* set_error_handler);

// Throws KernelError if `code` is non-zero, with the message Halide gave on this thread.
// Call install_error_handler() (or any check()) before the first kernel call so that the
// message is captured rather than printed.
void check(int code, std::string_view kernel);

}  // namespace opfuse::runtime
