// The pattern language, the rule library and the matcher.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <map>

#include "fusion/graph/builder.h"
#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/json_io.h"
#include "fusion/pattern/matcher.h"

using namespace opfuse::fusion;
using namespace opfuse::graph;

namespace {

std::vector<std::string> names(const IndexedGraph& ig, const Match& m) {
  std::vector<std::string> out;
  for (size_t n : m.nodes) out.push_back(ig.node(n).name);
  return out;
}

Graph load(const std::string& model) {
  return load_graph_json(std::string(OPFUSE_MODELS_DIR) + "/cpu/" + model + ".json");
}

}  // namespace

TEST_CASE("the parser reads the text's syntax with its precedence") {
  CHECK(to_string(parse_pattern("Conv -> BatchNorm -> Activation")) ==
        "Conv -> BatchNorm -> Activation");
  CHECK(to_string(parse_pattern("(Add | Mul | Activation)+")) == "(Add | Mul | Activation)+");
  CHECK(to_string(parse_pattern("(Linear || Linear || Linear) -> MatMul -> Softmax -> MatMul")) ==
        "(Linear || Linear || Linear) -> MatMul -> Softmax -> MatMul");
  // '||' binds tighter than '->', which binds tighter than '|'.
  const Pattern p = parse_pattern("Conv -> Pool || Pool | relu");
  CHECK(p.kind == Pattern::Kind::alt);
  CHECK(p.children[0].kind == Pattern::Kind::seq);
  CHECK(p.children[0].children[1].kind == Pattern::Kind::par);
  CHECK(parse_pattern("Elementwise*").kind == Pattern::Kind::star);
  CHECK(parse_pattern("conv2d -> relu").children[0].name == "conv2d");  // IR op names too
}

TEST_CASE("pattern syntax errors say where and what") {
  CHECK_THROWS_WITH_AS(parse_pattern("Conv -> Frobnicate"),
                       doctest::Contains("unknown op or op class 'Frobnicate'"), PatternError);
  CHECK_THROWS_WITH_AS(parse_pattern("Conv -> "),
                       doctest::Contains("expected an op name at the end"), PatternError);
  CHECK_THROWS_WITH_AS(parse_pattern("(Conv -> Relu"), doctest::Contains("column"), PatternError);
  CHECK_THROWS_WITH_AS(parse_pattern("Conv ) Relu"), doctest::Contains("unexpected ')'"),
                       PatternError);
}

TEST_CASE("rule files: one rule a line, priorities, comments, errors with the line number") {
  const auto rules =
      parse_rules("# mine\nbias_relu: BiasAdd -> Activation @ 2.5\n\nsig: sigmoid\n", "mine.rules");
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].name == "bias_relu");
  CHECK(rules[0].priority == 2.5);
  CHECK(rules[1].pattern.name == "sigmoid");
  CHECK_THROWS_WITH_AS(parse_rules("ok: relu\nbad: relu -> ->\n", "r.rules"),
                       doctest::Contains("r.rules:2"), PatternError);
  CHECK_THROWS_WITH_AS(parse_rules("a: relu\na: tanh\n", "r.rules"),
                       doctest::Contains("duplicate rule name 'a'"), PatternError);
  CHECK_THROWS_WITH_AS(parse_rules("no colon here\n"),
                       doctest::Contains("expected 'name: pattern'"), PatternError);
}

TEST_CASE("exercise 7.3: 'consecutive elementwise ops fuse' matches three concrete chains") {
  // The rule, formally: EW+ ::= (Add | Mul | Activation)+ (7.2.1), in opfuse's syntax:
  const Rule ew = parse_rules("ew: (Add | Mul | Activation)+")[0];
  struct Chain {
    const char* name;
    std::function<GraphBuilder::T(GraphBuilder&, GraphBuilder::T)> build;
    size_t ops;
  };
  const std::vector<Chain> chains = {
      {"bias + relu", [](GraphBuilder& g, auto x) { return g.relu(g.add(x, g.param("b", {16}))); },
       2},
      {"scale + shift + gelu",
       [](GraphBuilder& g, auto x) {
         return g.gelu(g.add(g.mul(x, g.param("s", {1})), g.param("t", {1})));
       },
       3},
      {"swish-like x * sigmoid(x) + tanh",
       [](GraphBuilder& g, auto x) { return g.tanh(g.mul(g.sigmoid(x), x)); }, 3},
  };
  for (const Chain& c : chains) {
    CAPTURE(c.name);
    GraphBuilder b("chain");
    auto x = b.input("x", {4, 16});
    b.output(c.build(b, x));
    const Graph g = b.build();
    const IndexedGraph ig(g);
    const std::vector<Match> m = match_rule(ig, ew);
    REQUIRE(m.size() == 1);
    CHECK(m[0].nodes.size() == c.ops);
  }
}

TEST_CASE("the built-in rules find the text's patterns in the zoo") {
  const Graph cbr = load("cbr_pool");
  const IndexedGraph ig(cbr);
  const Rule* cba = nullptr;
  for (const auto& r : builtin_rules()) {
    if (r.name == "cba") cba = &r;
  }
  REQUIRE(cba);
  const auto m = match_rule(ig, *cba);
  REQUIRE(m.size() == 1);
  CHECK(names(ig, m[0]) == std::vector<std::string>{"conv2d_0", "batch_norm_0", "relu_0"});

  const Graph att = load("attention");
  const IndexedGraph ia(att);
  std::map<std::string, std::vector<std::string>> found;
  for (const Match& mm : match_rules(ia, builtin_rules())) {
    if (mm.rule == "qkv" || mm.rule == "attention") found[mm.rule] = names(ia, mm);
  }
  CHECK(found["qkv"] == std::vector<std::string>{"linear_0", "linear_1", "linear_2"});
  CHECK(found["attention"] ==
        std::vector<std::string>{"transpose_0", "matmul_0", "mul_0", "softmax_0", "matmul_1"});

  const Graph mixed = load("mixed");
  const IndexedGraph im(mixed);
  bool pools = false;
  for (const Match& mm : match_rules(im, builtin_rules())) {
    if (mm.rule == "pool_siblings") {
      pools = true;
      CHECK(names(im, mm) == std::vector<std::string>{"max_pool_0", "avg_pool_0"});
      REQUIRE(mm.siblings.size() == 1);
      CHECK(mm.siblings[0].size() == 2);
    }
  }
  CHECK(pools);
}

TEST_CASE("EW+ on a long chain is one maximal match, found from its first node") {
  GraphBuilder b("long");
  auto x = b.input("x", {64});
  for (int i = 0; i < 50; ++i) x = (i % 2) ? b.relu(x) : b.tanh(x);
  b.output(x);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const auto m = match_rule(ig, parse_rules("ew: Elementwise+")[0]);
  REQUIRE(m.size() == 1);
  CHECK(m[0].nodes.size() == 50);
}

TEST_CASE("a pathological rule stays bounded") {
  // Nested stars and alternatives over a wide graph: without bounds this explodes.
  GraphBuilder b("wide");
  auto x = b.input("x", {8});
  std::vector<std::string> layer{x};
  for (int d = 0; d < 12; ++d) {
    std::vector<std::string> next;
    for (const auto& t : layer) {
      next.push_back(b.relu(t));
      if (next.size() < 8) next.push_back(b.tanh(t));
    }
    layer = next;
  }
  for (const auto& t : layer) b.output(t);
  const Graph g = b.build();
  const IndexedGraph ig(g);
  const Rule r = parse_rules("p: ((Any | Elementwise)* -> (relu | tanh)*)+ -> (Any || Any)*")[0];
  const auto m = match_rule(ig, r);
  CHECK(!m.empty());
  for (const auto& mm : m) CHECK(mm.nodes.size() <= g.nodes().size());
}
