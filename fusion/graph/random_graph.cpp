#include "fusion/graph/random_graph.h"

#include <random>

#include "fusion/graph/builder.h"

namespace opfuse::graph {

Graph random_graph(uint64_t seed, const RandomGraphOptions& o) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  GraphBuilder g("random_" + std::to_string(seed));
  const int64_t S = o.spatial;
  std::vector<std::string> recent{g.input("x", {1, o.channels, S, S}, Layout::NCHW)};
  std::vector<bool> consumed{false};  // per entry of `recent`
  auto channels = [&](const std::string& t) { return g.shape(t)[1]; };
  auto choose = [&]() {
    const size_t lo = recent.size() > o.window ? recent.size() - o.window : 0;
    return lo + pick(recent.size() - lo);
  };
  for (size_t i = 0; i < o.nodes; ++i) {
    const size_t a = choose();
    const std::string x = recent[a];
    std::string y;
    switch (pick(9)) {
      case 0:
        y = g.relu(x);
        break;
      case 1:
        y = g.tanh(x);
        break;
      case 2:
        y = g.sigmoid(x);
        break;
      case 3:
        y = g.batch_norm(x);
        break;
      case 4: {
        const int64_t cout = pick(3) == 0 ? o.channels : (pick(2) ? 4 : 8), k = pick(2) ? 3 : 1;
        Conv2dOptions c;
        c.pads = {k / 2, k / 2, k / 2, k / 2};
        y = g.conv2d(x, g.param("w" + std::to_string(i), {cout, channels(x), k, k}), c);
        break;
      }
      case 5:
        y = pick(2) ? g.max_pool(x, 3, 1, 1) : g.avg_pool(x, 3, 1, 1);
        break;
      default: {  // binary with a same-shaped partner in the window: diamonds and joins
        const size_t lo = recent.size() > o.window ? recent.size() - o.window : 0;
        size_t partner = recent.size();
        for (size_t k = recent.size(); k-- > lo && partner == recent.size();) {
          if (k != a && g.shape(recent[k]) == g.shape(x) && pick(2)) partner = k;
        }
        if (partner == recent.size()) {
          y = g.leaky_relu(x);
        } else {
          consumed[partner] = true;
          y = pick(2) ? g.add(x, recent[partner]) : g.mul(x, recent[partner]);
        }
      }
    }
    consumed[a] = true;
    recent.push_back(y);
    consumed.push_back(false);
  }
  // Graph outputs: every produced tensor nobody consumes, so no node is dead.
  for (size_t k = 1; k < recent.size(); ++k) {
    if (!consumed[k]) g.output(recent[k]);
  }
  Graph out = g.build();
  if (o.stateful_fraction > 0) {
    Graph marked;
    marked.name = out.name;
    for (const auto& name : out.tensor_names()) {
      if (out.tensor(name).kind != TensorKind::intermediate) marked.add_tensor(out.tensor(name));
    }
    std::uniform_real_distribution<double> u(0, 1);
    for (Node n : out.nodes()) {
      if (u(rng) < o.stateful_fraction) n.attrs["stateful"] = int64_t{1};
      marked.add_node(n);
    }
    for (const auto& t : out.outputs()) marked.mark_output(t);
    marked.validate();
    return marked;
  }
  return out;
}

}  // namespace opfuse::graph
