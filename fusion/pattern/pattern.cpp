#include "fusion/pattern/pattern.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "fusion/graph/op_schema.h"

namespace opfuse::fusion {
namespace {

using graph::FusionKind;

const std::set<std::string> kActivations = {"relu",    "leaky_relu", "clamp",       "relu6",
                                            "sigmoid", "tanh",       "gelu",        "hard_swish",
                                            "hard_sigmoid"};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Pattern parse() {
    Pattern p = alt();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return p;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw PatternError("pattern \"" + s_ + "\", column " + std::to_string(i_ + 1) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(const std::string& tok) {
    skip();
    if (s_.compare(i_, tok.size(), tok) == 0) {
      i_ += tok.size();
      return true;
    }
    return false;
  }
  static Pattern node(Pattern::Kind k, std::vector<Pattern> c) {
    if (c.size() == 1 &&
        (k == Pattern::Kind::seq || k == Pattern::Kind::par || k == Pattern::Kind::alt)) {
      return std::move(c[0]);
    }
    Pattern p;
    p.kind = k;
    p.children = std::move(c);
    return p;
  }
  Pattern alt() {
    std::vector<Pattern> c{seq()};
    // '|' but not '||'
    while (true) {
      skip();
      if (i_ < s_.size() && s_[i_] == '|' && (i_ + 1 >= s_.size() || s_[i_ + 1] != '|')) {
        ++i_;
        c.push_back(seq());
      } else {
        break;
      }
    }
    return node(Pattern::Kind::alt, std::move(c));
  }
  Pattern seq() {
    std::vector<Pattern> c{par()};
    while (eat("->")) c.push_back(par());
    return node(Pattern::Kind::seq, std::move(c));
  }
  Pattern par() {
    std::vector<Pattern> c{post()};
    while (eat("||")) c.push_back(post());
    return node(Pattern::Kind::par, std::move(c));
  }
  Pattern post() {
    Pattern p = atom();
    while (true) {
      if (eat("*")) {
        p = node(Pattern::Kind::star, {std::move(p)});
      } else if (eat("+")) {
        p = node(Pattern::Kind::plus, {std::move(p)});
      } else {
        return p;
      }
    }
  }
  Pattern atom() {
    skip();
    if (eat("(")) {
      Pattern p = alt();
      if (!eat(")")) fail("expected ')'");
      return p;
    }
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      ++i_;
    if (start == i_)
      fail(i_ < s_.size() ? "expected an op name, got '" + std::string(1, s_[i_]) + "'"
                          : "expected an op name at the end");
    Pattern p;
    p.name = s_.substr(start, i_ - start);
    if (!is_known_atom(p.name)) {
      i_ = start;
      fail("unknown op or op class '" + p.name + "'");
    }
    return p;
  }
  static bool is_known_atom(const std::string& name);

  const std::string& s_;
  size_t i_ = 0;
};

const std::set<std::string>& classes() {
  static const std::set<std::string> c = {
      "Elementwise", "Activation", "Add",       "Sub",           "Mul",    "Div",
      "BiasAdd",     "BatchNorm",  "LayerNorm", "Softmax",       "Conv",   "MatMul",
      "Linear",      "MaxPool",    "AvgPool",   "GlobalAvgPool", "Pool",   "Transpose",
      "Reshape",     "Concat",     "Reduction", "Injective",     "Anchor", "Any"};
  return c;
}

bool Parser::is_known_atom(const std::string& name) {
  return classes().count(name) || graph::find_op(name) != nullptr;  // an IR op (op_schema)
}

}  // namespace

bool atom_matches(const std::string& a, const graph::Node& n, FusionKind k) {
  const std::string& op = n.op;
  if (a == op || a == "Any") return true;
  if (a == "Elementwise") return k == FusionKind::elementwise || k == FusionKind::broadcast;
  if (a == "Activation") return kActivations.count(op) != 0;
  if (a == "Add") return op == "add";
  if (a == "Sub") return op == "sub";
  if (a == "Mul") return op == "mul";
  if (a == "Div") return op == "div";
  if (a == "BiasAdd") return op == "bias_add";
  if (a == "BatchNorm") return op == "batch_norm";
  if (a == "LayerNorm") return op == "layer_norm";
  if (a == "Softmax") return op == "softmax";
  if (a == "Conv") return op == "conv2d";
  if (a == "MatMul") return op == "matmul";
  if (a == "Linear") return op == "linear";
  if (a == "MaxPool") return op == "max_pool";
  if (a == "AvgPool") return op == "avg_pool";
  if (a == "GlobalAvgPool") return op == "global_avg_pool";
  if (a == "Pool") return op == "max_pool" || op == "avg_pool" || op == "global_avg_pool";
  if (a == "Transpose") return op == "transpose";
  if (a == "Reshape") return op == "reshape";
  if (a == "Concat") return op == "concat";
  if (a == "Reduction") return k == FusionKind::reduction;
  if (a == "Injective") return k == FusionKind::injective;
  if (a == "Anchor") return graph::has_trait(op, graph::OpTrait::anchor);
  return false;
}

Pattern parse_pattern(const std::string& text) { return Parser(text).parse(); }

std::string to_string(const Pattern& p) {
  auto join = [&](const char* sep) {
    std::string s;
    for (size_t i = 0; i < p.children.size(); ++i) {
      const Pattern& c = p.children[i];
      const bool paren = c.kind == Pattern::Kind::alt || c.kind == Pattern::Kind::seq ||
                         (c.kind == Pattern::Kind::par && p.kind != Pattern::Kind::alt);
      s += (i ? sep : "") + (paren ? "(" + to_string(c) + ")" : to_string(c));
    }
    return s;
  };
  switch (p.kind) {
    case Pattern::Kind::atom:
      return p.name;
    case Pattern::Kind::seq:
      return join(" -> ");
    case Pattern::Kind::par:
      return join(" || ");
    case Pattern::Kind::alt:
      return join(" | ");
    case Pattern::Kind::star:
    case Pattern::Kind::plus: {
      const Pattern& c = p.children[0];
      const std::string inner =
          c.kind == Pattern::Kind::atom ? to_string(c) : "(" + to_string(c) + ")";
      return inner + (p.kind == Pattern::Kind::star ? "*" : "+");
    }
  }
  return "";
}

std::vector<std::string> first_atoms(const Pattern& p) {
  switch (p.kind) {
    case Pattern::Kind::atom:
      return {p.name};
    case Pattern::Kind::plus:
    case Pattern::Kind::par:
      return first_atoms(p.children[0]);
    case Pattern::Kind::alt: {
      std::vector<std::string> out;
      for (const auto& c : p.children) {
        auto f = first_atoms(c);
        out.insert(out.end(), f.begin(), f.end());
      }
      return out;
    }
    case Pattern::Kind::star:
      return first_atoms(p.children[0]);  // the empty case starts later
    case Pattern::Kind::seq: {
      std::vector<std::string> out;
      for (const auto& c : p.children) {
        auto f = first_atoms(c);
        out.insert(out.end(), f.begin(), f.end());
        if (c.kind != Pattern::Kind::star) break;  // a star may match nothing: look further
      }
      return out;
    }
  }
  return {};
}

std::vector<Rule> parse_rules(const std::string& text, const std::string& source) {
  std::vector<Rule> rules;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  std::set<std::string> names;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = source + ":" + std::to_string(number) + ": ";
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) throw PatternError(where + "expected 'name: pattern'");
    Rule r;
    r.name = line.substr(0, colon);
    r.name.erase(0, r.name.find_first_not_of(" \t"));
    r.name.erase(r.name.find_last_not_of(" \t") + 1);
    if (r.name.empty()) throw PatternError(where + "the rule has no name");
    if (!names.insert(r.name).second)
      throw PatternError(where + "duplicate rule name '" + r.name + "'");
    std::string body = line.substr(colon + 1);
    if (auto at = body.find('@'); at != std::string::npos) {
      try {
        size_t used = 0;
        r.priority = std::stod(body.substr(at + 1), &used);
      } catch (const std::exception&) {
        throw PatternError(where + "priority after '@' must be a number");
      }
      if (!(r.priority > 0)) throw PatternError(where + "priority must be > 0");
      body.resize(at);
    }
    body.erase(0, body.find_first_not_of(" \t"));
    body.erase(body.find_last_not_of(" \t\r") + 1);
    r.text = body;
    try {
      r.pattern = parse_pattern(body);
    } catch (const PatternError& e) {
      throw PatternError(where + e.what());
    }
    rules.push_back(std::move(r));
  }
  return rules;
}

std::vector<Rule> load_rules(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PatternError(path + ": cannot open the rule file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_rules(ss.str(), path);
}

const std::vector<Rule>& builtin_rules() {
  // Priorities: the text's named rules (7.2.1) first, the general epilogue rules after.
  static const std::vector<Rule> rules = parse_rules(R"(
    # 7.2.1 Attention: the score -> softmax -> AV stage (QK^T with K transposed, scaled).
    attention: Transpose* -> MatMul -> Elementwise* -> Softmax -> MatMul @ 3
    # 7.2.1 (Q || K || V): three projections of one input share its read.
    qkv: Linear || Linear || Linear @ 3
    # 7.2.1 CBA: Conv -> BatchNorm -> Activation.
    cba: Conv -> BatchNorm -> Activation @ 2
    # 7.1.3 mixed strategy: sibling pools of one feature map.
    pool_siblings: Pool || Pool @ 2
    # Anchor (conv, matmul, linear) with its elementwise epilogue.
    anchor_epilogue: Anchor -> Elementwise+ @ 1.5
    # Reduction (softmax, layer norm) with elementwise prologue and epilogue.
    reduction_epilogue: Elementwise* -> Reduction -> Elementwise* @ 1.5
    # 7.2.1 EW+: (Add | Mul | Activation)+, generalised to every elementwise op.
    ew_chain: Elementwise+ @ 1
  )",
                                                     "<builtin>");
  return rules;
}

}  // namespace opfuse::fusion
