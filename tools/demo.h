#pragma once

namespace opfuse::tools {

struct DemoOptions {
  int elements = 1 << 24;  // 64 MiB of floats: DRAM-sized, so the chain is bandwidth-bound
  int repeats = 20;
};

// Runs the AOT-built fused elementwise chain on the host, checks it against the plain C++
// reference and prints the check and the achieved bandwidth. Returns a process exit code.
int run_demo(const DemoOptions& options);

}  // namespace opfuse::tools
