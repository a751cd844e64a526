// NumPy .npy files (little-endian, C order) for `opfuse run`'s inputs (float32, or int64 and
// int32 token ids and masks, held as exact f32 values) and outputs (float32).
#pragma once

#include <string>

#include "fusion/graph/host_tensor.h"

namespace opfuse::tools {

// std::runtime_error names the file and what is wrong (dtype, order, truncation).
graph::HostTensor read_npy(const std::string& path);
void write_npy(const std::string& path, const graph::HostTensor& t);

}  // namespace opfuse::tools
