// A user's program around `opfuse compile resnet18_dynamo.onnx --target host --out lib`: the
// library carries its weights, so the call takes the image and the logits only.
// Usage: run_resnet18 X.bin Y.bin   (raw float32: 1x3x224x224 in, 1x1000 out)
#include <cstdio>
#include <fstream>
#include <vector>

#include "HalideBuffer.h"
#include "resnet18_dynamo.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::vector<float> x(3 * 224 * 224), y(1000);
  std::ifstream(argv[1], std::ios::binary).read(reinterpret_cast<char*>(x.data()), x.size() * 4);
  // Halide's dimensions are innermost first: W, H, C, N.
  Halide::Runtime::Buffer<float> in(x.data(), 224, 224, 3, 1), out(y.data(), 1000, 1);
  if (int err = resnet18_dynamo(in, out)) return std::printf("error %d\n", err), 1;
  std::ofstream(argv[2], std::ios::binary).write(reinterpret_cast<char*>(y.data()), y.size() * 4);
  std::printf("logits[0..2] = %g %g %g\n", y[0], y[1], y[2]);
  return 0;
}
