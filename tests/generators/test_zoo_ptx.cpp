// Every zoo model's fused, unfused and Anderson2021 CUDA library: its PTX assembles with ptxas for
// sm_90 (H200), and fusion lowers the number of GPU kernels.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifndef OPFUSE_ZOO_PTX
TEST_CASE("zoo PTX") {
  std::puts("SKIPPED: the CUDA toolkit (ptxas) was not found when opfuse was configured");
  std::exit(77);
}
#else
namespace {

struct Entry {
  std::string model, strategy, path;
};

std::vector<Entry> entries() {
  std::vector<Entry> out;
  std::istringstream in(OPFUSE_ZOO_PTX);
  for (std::string item; std::getline(in, item, ',');) {
    const auto a = item.find(':'), b = item.find(':', a + 1);
    out.push_back({item.substr(0, a), item.substr(a + 1, b - a - 1), item.substr(b + 1)});
  }
  return out;
}

int count_kernels(const std::string& ptx) {
  int n = 0;
  for (size_t at = ptx.find(".entry"); at != std::string::npos; at = ptx.find(".entry", at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("zoo CUDA kernels assemble for " OPFUSE_PTX_ARCH " and fusion cuts the kernel count") {
  std::map<std::string, std::map<std::string, int> > kernels;
  for (const Entry& e : entries()) {
    CAPTURE(e.path);
    std::ifstream in(e.path);
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    kernels[e.model][e.strategy] = count_kernels(ss.str());
    const std::string cmd = std::string("\"" OPFUSE_PTXAS "\" -arch=" OPFUSE_PTX_ARCH " \"") +
                            e.path + "\" -o \"" + e.path + ".cubin\" 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
  }
  std::printf("GPU kernels per zoo model (unfused -> fused):\n");
  for (const auto& [model, k] : kernels) {
    std::printf(
        "  %-12s %2d -> %2d   (Anderson2021: %s)\n", model.c_str(), k.at("unfused"), k.at("fused"),
        k.count("Anderson2021") ? std::to_string(k.at("Anderson2021")).c_str() : "not built");
    CHECK(k.at("fused") <= k.at("unfused"));
  }
  CHECK(kernels["cbr_pool"]["unfused"] == 4);
  CHECK(kernels["cbr_pool"]["fused"] == 1);
  CHECK(kernels["ew_chain_16"]["unfused"] == 16);
  CHECK(kernels["ew_chain_16"]["fused"] == 1);
  CHECK(kernels["perception"]["fused"] < kernels["perception"]["unfused"]);
}
#endif
