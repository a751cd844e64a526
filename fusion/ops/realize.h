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
// Params in `pack` (conv and linear weights that register blocks read pre-packed)
// are stored as pack_weights() lays them out for a target of `lanes` f32 lanes.
std::map<std::string, Halide::Func> buffer_sources(
    const graph::Graph& g, const graph::TensorMap& inputs, const graph::TensorMap& params,
    std::vector<Halide::Buffer<>>& buffers, const std::set<std::string>& pack = {}, int lanes = 1);

// Conv weights [Cout, Cin, KH, KW] (Halide dims kw, kh, ci, co) as an NHWC convolution's
// register block reads them, packed once from known values instead of on every call: one
// vector load of output channels per (ci, kw, kh). Where Cout is a multiple of the target's
// vector lanes, in blocks of `lanes` output channels, and within a block in chunks of
// conv_weight_chunk(Cin) input channels: rank 6, dims (lane, ci in its chunk, kw, kh, chunk,
// block). That is the order a block's loops read them (schedules::RegisterBlock: input
// channels innermost, then kw, kh; a reduction chunk of channels outermost), so a channel
// block streams its weights front to back, which the hardware prefetchers follow; the
// weights of a network too large for the caches (ResNet-18's 44.6 MB) come from DRAM on every
// call. Runs alternated, 2 Zen 5 cores (AVX-512), ResNet-18 through the JIT: (lane, kw, kh,
// ci, block), where a chunk's loop steps KH KW vectors at a time, 9.42-10.28 ms; chunk-major
// 8.20-8.90 ms; four 512-channel 3x3 convs at 7x7 whose 37.6 MB of weights outgrow the L3,
// 850 -> 640 us each (466 us with their weights cached). Before that, blocked against Cout
// innermost: ResNet-18 x0.96 (twice), MobileNetV2 x0.94 and x0.99, EfficientNet-B0 x0.96 and
// x0.97. Elsewhere (Cout not a multiple of the lanes, whose blocks ShiftInwards onto
// unaligned channels) Cout innermost.
// A linear layer's [K, N] (Halide dims n, k) in panels where graph::linear_weight_panel says:
// rank 3, dims (lane, k, panel), the last panel's columns past N zero. weight_block: a conv's
// block (0: Cout innermost), a linear's panel (0: row-major).
int weight_block(const graph::Shape& weights, int lanes);
// Input channels a chunk: 32 (the record's reduction chunk for 3x3 convs on AVX2 and
// AVX-512, whose blocks' weight slices then fill L1; and 1-2 KB runs where a block reads all
// of Cin at once) where Cin is a larger multiple of 32, else all of Cin.
int conv_weight_chunk(int64_t cin);
Halide::Buffer<> pack_weights(const Halide::Buffer<>& weights, int block);
// Where the weight (kw, kh, ci, co) lies in pack_weights' buffer of weights with `cin`
// input channels.
std::vector<Halide::Expr> packed_weight_index(const std::vector<Halide::Var>& kw_kh_ci_co,
                                              int block, int64_t cin);
// The rank and extents (Halide's order) of pack_weights' buffer.
std::vector<int> packed_weight_extents(const graph::Shape& weights, int block);
// A Func `name` of a tensor of `shape` held in `b`, as lower() reads it. With `pack` (conv
// weights a register block reads pre-packed), `b` is first replaced by its
// pack_weights copy for `lanes` f32 lanes, which the Func reads through.
Halide::Func buffer_source(const std::string& name, Halide::Buffer<>& b,
                           const graph::Shape& shape, bool pack, int lanes);

// Returns the graph outputs, by name. f16 inputs and outputs are stored as Halide float16.
graph::TensorMap realize_root(const graph::Graph& g, const graph::TensorMap& inputs,
                              const graph::TensorMap& params = {});

}  // namespace opfuse::ops
