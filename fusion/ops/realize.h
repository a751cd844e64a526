// Runs a graph through Halide's JIT with every Func computed at root: each op its own loop
// nest over its whole output, nothing fused. It checks the operator library against the
// reference executor, independent of any fusion decision.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "fusion/graph/host_tensor.h"
#include "fusion/ops/host_buffer.h"

namespace opfuse::ops {

// A Func over a Halide buffer for every graph input (from `inputs`, shapes checked) and param
// (from `params`, else graph::param_values), ready for lower(). `buffers` keeps the data
// alive. f16 tensors are stored as Halide float16.
// Params in `pack` (conv weights [Cout, Cin, KH, KW] that register blocks read pre-packed)
// are stored as pack_conv_weights() lays them out for a target of `lanes` f32 lanes.
std::map<std::string, Halide::Func> buffer_sources(
    const graph::Graph& g, const graph::TensorMap& inputs, const graph::TensorMap& params,
    std::vector<Halide::Buffer<>>& buffers, const std::set<std::string>& pack = {}, int lanes = 1);

// Conv weights [Cout, Cin, KH, KW] (Halide dims kw, kh, ci, co) as an NHWC convolution's
// register block reads them, packed once from known values instead of on every call: one
// vector load of output channels per (ci, kw, kh). Where Cout is a multiple of the target's
// vector lanes, in blocks of `lanes` output channels, each block's weights contiguous: rank
// 5, dims (lane, kw, kh, ci, block), so that a reduction chunk of input channels
// (schedules::RegisterBlock::reduction_chunk) reads one contiguous run of KH KW c vectors.
// A channel block then streams its weights front to back; Cout innermost (rank 4), a block
// of 16-32 channels reads 64-128 bytes every Cout floats, which the hardware prefetchers do
// not follow. ResNet-18's 512-channel convs stream 9.4 MB of weights each from DRAM. Blocked
// against Cout innermost, runs alternated in one process, 2 Zen 5 cores (AVX-512): ResNet-18
// x0.96 (twice), MobileNetV2 x0.94 and x0.99, EfficientNet-B0 x0.96 and x0.97. With ci
// fastest instead ((lane, ci, kw, kh, block), the unchunked loop order), a chunk reads KH KW
// runs Cin vectors apart, and ResNet-18 measured no gain.
// Elsewhere (Cout not a multiple of the lanes, whose blocks ShiftInwards onto unaligned
// channels) Cout innermost. conv_weight_block: the block, 0 for Cout innermost.
int conv_weight_block(const graph::Shape& weights, int lanes);
Halide::Buffer<> pack_conv_weights(const Halide::Buffer<>& weights, int block);
// Where the weight (kw, kh, ci, co) lies in pack_conv_weights' buffer.
std::vector<Halide::Expr> packed_weight_index(const std::vector<Halide::Var>& kw_kh_ci_co,
                                              int block);
// The rank and extents (Halide's order) of pack_conv_weights' buffer.
std::vector<int> packed_weight_extents(const graph::Shape& weights, int block);
// A Func `name` of a tensor of `shape` held in `b`, as lower() reads it. With `pack` (conv
// weights a register block reads pre-packed), `b` is first replaced by its
// pack_conv_weights copy for `lanes` f32 lanes, which the Func reads through.
Halide::Func buffer_source(const std::string& name, Halide::Buffer<>& b,
                           const graph::Shape& shape, bool pack, int lanes);

// Returns the graph outputs, by name. f16 inputs and outputs are stored as Halide float16.
graph::TensorMap realize_root(const graph::Graph& g, const graph::TensorMap& inputs,
                              const graph::TensorMap& params = {});

}  // namespace opfuse::ops
