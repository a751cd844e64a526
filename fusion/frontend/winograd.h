// 3x3 convolutions as Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): each 2x2 output tile from a 4x4 input tile with 16
// multiplies per input-output channel pair instead of 36, so 2.25x fewer FLOPs in the
// convolution's GEMMs, at the price of transforms of the input (B^T d B) and the output
// (A^T m A) that are additions only, and of weights 16/9 the size (U = G g G^T, computed here,
// once, when the model is compiled).
//
// Why: ResNet's 3x3 convolutions already ran at the FMA peak directly (ResNet-18's layer1
// at 466 us for 231 MFLOP, 2 Zen 5 cores, as ONNX Runtime's 468 us), so only fewer FLOPs
// make them faster. A Halide prototype of this schedule on the same cores: 56x56x64 in 250
// us, 28x28x128 in 225-255 us, 14x14x256 in 260-280 us (1.7-2x the direct convolution).
#pragma once

#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

// Rewrites each NHWC conv2d that F(2x2, 3x3) serves (3x3, stride 1, dilation 1, pads 1, one
// group, constant weights, even H and W of at least 8, at least 16 input and output channels)
// into a conv2d_winograd reading the transformed weights (graph::conv2d_winograd_weights_shape:
// [4, 4, Cin, Cout], in panels of output channels where they divide); returns one log line
// per rewrite, none when it left the graph alone. 7x7 maps (ResNet's last stage) are left direct:
// their 4x4 tiles would compute 64 outputs for 49, and their weights (9.4 MB at 512 channels)
// already bound them by memory, which 16/9 as much would make worse.
std::vector<std::string> to_winograd(graph::Graph& g);

// U = G g G^T for weights [Cout, Cin, 3, 3] (row-major), U[m][k][ci][co] with m along H and k
// along W, laid out as graph::conv2d_winograd_weights_shape(cin, cout) says.
std::vector<float> winograd_weights(const std::vector<float>& w, int64_t cout, int64_t cin);

}  // namespace opfuse::fusion
