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

// Rewrites a validated graph in place when it has at least `min_convs` NCHW convolutions (a
// lone patch embedding, as in a ViT, gains nothing between two transposes); returns one log
// line per change, none when it left the graph alone.
std::vector<std::string> to_channels_last(graph::Graph& g, int min_convs = 4);

}  // namespace opfuse::fusion
