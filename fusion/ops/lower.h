// The operator library: every graph node lowered to Halide Funcs — the algorithm only, no
// schedule (every Func is left inline; schedules/ decides where each is computed).
//
// Tensors are row-major; a Halide Func's first argument is the innermost dimension, so a
// tensor of shape [d0, d1, ..., dk] is a Func f(x_k, ..., x_1, x_0). Every Func computes in
// f32; f16 graph inputs are widened on entry and f16 outputs are narrowed by the caller.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "fusion/graph/graph.h"
#include "fusion/ops/host_buffer.h"

namespace opfuse::ops {

// The Funcs of one node. roles[i] says what funcs[i] is, for the schedule emitter:
//   "output"   the node's value (always a pure definition, so it can be inlined)
//   "acc"      an anchor's accumulator (conv, matmul, linear): pure init + update over an RDom
//   "sum"      a window or global pool's running sum
//   "padded"   a boundary condition (constant exterior) of a window op's input
//   "factor"   batch norm's per-channel gamma / sqrt(var + eps)
//   "mean", "var", "max", "exp"   row statistics of layer norm and softmax
struct LoweredNode {
  std::string node;                 // graph node name
  std::vector<Halide::Func> funcs;  // every Func the op defined, its output last
  std::vector<std::string> roles;   // parallel to funcs
  Halide::Func output() const { return funcs.back(); }
};

struct LoweredGraph {
  std::map<std::string, Halide::Func> tensors;  // every tensor, by name (sources included)
  std::vector<LoweredNode> nodes;               // in topological order
  std::vector<Halide::Func> outputs;            // graph outputs, in order
};

// `sources` holds a Func for every graph input and param (an ImageParam, a Buffer wrapper or a
// Generator Input), with the tensor's rank in Halide's argument order. `g` must be validated.
LoweredGraph lower(const graph::Graph& g, const std::map<std::string, Halide::Func>& sources);

// Reads element `idx` (row-major order) of `f`.
Halide::Expr at(const Halide::Func& f, const std::vector<Halide::Expr>& idx);
// The Vars of a tensor of rank `rank`, row-major order, named after `prefix`.
std::vector<Halide::Var> make_vars(size_t rank, const std::string& prefix = "d");
// The Halide type a tensor of `d` is stored in (inputs, params and outputs of a pipeline).
Halide::Type halide_type(graph::DType d);

// Halide argument list (innermost first) from row-major Vars.
std::vector<Halide::Var> halide_args(const std::vector<Halide::Var>& row_major);

}  // namespace opfuse::ops
