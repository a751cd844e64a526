// The graph IR: tensors and operator nodes, as in TVM's Relax/Relay front ends.
//
//   inputs, params ──► node ──► intermediate ──► node ──► ... ──► outputs
//
// A Graph holds named tensors (shape, dtype, layout) and nodes (op, attributes, inputs,
// outputs). Shapes are row-major: the last axis is contiguous. Graph inputs and params
// (weights) are declared with their shapes; every other tensor's shape is inferred from the
// op schemas (op_schema.h) by validate(), which also checks that the graph is a DAG with
// unique names and no dangling reference. Every error is a GraphError that names the node
// or tensor and says what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace opfuse::graph {

// Integer tensors (token ids, attention masks) index (gather), move (reshape, transpose ...)
// or convert (cast); they are held on the host as exact f32 values (|v| <= 2^24).
enum class DType { f32, f16, i64, i32 };
inline bool is_integer(DType d) { return d == DType::i64 || d == DType::i32; }
// The largest magnitude an integer held as f32 keeps exactly.
constexpr int64_t kMaxExactInteger = int64_t(1) << 24;
enum class Layout { none, NCHW, NHWC };
enum class TensorKind { input, param, intermediate };

// Fusion kinds, ordered as in TVM's OpPatternKind: a consumer of a lower kind fuses into a
// producer of a higher kind more easily (elementwise into anything, nothing into opaque).
enum class FusionKind {
  elementwise,
  broadcast,
  injective,
  reduction,
  out_elementwise_fusable,
  opaque
};

using Shape = std::vector<int64_t>;

// Sizes given to a model's symbolic dimensions (ONNX dim_param, a name in a graph file's input
// shape): "batch" -> 8. A graph is always built at one binding; its shapes are then constant
// (exercise 7.6: dynamic shapes are served by graphs bound per size, fusion/frontend/dynamic.h).
using DimBindings = std::map<std::string, int64_t>;

// How a param's values are made when the graph file carries none: uniform in [lo, hi)
// (a constant when lo == hi), from a generator seeded by the tensor's name, so every tool
// sees the same weights.
struct ParamInit {
  double lo = -0.5;
  double hi = 0.5;
  bool operator==(const ParamInit& o) const { return lo == o.lo && hi == o.hi; }
};

struct Tensor {
  std::string name;
  Shape shape;  // empty for an intermediate until validate() infers it
  DType dtype = DType::f32;
  Layout layout = Layout::none;
  TensorKind kind = TensorKind::intermediate;
  ParamInit init;           // params only
  std::vector<float> data;  // params only: explicit values (e.g. ONNX initializers)
  // Inputs only: per axis, the symbol the model names it by ("" for a fixed extent), or empty
  // when every extent is fixed; `shape` then holds the size the symbol was bound to.
  std::vector<std::string> dim_names;
  bool operator==(const Tensor& o) const;
};

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;
using Attrs = std::map<std::string, AttrValue>;

struct Node {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  Attrs attrs;
  bool operator==(const Node& o) const {
    return name == o.name && op == o.op && inputs == o.inputs && outputs == o.outputs &&
           attrs == o.attrs;
  }
};

// A mistake in a graph given by the user. The message names the node or tensor.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Halide buffers index with 32-bit signed integers: every extent and every tensor's element
// count must stay below 2^31.
inline constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;

class Graph {
 public:
  std::string name = "graph";

  // --- construction (no checks beyond name clashes; validate() checks the rest) ---------
  void add_tensor(Tensor t);
  void add_node(Node n);
  void mark_output(const std::string& tensor);

  // --- queries -----------------------------------------------------------------------
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  // Tensors in declaration order (inputs and params first, then intermediates by node).
  const std::vector<std::string>& tensor_names() const { return tensor_order_; }
  bool has_tensor(const std::string& name) const { return tensors_.count(name) != 0; }
  const Tensor& tensor(const std::string& name) const;
  Tensor& tensor(const std::string& name);
  std::vector<std::string> inputs() const;                // kind == input, declaration order
  std::vector<std::string> params() const;                // kind == param, declaration order
  const Node* producer(const std::string& tensor) const;  // nullptr for inputs and params
  std::vector<const Node*> consumers(const std::string& tensor) const;
  // Node indices in a topological order (valid after validate()).
  const std::vector<size_t>& topo_order() const { return topo_; }

  // Checks the whole graph and infers every intermediate's shape and dtype. Throws
  // GraphError on the first problem. Idempotent.
  void validate();
  // Infers and checks one node whose inputs are already known (the builder's eager path).
  void infer_node(size_t node_index);

  // Exact structural equality: same tensors (incl. params' init/data), nodes, outputs.
  bool operator==(const Graph& o) const;

 private:
  std::map<std::string, Tensor> tensors_;
  std::vector<std::string> tensor_order_;
  std::vector<Node> nodes_;
  std::map<std::string, size_t> node_index_;  // node name -> index in nodes_
  std::vector<std::string> outputs_;
  std::vector<size_t> topo_;
};

// Names for printing and for the file formats.
const char* to_string(DType d);
const char* to_string(Layout l);
const char* to_string(TensorKind k);
const char* to_string(FusionKind k);
DType dtype_from_string(const std::string& s);
Layout layout_from_string(const std::string& s);
std::string shape_to_string(const Shape& s);
int64_t num_elements(const Shape& s);
// The leading and trailing dims a reshape from `in` to `out` keeps (equal extents from either
// end): they map one to one; the dims between are flattened and split again.
std::pair<size_t, size_t> reshape_kept_dims(const Shape& in, const Shape& out);
size_t dtype_bytes(DType d);

// Per symbol, the (input, axis) pairs it names.
using SymbolUses = std::map<std::string, std::vector<std::pair<std::string, int>>>;
// The symbols of a graph's inputs.
SymbolUses symbolic_dims(const Graph& g);
// The size of one input dimension named `symbol`, from `bindings`; GraphError naming the input,
// the axis and how to give it when it is missing or not positive. `source` prefixes the error.
int64_t bind_dim(const std::string& source, const std::string& input, size_t axis,
                 const std::string& symbol, const DimBindings& bindings);
// GraphError when `bindings` names a symbol no input of `g` has (a misspelt --dim).
void check_bindings_used(const Graph& g, const DimBindings& bindings, const std::string& source);

// The nodes `nodes` of a validated graph as a graph of their own: tensors they read from
// outside become inputs (params stay params, with their values), tensors they produce that are
// read outside or are graph outputs become outputs. GraphError when a name is not a node.
Graph subgraph(const Graph& g, const std::vector<std::string>& nodes, const std::string& name);

}  // namespace opfuse::graph
