// Writes the test blocks as ONNX files, DIR/<block>_opset<N>.onnx, for `opfuse compile`,
// `opfuse run` and the ONNX Runtime comparison (bench/onnx/).
// Usage: write_onnx_blocks DIR [SCALE]   (SCALE multiplies H, W or the sequence length)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/frontend/blocks.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s DIR [SCALE]\n", argv[0]);
    return 1;
  }
  const int64_t scale = argc == 3 ? std::atoll(argv[2]) : 1;
  if (scale < 1 || scale > 64) {
    std::fprintf(stderr, "SCALE must be 1..64\n");
    return 1;
  }
  std::filesystem::create_directories(argv[1]);
  for (const auto& b : opfuse::testing::blocks()) {
    for (int opset : {13, 17}) {
      const std::string path =
          std::string(argv[1]) + "/" + b.name + "_opset" + std::to_string(opset) + ".onnx";
      std::ofstream(path, std::ios::binary) << opfuse::testing::block_bytes(b, opset, scale);
      std::printf("%s\n", path.c_str());
    }
  }
  return 0;
}
