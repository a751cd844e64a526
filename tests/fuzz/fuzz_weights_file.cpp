// A compiled model's weights file check (runtime/weights_file.h) on arbitrary bytes: a file is
// either refused with a message or every tensor it validates lies inside it. The model hash
// is taken from the file itself, so inputs get past it to the table and the data.
#include <cstdint>
#include <cstring>

#include "runtime/weights_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opfuse::weights;
  static const Expected expected[2] = {{"w", 2, 32, 2, {4, 3}}, {"b", 2, 32, 1, {4}}};
  uint64_t hash = 0;
  if (size >= 24) std::memcpy(&hash, data + 16, sizeof hash);
  uint64_t offsets[2] = {0, 0};
  const std::string err = validate(data, size, "input", hash, expected, 2, offsets);
  if (err.empty()) {
    for (int i = 0; i < 2; ++i) {
      if (offsets[i] > size || tensor_bytes(expected[i]) > size - offsets[i]) __builtin_trap();
    }
  } else if (err.find("weights file input: ") != 0) {
    __builtin_trap();  // every refusal names the file
  }
  return 0;
}
