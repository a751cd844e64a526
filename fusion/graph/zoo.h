// The built-in model zoo (models/), defined once here with the builder and written to
// models/<size>/<name>.json by `opfuse zoo`. A test checks that the files match.
//
//   ew_chain_N   N elementwise ops on a 4-D tensor                     7.1.1, S = n
//   cbr_pool     Conv -> BatchNorm -> ReLU -> MaxPool, NHWC             7.1.3, exercise 7.1
//   mixed        Conv -> BN -> ReLU -> {MaxPool || AvgPool}             7.1.3
//   attention    X -> {Q || K || V} -> QK^T/sqrt(d) -> softmax -> .V    7.2.1, 7.4.4, ex. 7.4
//   mlp          Linear -> bias -> GELU -> Linear (transformer FFN)     7.4.4
//   layernorm    residual add -> LayerNorm -> GELU                      7.2.1
//   softmax      scale -> softmax                                       7.2.1
//   perception   normalise -> conv stack -> {detection || class} heads  7.4.4
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::graph {

// cpu: a call takes well under a second on a 2-core CPU; gpu: the text's sizes where it
// gives them (exercise 7.1's 256x112x112x32 conv output is the gpu cbr_pool's), else larger.
enum class ZooSize { cpu, gpu };

std::vector<std::string> zoo_names();
// GraphError if `name` is not in the zoo.
Graph zoo_model(const std::string& name, ZooSize size);
const char* to_string(ZooSize s);

}  // namespace opfuse::graph
