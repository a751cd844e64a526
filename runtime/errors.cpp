#include "runtime/errors.h"

#include <HalideRuntime.h>

#include <mutex>

namespace opfuse::runtime {
namespace {

// Halide calls the handler on the thread that ran the failing pipeline, so one message
// slot per thread keeps concurrent calls apart.
thread_local std::string last_halide_message;

extern "C" void opfuse_halide_error(void* /*user_context*/, const char* msg) {
  last_halide_message = msg ? msg : "";
  // Halide messages end with a newline; the exception text should not.
  while (!last_halide_message.empty() && last_halide_message.back() == '\n') {
    last_halide_message.pop_back();
  }
}

std::string describe(std::string_view kernel, int code, const std::string& msg) {
  std::string text = "opfuse kernel '" + std::string(kernel) + "' failed (Halide error " +
                     std::to_string(code) + ")";
  if (!msg.empty()) text += ": " + msg;
  return text;
}

}  // namespace

KernelError::KernelError(std::string kernel, int code, const std::string& halide_message)
    : std::runtime_error(describe(kernel, code, halide_message)),
      kernel_(std::move(kernel)),
      code_(code) {}

void install_error_handler() {
  static std::once_flag once;
  std::call_once(once, [] { halide_set_error_handler(opfuse_halide_error); });
}

void install_error_handler_into(void* set_error_handler) {
  using Set = halide_error_handler_t (*)(halide_error_handler_t);
  reinterpret_cast<Set>(set_error_handler)(opfuse_halide_error);
}

void check(int code, std::string_view kernel) {
  install_error_handler();
  if (code == 0) return;
  std::string msg = std::move(last_halide_message);
  last_halide_message.clear();
  throw KernelError(std::string(kernel), code, msg);
}

}  // namespace opfuse::runtime
