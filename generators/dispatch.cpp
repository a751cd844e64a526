#include "generators/dispatch.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "fusion/frontend/dynamic.h"

namespace opfuse::generators {

namespace {

DispatchDim parse_dispatch_dim(const std::string& text, const std::string& whole) {
  auto bad = [&](const std::string& why) -> DispatchDim {
    throw std::invalid_argument("dispatch '" + whole + "': " + why + " in '" + text +
                                "' (expected SYMBOL:MIN..MAX:B1,B2,... or SYMBOL:exact:S1,S2,..., "
                                "several joined by ';')");
  };
  // ':', not '=': a generator parameter's value holds no '='.
  DispatchDim d;
  const size_t c1 = text.find(':'), c2 = text.find(':', c1 == std::string::npos ? c1 : c1 + 1);
  if (c1 == std::string::npos || c2 == std::string::npos || c1 == 0) return bad("malformed");
  d.symbol = text.substr(0, c1);
  const std::string range = text.substr(c1 + 1, c2 - c1 - 1);
  try {
    for (const auto& item : fusion::split_commas(text.substr(c2 + 1)))
      d.sizes.push_back(std::stoll(item));
    if (d.sizes.empty()) return bad("no sizes");
    std::sort(d.sizes.begin(), d.sizes.end());
    if (range == "exact") {
      d.exact = true;
      d.min = d.sizes.front();
      d.max = d.sizes.back();
    } else {
      const size_t dots = range.find("..");
      if (dots == std::string::npos) return bad("no MIN..MAX");
      d.min = std::stoll(range.substr(0, dots));
      d.max = std::stoll(range.substr(dots + 2));
    }
  } catch (const std::logic_error&) {
    return bad("a size is not a number");
  }
  if (d.min < 1 || d.max < d.min) bad("empty range");
  if (!d.exact && d.sizes.front() != 1) bad("the sizes must include 1");
  if (std::adjacent_find(d.sizes.begin(), d.sizes.end()) != d.sizes.end()) bad("a size twice");
  return d;
}

}  // namespace

Dispatch parse_dispatch(const std::string& text) {
  Dispatch d;
  std::set<std::string> symbols;
  int sliced = 0;
  for (size_t at = 0; at <= text.size();) {
    const size_t semi = text.find(';', at);
    const std::string part =
        text.substr(at, semi == std::string::npos ? std::string::npos : semi - at);
    d.dims.push_back(parse_dispatch_dim(part, text));
    if (!symbols.insert(d.dims.back().symbol).second) {
      throw std::invalid_argument("dispatch '" + text + "': " + d.dims.back().symbol + " twice");
    }
    sliced += !d.dims.back().exact;
    if (semi == std::string::npos) break;
    at = semi + 1;
  }
  if (sliced > 1) {
    throw std::invalid_argument("dispatch '" + text +
                                "': more than one range (a library slices one "
                                "dimension; the others list their sizes)");
  }
  return d;
}

std::string dispatch_to_string(const Dispatch& d) {
  std::string s;
  for (const auto& dim : d.dims) {
    s += (s.empty() ? "" : ";") + dim.symbol + ":" +
         (dim.exact ? std::string("exact")
                    : std::to_string(dim.min) + ".." + std::to_string(dim.max)) +
         ":";
    for (size_t i = 0; i < dim.sizes.size(); ++i)
      s += (i ? "," : "") + std::to_string(dim.sizes[i]);
  }
  return s;
}

std::vector<std::vector<int64_t>> Dispatch::combinations() const {
  std::vector<std::vector<int64_t>> out(1);
  for (const auto& dim : dims) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : out) {
      for (int64_t s : dim.sizes) {
        next.push_back(prefix);
        next.back().push_back(s);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string dispatch_function(const std::string& name, const std::vector<int64_t>& sizes) {
  std::string f = name + "_b";
  for (size_t i = 0; i < sizes.size(); ++i) f += (i ? "x" : "") + std::to_string(sizes[i]);
  return f + "_impl";
}

}  // namespace opfuse::generators
