// The host-cuda library's PTX must assemble for the GPU we deploy on (sm_90, H200).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#ifndef OPFUSE_PTX_FILE
// Registered with ctest's skip code so the summary says "Skipped", with this reason.
TEST_CASE("ptxas check") {
  std::puts("SKIPPED: the CUDA toolkit (ptxas) was not found when opfuse was configured");
  std::exit(77);
}
#else
TEST_CASE("ew_chain_cuda PTX assembles with ptxas for " OPFUSE_PTX_ARCH) {
  std::ifstream in(OPFUSE_PTX_FILE);
  REQUIRE_MESSAGE(in.good(), "missing device code " OPFUSE_PTX_FILE);
  std::stringstream text;
  text << in.rdbuf();
  const std::string ptx = text.str();
  CHECK(ptx.find(".target") != std::string::npos);
  CHECK(ptx.find(".entry") != std::string::npos);  // at least one kernel
  const std::string cmd = std::string("\"" OPFUSE_PTXAS "\" -arch=" OPFUSE_PTX_ARCH " \"") +
                          OPFUSE_PTX_FILE + "\" -o \"" OPFUSE_PTX_FILE ".cubin\" 2>&1";
  CAPTURE(cmd);
  CHECK(std::system(cmd.c_str()) == 0);
}
#endif
