// Convolution networks exported NCHW, run channels-last (NHWC): the layout pass of ONNX
// Runtime's NCHWc transformer and TVM's ConvertLayout, at the granularity of whole tensors.
//
// Every op whose channel axis comes from a layout (conv, pools, batch norm: OpTrait::
// channel_layout) runs NHWC, and with it every elementwise op and every broadcast between
// such tensors (a per-channel constant [C,1,1] is permuted at compile time). The layout changes
// only where the region meets the rest: after a graph input, before a reshape or a graph
// output, each a transpose the planner fuses into its neighbour. Graph inputs and outputs keep
// their NCHW names and shapes, so callers see the same model.
//
// Why: an NCHW convolution vectorises along W (7 to 56 pixels: a 7-wide row fills 4 of 16
// lanes), an NHWC one along output channels (64 to 512); measured on 2 Zen 4 cores, a 3x3
// convolution of 64 channels at 56x56 ran in 1.1 ms NHWC against 6.0 ms NCHW.
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

// Rewrites a validated graph in place when it has at least `min_convs` NCHW convolutions;
// returns one log line per change, none when it left the graph alone. One is enough: even a
// lone patch embedding between two transposes gains (ViT-Tiny's 16x16 stride-16 conv, 3 -> 192
// channels, with its group: 730 us NCHW, its vectors along W gathering inputs 16 apart, against
// 217 us NHWC with the transposes, on 2 Zen 5 cores).
std::vector<std::string> to_channels_last(graph::Graph& g, int min_convs = 1);

}  // namespace opfuse::fusion
