// Writes the corpus networks (tests/frontend/networks.h) as ONNX files in both exporters'
// styles: DIR/<network>_<torchscript|dynamo>.onnx (+ .onnx.data for dynamo).
// Usage: write_networks DIR [IMAGE [NETWORK]]   (IMAGE: input height and width, default 224;
// NETWORK: only that one)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/frontend/networks.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s DIR [IMAGE [NETWORK]]\n", argv[0]);
    return 1;
  }
  const int64_t image = argc >= 3 ? std::atoll(argv[2]) : 224;
  const std::string only = argc == 4 ? argv[3] : "";
  if (image < 32 || image > 1024) {
    std::fprintf(stderr, "IMAGE must be 32..1024\n");
    return 1;
  }
  std::filesystem::create_directories(argv[1]);
  using opfuse::testing::ExportStyle;
  for (const auto& n : opfuse::testing::network_names()) {
    if (!only.empty() && n != only) continue;
    for (ExportStyle s : {ExportStyle::torchscript, ExportStyle::dynamo}) {
      std::printf("%s\n", opfuse::testing::write_network(n, s, argv[1], image).c_str());
    }
  }
  return 0;
}
