#include "fusion/frontend/winograd.h"

#include <cstdlib>
#include <cstring>
#include <set>

#include "fusion/graph/host_tensor.h"
#include "fusion/graph/op_schema.h"

namespace opfuse::fusion {
namespace {

using graph::Graph;
using graph::Node;
using graph::Tensor;

bool eligible(const Graph& g, const Node& n) {
  if (n.op != "conv2d" || n.inputs.size() < 2) return false;
  const Tensor &x = g.tensor(n.inputs[0]), &w = g.tensor(n.inputs[1]);
  if (w.kind != graph::TensorKind::param || x.shape.size() != 4 || w.shape.size() != 4) {
    return false;
  }
  for (size_t i = 2; i < n.inputs.size(); ++i) {
    if (g.tensor(n.inputs[i]).kind != graph::TensorKind::param) return false;
  }
  const graph::Window2d win = graph::conv2d_window(n, x, w);
  if (win.layout != graph::Layout::NHWC || win.groups != 1) return false;
  if (win.kernel != std::array<int64_t, 2>{3, 3} || win.strides != std::array<int64_t, 2>{1, 1} ||
      win.dilations != std::array<int64_t, 2>{1, 1}) {
    return false;
  }
  for (int64_t p : win.pads) {
    if (p != 1) return false;
  }
  const int64_t h = x.shape[1], wd = x.shape[2], cin = x.shape[3], cout = w.shape[0];
  return h % 2 == 0 && wd % 2 == 0 && h >= 8 && wd >= 8 && cin >= 16 && cout >= 16;
}

}  // namespace

std::vector<float> winograd_weights(const std::vector<float>& w, int64_t cout, int64_t cin) {
  // F(2x2, 3x3) (Lavin and Gray): U = G g G^T, G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]].
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const graph::WinogradWeights l =
      graph::conv2d_winograd_weights(graph::conv2d_winograd_weights_shape(cin, cout));
  std::vector<float> u(size_t(16 * cin * cout));
  for (int64_t co = 0; co < cout; ++co) {
    for (int64_t ci = 0; ci < cin; ++ci) {
      const float* g = &w[size_t((co * cin + ci) * 9)];  // g[kh][kw]
      double gg[4][3];                                   // G g: [m][kw]
      for (int m = 0; m < 4; ++m) {
        for (int s = 0; s < 3; ++s) {
          gg[m][s] = G[m][0] * g[0 * 3 + s] + G[m][1] * g[1 * 3 + s] + G[m][2] * g[2 * 3 + s];
        }
      }
      for (int m = 0; m < 4; ++m) {
        for (int k = 0; k < 4; ++k) {
          const double v = gg[m][0] * G[k][0] + gg[m][1] * G[k][1] + gg[m][2] * G[k][2];
          u[size_t(l.index(m, k, ci, co))] = float(v);
        }
      }
    }
  }
  return u;
}

std::vector<std::string> to_winograd(Graph& g) {
  // OPFUSE_WINOGRAD=0 keeps every convolution direct (to compare, or to bisect).
  const char* env = std::getenv("OPFUSE_WINOGRAD");
  if (env && std::strcmp(env, "0") == 0) return {};
  int rewritten = 0;
  for (const Node& n : g.nodes()) rewritten += eligible(g, n);
  if (rewritten == 0) return {};
  // The direct weights go where only rewritten convolutions read them: a compiled model
  // stores the transformed ones alone.
  std::set<std::string> read_directly;
  for (const Node& n : g.nodes()) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i != 1 || !eligible(g, n)) read_directly.insert(n.inputs[i]);
    }
  }
  Graph out;
  out.name = g.name;
  for (const auto& name : g.tensor_names()) {
    const Tensor& t = g.tensor(name);
    if (t.kind == graph::TensorKind::param && !read_directly.count(name)) continue;
    if (t.kind != graph::TensorKind::intermediate) out.add_tensor(t);
  }
  for (size_t idx : g.topo_order()) {
    Node n = g.nodes()[idx];
    if (eligible(g, n)) {
      const Tensor& w = g.tensor(n.inputs[1]);
      const int64_t cout = w.shape[0], cin = w.shape[1];
      Tensor u;
      u.name = n.inputs[1] + "_winograd";
      for (int i = 2; out.has_tensor(u.name); ++i) {
        u.name = n.inputs[1] + "_winograd" + std::to_string(i);
      }
      u.kind = graph::TensorKind::param;
      u.shape = graph::conv2d_winograd_weights_shape(cin, cout);
      u.data = winograd_weights(graph::param_values(w).data, cout, cin);
      n.op = "conv2d_winograd";
      n.inputs[1] = u.name;
      n.attrs.clear();
      out.add_tensor(std::move(u));
    }
    out.add_node(std::move(n));
  }
  for (const auto& o : g.outputs()) out.mark_output(o);
  out.validate();
  g = std::move(out);
  return {"winograd: " + std::to_string(rewritten) +
          " 3x3 convolutions as F(2x2, 3x3) (OPFUSE_WINOGRAD=0: direct)"};
}

}  // namespace opfuse::fusion
