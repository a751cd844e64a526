// ResNet-18 from its image alone: the library carries its weights (or loads its weights file).
// Usage: run_resnet18 MODEL X.bin Y.bin   (MODEL resnet18 or resnet18_file; raw float32)
#include <fstream>
#include <vector>

#include "runtime/kernel.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const opfuse::runtime::Model& model =
      opfuse::runtime::Registry::global().find(argv[1], "fused").function();
  std::vector<float> x(3 * 224 * 224);
  std::ifstream(argv[2], std::ios::binary).read(reinterpret_cast<char*>(x.data()), x.size() * 4);
  const auto out = model.run({{"x", opfuse::runtime::Tensor::f32(x.data(), {1, 3, 224, 224})}});
  const auto& y = out.at("logits");
  std::ofstream(argv[3], std::ios::binary).write(y.as<char>(), std::streamsize(y.bytes.size()));
  return 0;
}
