// The fusion pattern language (7.2.1), its parser, and the built-in rule library.
//
//   pattern ::= seq ('|' seq)*          alternatives               (A | B)
//   seq     ::= par ('->' par)*         producer -> consumer       A -> B
//   par     ::= post ('||' post)*       siblings sharing an input  A || B
//   post    ::= atom ('*' | '+')*       zero-or-more, one-or-more  A*  A+
//   atom    ::= NAME | '(' pattern ')'
//
// NAME is an op of the graph IR (`conv2d`, `relu`, ...) or an op class: Elementwise,
// Activation, Add, Sub, Mul, Div, BiasAdd, BatchNorm, LayerNorm, Softmax, Conv, MatMul,
// Linear, MaxPool, AvgPool, GlobalAvgPool, Pool, Transpose, Reshape, Concat, Reduction,
// Injective, Anchor (conv, matmul, linear), Any.
//
// A rule file holds one rule a line, `name: pattern` with an optional `@ priority` suffix;
// '#' starts a comment:
//
//   cba: Conv -> BatchNorm -> Activation @ 2
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"

namespace opfuse::fusion {

class PatternError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Pattern {
  enum class Kind { atom, seq, par, alt, star, plus };
  Kind kind = Kind::atom;
  std::string name;  // atom only
  std::vector<Pattern> children;
};

// PatternError with the column of the problem.
Pattern parse_pattern(const std::string& text);
std::string to_string(const Pattern& p);
// Does node `n` (of fusion kind `k`) satisfy atom `name`?
bool atom_matches(const std::string& name, const graph::Node& n, graph::FusionKind k);
// Atoms that can match a pattern's first node (for the matcher's op-type index).
std::vector<std::string> first_atoms(const Pattern& p);

struct Rule {
  std::string name;
  std::string text;
  Pattern pattern;
  double priority = 1;  // multiplies the score (7.2.3); critical-path membership adds to it
};

// Parses a rule file's content. PatternError names the line.
std::vector<Rule> parse_rules(const std::string& text, const std::string& source = "<rules>");
std::vector<Rule> load_rules(const std::string& path);
// The built-in library: EW+, CBA, conv/matmul + elementwise epilogue, reduction with
// elementwise prologue/epilogue, pool siblings, QKV siblings, attention (7.2.1).
const std::vector<Rule>& builtin_rules();

}  // namespace opfuse::fusion
