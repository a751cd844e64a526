#include "fusion/graph/graph.h"

#include <algorithm>
#include <deque>
#include <set>

#include "fusion/graph/op_schema.h"

namespace opfuse::graph {

bool Tensor::operator==(const Tensor& o) const {
  return name == o.name && shape == o.shape && dtype == o.dtype && layout == o.layout &&
         kind == o.kind && dim_names == o.dim_names && (kind != TensorKind::param || (init == o.init && data == o.data));
}

const char* to_string(DType d) {
  switch (d) {
    case DType::f16:
      return "f16";
    case DType::i64:
      return "i64";
    case DType::i32:
      return "i32";
    default:
      return "f32";
  }
}
const char* to_string(Layout l) {
  return l == Layout::NCHW ? "NCHW" : l == Layout::NHWC ? "NHWC" : "none";
}
const char* to_string(TensorKind k) {
  return k == TensorKind::input ? "input" : k == TensorKind::param ? "param" : "intermediate";
}
const char* to_string(FusionKind k) {
  switch (k) {
    case FusionKind::elementwise:
      return "elementwise";
    case FusionKind::broadcast:
      return "broadcast";
    case FusionKind::injective:
      return "injective";
    case FusionKind::reduction:
      return "reduction";
    case FusionKind::out_elementwise_fusable:
      return "out_elementwise_fusable";
    default:
      return "opaque";
  }
}
DType dtype_from_string(const std::string& s) {
  if (s == "f32" || s == "float32") return DType::f32;
  if (s == "f16" || s == "float16") return DType::f16;
  if (s == "i64" || s == "int64") return DType::i64;
  if (s == "i32" || s == "int32") return DType::i32;
  throw GraphError("unknown dtype '" + s + "' (expected f32, f16, i64 or i32)");
}
Layout layout_from_string(const std::string& s) {
  if (s == "NCHW") return Layout::NCHW;
  if (s == "NHWC") return Layout::NHWC;
  if (s.empty() || s == "none") return Layout::none;
  throw GraphError("unknown layout '" + s + "' (expected NCHW, NHWC or none)");
}
std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}
std::pair<size_t, size_t> reshape_kept_dims(const Shape& in, const Shape& out) {
  size_t lead = 0, trail = 0;
  while (lead < in.size() && lead < out.size() && in[lead] == out[lead]) ++lead;
  while (trail + lead < in.size() && trail + lead < out.size() &&
         in[in.size() - 1 - trail] == out[out.size() - 1 - trail]) {
    ++trail;
  }
  return {lead, trail};
}
int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return INT64_MAX;  // saturate: callers compare to limits
    n *= d;
  }
  return n;
}
size_t dtype_bytes(DType d) { return d == DType::f16 ? 2 : d == DType::i64 ? 8 : 4; }

// ---------------------------------------------------------------------------------------

void Graph::add_tensor(Tensor t) {
  if (t.name.empty()) throw GraphError("a tensor has an empty name");
  if (tensors_.count(t.name)) {
    throw GraphError("duplicate tensor name '" + t.name + "'");
  }
  tensor_order_.push_back(t.name);
  tensors_.emplace(t.name, std::move(t));
}

void Graph::add_node(Node n) {
  if (n.name.empty()) throw GraphError("a node of op '" + n.op + "' has an empty name");
  if (node_index_.count(n.name)) throw GraphError("duplicate node name '" + n.name + "'");
  for (const std::string& out : n.outputs) {
    if (tensors_.count(out)) {
      const Node* p = producer(out);
      throw GraphError("node '" + n.name + "': output '" + out + "' is already " +
                       (p ? "produced by node '" + p->name + "'"
                          : std::string("declared as a graph ") + to_string(tensors_[out].kind)));
    }
    Tensor t;
    t.name = out;
    add_tensor(std::move(t));
  }
  node_index_[n.name] = nodes_.size();
  nodes_.push_back(std::move(n));
  topo_.clear();
}

void Graph::mark_output(const std::string& tensor) {
  if (std::find(outputs_.begin(), outputs_.end(), tensor) != outputs_.end()) {
    throw GraphError("tensor '" + tensor + "' is marked as a graph output twice");
  }
  outputs_.push_back(tensor);
}

const Tensor& Graph::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw GraphError("no tensor named '" + name + "'");
  return it->second;
}
Tensor& Graph::tensor(const std::string& name) {
  return const_cast<Tensor&>(static_cast<const Graph&>(*this).tensor(name));
}

std::vector<std::string> Graph::inputs() const {
  std::vector<std::string> out;
  for (const auto& n : tensor_order_) {
    if (tensors_.at(n).kind == TensorKind::input) out.push_back(n);
  }
  return out;
}
std::vector<std::string> Graph::params() const {
  std::vector<std::string> out;
  for (const auto& n : tensor_order_) {
    if (tensors_.at(n).kind == TensorKind::param) out.push_back(n);
  }
  return out;
}

const Node* Graph::producer(const std::string& tensor) const {
  for (const Node& n : nodes_) {
    if (std::find(n.outputs.begin(), n.outputs.end(), tensor) != n.outputs.end()) return &n;
  }
  return nullptr;
}

std::vector<const Node*> Graph::consumers(const std::string& tensor) const {
  std::vector<const Node*> out;
  for (const Node& n : nodes_) {
    if (std::find(n.inputs.begin(), n.inputs.end(), tensor) != n.inputs.end()) out.push_back(&n);
  }
  return out;
}

namespace {

void check_declared_shape(const Tensor& t) {
  const std::string what = std::string("graph ") + to_string(t.kind) + " '" + t.name + "'";
  if (t.shape.empty()) throw GraphError(what + " has no shape (rank 0 is not supported)");
  for (int64_t d : t.shape) {
    if (d <= 0) {
      throw GraphError(what + " has shape " + shape_to_string(t.shape) +
                       ": every extent must be >= 1");
    }
  }
  if (num_elements(t.shape) > kMaxElements) {
    throw GraphError(what + " has shape " + shape_to_string(t.shape) +
                     ": more than 2^31-1 elements, which 32-bit Halide indexing cannot address");
  }
  if (t.kind == TensorKind::param && !t.data.empty() &&
      int64_t(t.data.size()) != num_elements(t.shape)) {
    throw GraphError(what + " carries " + std::to_string(t.data.size()) + " values but its shape " +
                     shape_to_string(t.shape) + " needs " + std::to_string(num_elements(t.shape)));
  }
  if (t.kind == TensorKind::param && !(t.init.lo <= t.init.hi)) {
    throw GraphError(what + " has an init range with lo > hi");
  }
}

}  // namespace

void Graph::infer_node(size_t index) {
  Node& n = nodes_.at(index);
  std::vector<const Tensor*> ins;
  for (const std::string& name : n.inputs) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      throw GraphError("node '" + n.name + "' (" + n.op + "): input '" + name +
                       "' is not a graph input, param or any node's output");
    }
    ins.push_back(&it->second);
  }
  const OpSchema& schema = schema_of(n);
  // Integer tensors index (gather's indices), move (injective ops) or convert (cast); an
  // index is an integer.
  for (size_t i = 0; i < ins.size(); ++i) {
    const bool indices = n.op == "gather" && i == 1;
    if (indices && !is_integer(ins[i]->dtype)) {
      fail(n, "indices '" + ins[i]->name + "' are " + to_string(ins[i]->dtype) +
                  ": gather indices are i64 or i32");
    }
    if (is_integer(ins[i]->dtype) && !indices && n.op != "cast" &&
        schema.kind != FusionKind::injective && !has_trait(n.op, OpTrait::moves_layout)) {
      fail(n, "reads the " + std::string(to_string(ins[i]->dtype)) + " tensor '" + ins[i]->name +
                  "': integer tensors only index (gather), move (reshape, transpose, expand, "
                  "slice, concat, gather) or convert (cast)");
    }
  }
  const std::vector<Shape> shapes = infer_shapes(n, ins);
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    Tensor& out = tensors_.at(n.outputs[i]);
    out.shape = shapes[i];
    out.dtype = n.op != "cast"                           ? ins[0]->dtype
                : attr_string(n, "to", "float") == "i64" ? DType::i64
                                                         : DType::f32;
    const bool keeps_layout = shapes[i].size() == 4 && n.op != "transpose" && n.op != "reshape";
    out.layout = keeps_layout ? ins[0]->layout : Layout::none;
    for (int64_t d : out.shape) {
      if (d <= 0)
        fail(n, "output '" + out.name + "' would be empty: " + shape_to_string(out.shape));
    }
    if (num_elements(out.shape) > kMaxElements) {
      fail(n, "output '" + out.name + "' " + shape_to_string(out.shape) +
                  " has more than 2^31-1 elements, which 32-bit Halide indexing cannot address");
    }
  }
}

void Graph::validate() {
  // Step 1: declared tensors (inputs and params) have usable shapes.
  for (const auto& name : tensor_order_) {
    const Tensor& t = tensors_.at(name);
    if (t.kind != TensorKind::intermediate) check_declared_shape(t);
  }
  // Step 2: every reference resolves.
  for (const Node& n : nodes_) {
    schema_of(n);
    for (const std::string& in : n.inputs) {
      if (!tensors_.count(in)) {
        throw GraphError("node '" + n.name + "' (" + n.op + "): input '" + in +
                         "' is not a graph input, param or any node's output (dangling)");
      }
    }
  }
  if (outputs_.empty()) throw GraphError("graph '" + name + "' has no outputs");
  for (const std::string& out : outputs_) {
    if (!tensors_.count(out)) {
      throw GraphError("graph output '" + out + "' is not a tensor of graph '" + name + "'");
    }
  }
  // Step 3: topological order (Kahn); whatever is left lies on a cycle.
  std::map<std::string, size_t> producer_of;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const auto& o : nodes_[i].outputs) producer_of[o] = i;
  }
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<size_t>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const auto& in : nodes_[i].inputs) {
      auto it = producer_of.find(in);
      if (it != producer_of.end()) {
        ++pending[i];
        users[it->second].push_back(i);
      }
    }
  }
  std::deque<size_t> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (size_t u : users[i]) {
      if (--pending[u] == 0) ready.push_back(u);
    }
  }
  if (order.size() != nodes_.size()) {
    std::string cycle;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (pending[i] > 0) cycle += (cycle.empty() ? "'" : ", '") + nodes_[i].name + "'";
    }
    throw GraphError("graph '" + name + "' has a cycle through nodes " + cycle);
  }
  // Step 4: shapes and dtypes, in topological order.
  for (size_t i : order) infer_node(i);
  for (const auto& o : outputs_) {
    if (is_integer(tensors_.at(o).dtype)) {
      throw GraphError("graph '" + name + "': output '" + o + "' is " +
                       to_string(tensors_.at(o).dtype) +
                       "; opfuse computes f32 and f16 outputs (cast it, or output what it indexes)");
    }
  }
  topo_ = std::move(order);
}

bool Graph::operator==(const Graph& o) const {
  // Declaration order matters only among inputs and among params (it is the calling
  // convention of a generated kernel); intermediates follow the nodes.
  if (name != o.name || nodes_ != o.nodes_ || outputs_ != o.outputs_ || inputs() != o.inputs() ||
      params() != o.params() || tensors_.size() != o.tensors_.size()) {
    return false;
  }
  for (const auto& [k, t] : tensors_) {
    auto it = o.tensors_.find(k);
    if (it == o.tensors_.end() || !(t == it->second)) return false;
  }
  return true;
}

SymbolUses symbolic_dims(const Graph& g) {
  SymbolUses out;
  for (const auto& name : g.inputs()) {
    const Tensor& t = g.tensor(name);
    for (size_t a = 0; a < t.dim_names.size(); ++a) {
      if (!t.dim_names[a].empty()) out[t.dim_names[a]].push_back({name, int(a)});
    }
  }
  return out;
}

int64_t bind_dim(const std::string& source, const std::string& input, size_t axis,
                 const std::string& symbol, const DimBindings& bindings) {
  const auto it = bindings.find(symbol);
  const std::string where = source + ": graph input '" + input + "' axis " + std::to_string(axis) +
                            " is the symbolic dimension '" + symbol + "'";
  if (it == bindings.end()) {
    std::string given;
    for (const auto& [s, v] : bindings) given += (given.empty() ? "" : ", ") + s;
    throw GraphError(where + "; give its size (opfuse run/plan/check: --dim " + symbol +
                     "=N, opfuse compile: --dim " + symbol + "=MIN..MAX)" +
                     (given.empty() ? "" : "; sizes were given for: " + given));
  }
  if (it->second < 1 || it->second > kMaxElements) {
    throw GraphError(where + ", given the size " + std::to_string(it->second) +
                     "; a size is 1 to " + std::to_string(kMaxElements));
  }
  return it->second;
}

void check_bindings_used(const Graph& g, const DimBindings& bindings, const std::string& source) {
  const auto dims = symbolic_dims(g);
  for (const auto& [symbol, size] : bindings) {
    if (dims.count(symbol)) continue;
    std::string have;
    for (const auto& [s, uses] : dims) have += (have.empty() ? "" : ", ") + s;
    throw GraphError(source + ": no input has a dimension named '" + symbol + "' (" +
                     (have.empty() ? std::string("its shapes are all fixed") : "its symbols: " + have) +
                     ")");
  }
}

Graph subgraph(const Graph& g, const std::vector<std::string>& nodes, const std::string& name) {
  std::set<std::string> members(nodes.begin(), nodes.end()), produced;
  std::vector<const Node*> chosen;
  for (size_t i : g.topo_order()) {
    if (members.count(g.nodes()[i].name)) chosen.push_back(&g.nodes()[i]);
  }
  if (chosen.size() != members.size()) {
    for (const auto& n : nodes) {
      bool found = false;
      for (const Node* c : chosen) found = found || c->name == n;
      if (!found) throw GraphError("subgraph: no node named '" + n + "' in '" + g.name + "'");
    }
  }
  Graph s;
  s.name = name;
  for (const Node* n : chosen) produced.insert(n->outputs.begin(), n->outputs.end());
  std::set<std::string> added;
  for (const Node* n : chosen) {
    for (const auto& in : n->inputs) {
      if (produced.count(in) || !added.insert(in).second) continue;
      Tensor t = g.tensor(in);
      if (t.kind == TensorKind::intermediate) t.kind = TensorKind::input;
      s.add_tensor(std::move(t));
    }
  }
  for (const Node* n : chosen) s.add_node(*n);  // declares its outputs; validate() infers them
  const std::set<std::string> graph_outputs(g.outputs().begin(), g.outputs().end());
  for (const Node* n : chosen) {
    for (const auto& out : n->outputs) {
      bool outside = graph_outputs.count(out) != 0;
      for (const Node* c : g.consumers(out)) outside = outside || !members.count(c->name);
      if (outside) s.mark_output(out);
    }
  }
  s.validate();
  return s;
}

}  // namespace opfuse::graph
