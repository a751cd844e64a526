#include "generators/weights_entry.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusion/graph/host_tensor.h"
#include "fusion/ops/realize.h"
#include "runtime/weights_file.h"
#include "weights_file_text.h"

namespace opfuse::generators {
namespace {

namespace fs = std::filesystem;

// What the model is, for the file's model hash: every tensor (name, kind, dtype, shape) and
// every node (op, inputs, outputs). With the data's checksum folded in, a file written for
// another model, or for this one with other weights, is refused.
uint64_t structure_hash(const graph::Graph& g) {
  std::ostringstream s;
  for (const auto& name : g.tensor_names()) {
    const graph::Tensor& t = g.tensor(name);
    s << name << ' ' << int(t.kind) << ' ' << int(t.dtype) << ' '
      << graph::shape_to_string(t.shape) << '\n';
  }
  for (const auto& n : g.nodes()) {
    s << n.op << ' ' << n.name;
    for (const auto& i : n.inputs) s << ' ' << i;
    s << " ->";
    for (const auto& o : n.outputs) s << ' ' << o;
    s << '\n';
  }
  const std::string text = s.str();
  return weights::checksum(text.data(), text.size());
}

std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void check_stream(const std::ofstream& f, const std::string& path) {
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

void write_weights_entry(const std::string& prefix, const graph::Graph& g,
                         const std::vector<PipelineArg>& args, bool gpu, const Dispatch* dispatch,
                         const std::set<std::string>& packed, int lanes) {
  const std::string name = fs::path(prefix).filename().string();
  const std::string weights_path = prefix + ".weights";
  // The block of a packed conv weight's output channels (0: Cout innermost), or a linear
  // weight's panel of columns (0: row-major).
  auto block_of = [&](const std::string& tensor) {
    return ops::weight_block(g.tensor(tensor).shape, lanes);
  };
  auto layout_of = [&](const std::string& tensor) {
    const size_t rank = g.tensor(tensor).shape.size();
    if (!packed.count(tensor)) return weights::kRowMajor;
    if (rank == 2) return block_of(tensor) > 0 ? weights::kColumnPanels : weights::kRowMajor;
    if (rank != 4) return weights::kRowMajor;
    return block_of(tensor) > 0 ? weights::kCoutBlocked : weights::kCoutInnermost;
  };
  auto layout_name = [](uint8_t layout) {
    return layout == weights::kCoutBlocked     ? "w::kCoutBlocked"
           : layout == weights::kCoutInnermost ? "w::kCoutInnermost"
           : layout == weights::kColumnPanels  ? "w::kColumnPanels"
                                               : "w::kRowMajor";
  };

  // --- The weights file ---------------------------------------------------------------
  std::vector<Halide::Buffer<>> values;
  std::vector<weights::Entry> entries;
  uint64_t offset = sizeof(weights::Header);
  for (const auto& a : args) {
    if (a.kind == PipelineArg::weight) offset += sizeof(weights::Entry);
  }
  auto align = [](uint64_t v) { return (v + weights::kAlign - 1) / weights::kAlign * weights::kAlign; };
  offset = align(offset);
  const uint64_t data_offset = offset;
  for (const auto& a : args) {
    if (a.kind != PipelineArg::weight) continue;
    const graph::Tensor& t = g.tensor(a.tensor);
    if (a.c_name.size() > weights::kMaxName || t.shape.size() > weights::kMaxRank) {
      throw std::runtime_error("weight '" + a.tensor + "' has a name longer than " +
                               std::to_string(weights::kMaxName) + " or more than " +
                               std::to_string(weights::kMaxRank) + " dimensions");
    }
    values.push_back(ops::tensor_buffer(t, graph::param_values(t)));
    weights::Entry e{};
    e.layout = layout_of(a.tensor);
    if (e.layout != weights::kRowMajor) {
      e.block = uint8_t(block_of(a.tensor));
      if (e.layout == weights::kCoutBlocked) e.chunk = uint8_t(ops::conv_weight_chunk(t.shape[1]));
      values.back() = ops::pack_weights(values.back(), e.block);
    }
    std::snprintf(e.name, sizeof e.name, "%s", a.c_name.c_str());
    e.dtype = uint8_t(a.type.code());
    e.bits = uint8_t(a.type.bits());
    e.rank = uint8_t(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) e.dims[d] = t.shape[d];
    e.offset = offset;
    e.bytes = values.back().size_in_bytes();
    offset = align(offset + e.bytes);
    entries.push_back(e);
  }
  // The data section, padding included, in one piece for its checksum.
  std::vector<unsigned char> data(offset - data_offset, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(data.data() + (entries[i].offset - data_offset), values[i].data(), entries[i].bytes);
  }
  values.clear();
  weights::Header h{};
  std::memcpy(h.magic, weights::kMagic, sizeof h.magic);
  h.version = weights::kVersion;
  h.count = uint32_t(entries.size());
  h.data_offset = data_offset;
  h.data_bytes = data.size();
  h.checksum = weights::checksum(data.data(), data.size());
  h.model_hash = weights::checksum(&h.checksum, sizeof h.checksum, structure_hash(g));
  {
    // Written aside and renamed over the old file: a process that has the old one mapped
    // keeps reading it, never a file changing under it.
    const std::string tmp = weights_path + ".tmp";
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    for (const auto& e : entries) f.write(reinterpret_cast<const char*>(&e), sizeof e);
    const std::vector<char> pad(data_offset - sizeof h - entries.size() * sizeof(weights::Entry), 0);
    f.write(pad.data(), std::streamsize(pad.size()));
    f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    f.close();
    check_stream(f, tmp);
    fs::rename(tmp, weights_path);
  }

  // --- The entry point ----------------------------------------------------------------
  std::ostringstream table, plan, params, call;
  int user = 0, weight = 0, user_count = 0;
  for (const auto& a : args) user_count += a.kind != PipelineArg::weight;
  for (const auto& a : args) {
    if (a.kind == PipelineArg::weight) {
      const graph::Tensor& t = g.tensor(a.tensor);
      table << "    {" << c_string(a.c_name) << ", " << int(a.type.code()) << ", "
            << a.type.bits() << ", " << t.shape.size() << ", {";
      for (size_t d = 0; d < t.shape.size(); ++d) table << (d ? ", " : "") << t.shape[d];
      const uint8_t layout = layout_of(a.tensor);
      const bool blocked = layout == weights::kCoutBlocked;
      const bool block = blocked || layout == weights::kColumnPanels;
      table << "}, " << layout_name(layout) << ", " << (block ? block_of(a.tensor) : 0) << ", "
            << (blocked ? ops::conv_weight_chunk(t.shape[1]) : 0) << "},\n";
      plan << weight++ << ", ";
    } else {
      plan << -1 - user << ", ";
      params << (user ? ", " : "") << "struct halide_buffer_t* _" << a.c_name << "_buffer";
      call << (user ? ", " : "") << "_" << a.c_name << "_buffer";
      ++user;
    }
  }
  if (weight == 0) table << "    {\"\", 0, 0, 0, {}, 0},\n";  // a model without weights
  const std::string abs_weights = fs::absolute(weights_path).string();
  std::string format_text = kWeightsFileHeader;
  const size_t once = format_text.find("#pragma once");
  if (once != std::string::npos) format_text.erase(once, std::string("#pragma once").size());
  // The generated functions: NAME_impl, or one per combination of a dispatch's sizes.
  std::vector<std::string> impls;
  if (dispatch) {
    for (const auto& sizes : dispatch->combinations())
      impls.push_back(dispatch_function(name, sizes));
  } else {
    impls.push_back(name + "_impl");
  }
  const std::string impl = impls.front();
  std::ostringstream impl_decls, run_fn;
  std::string metadata_list;
  for (const auto& f : impls) {
    impl_decls << "extern \"C\" int " << f << "_argv(void** args);\n"
               << "extern \"C\" const struct halide_filter_metadata_t* " << f << "_metadata();\n";
    metadata_list += f + "_metadata, ";
  }
  impl_decls << "const halide_filter_metadata_t* (*const kMetadata[])() = {" << metadata_list << "};\n";
  run_fn << R"(// A generated function's arguments in its order: the caller's (`user`) and the weights.
void weights_and(Loaded* l, void** user, void** all) {
  for (size_t i = 0; i < sizeof kPlan / sizeof kPlan[0]; ++i) {
    all[i] = kPlan[i] >= 0 ? static_cast<void*>(&l->bufs[kPlan[i]]) : user[-1 - kPlan[i]];
  }
}

)";
  if (!dispatch) {
    run_fn << "int run(Loaded* l, void** args) {\n"
           << "  void* all[sizeof kPlan / sizeof kPlan[0]];\n"
           << "  weights_and(l, args, all);\n"
           << "  return " << impl << "_argv(all);\n}\n\n"
           << "void describe(halide_filter_argument_t*) {}\n\n";
  } else {
    const auto& dims = dispatch->dims;
    // Per dimension, per caller argument: a bit per row-major axis that is the symbol; and
    // the `NAME_dynamic` text: per dimension, its sizes and the (argument, axis) pairs.
    std::ostringstream masks, names, symbols, mins, maxs, exact, counts, sizes, fns;
    std::string described;
    int sliced = -1;
    size_t most = 0;
    for (const auto& dim : dims) most = std::max(most, dim.sizes.size());
    for (size_t k = 0; k < dims.size(); ++k) {
      const DispatchDim& dim = dims[k];
      if (!dim.exact) sliced = int(k);
      symbols << c_string(dim.symbol) << ", ";
      mins << dim.min << ", ";
      maxs << dim.max << ", ";
      exact << (dim.exact ? "true" : "false") << ", ";
      counts << dim.sizes.size() << ", ";
      sizes << "{";
      for (int64_t v : dim.sizes) sizes << v << ", ";
      sizes << "}, ";
      described += (k ? ";" : "") + dim.symbol + " " + std::to_string(dim.min) + " " +
                   std::to_string(dim.max);
      if (dim.exact) {
        described += " ";
        for (size_t i = 0; i < dim.sizes.size(); ++i)
          described += (i ? "," : "") + std::to_string(dim.sizes[i]);
      }
      described += " @";
      masks << "{";
      int user_index = 0;
      bool carried = false, first_pair = true;
      for (const auto& a : args) {
        if (a.kind == PipelineArg::weight) continue;
        unsigned mask = 0;
        if (const auto it = dispatch->axes.find(a.c_name);
            it != dispatch->axes.end() && k < it->second.size()) {
          for (int ax : it->second[k]) {
            // The slices of a batch are runs of its first axis.
            if (!dim.exact && ax != 0) {
              throw std::runtime_error("argument '" + a.c_name + "' has " + dim.symbol +
                                       " on axis " + std::to_string(ax) +
                                       ", not its first: its batch cannot be sliced");
            }
            mask |= 1u << ax;
            described +=
                (first_pair ? "" : ",") + std::to_string(user_index) + "." + std::to_string(ax);
            first_pair = false;
          }
          carried = carried || (a.kind == PipelineArg::input && mask);
        }
        masks << mask << "u, ";
        if (k == 0) names << c_string(a.c_name) << ", ";
        ++user_index;
      }
      masks << "}, ";
      if (!carried) throw std::runtime_error("no input carries " + dim.symbol);
    }
    for (const auto& f : impls) fns << f << "_argv, ";
    run_fn
        << "// Dynamic dimensions (" << dispatch_to_string(*dispatch) << ").\n"
        << "constexpr int kDims = " << dims.size() << ";\n"
        << "const char* const kSymbols[] = {" << symbols.str() << "};\n"
        << "const int64_t kMin[] = {" << mins.str() << "};\n"
        << "const int64_t kMax[] = {" << maxs.str() << "};\n"
        << "// Listed sizes only (a function each), else any size in kMin..kMax by slices.\n"
        << "const bool kExact[] = {" << exact.str() << "};\n"
        << "// The functions' sizes, ascending.\n"
        << "const size_t kCount[] = {" << counts.str() << "};\n"
        << "const int64_t kSizes[][" << most << "] = {" << sizes.str() << "};\n"
        << "constexpr int kSliced = " << sliced << ";\n"
        << "// One per combination of sizes, the last dimension's varying fastest.\n"
        << "int (*const kImpls[])(void**) = {" << fns.str() << "};\n"
        << "// Per dimension, per caller argument: a bit per row-major axis that is the symbol.\n"
        << "const unsigned kAxes[][kUserArgs] = {" << masks.str() << "};\n"
        << "const char* const kNames[] = {" << names.str() << "};\n"
        << "const char* const kDescribed = " << c_string(described) << ";\n"
        << "const char* const kModel = " << c_string(name) << ";\n\n"
        << R"(std::string listed(int d) {
  std::string s;
  for (size_t k = 0; k < kCount[d]; ++k) s += (k ? ", " : "") + std::to_string(kSizes[d][k]);
  return s;
}

// Every dimension's size, read from every argument that carries it and checked to agree and
// to be one the library serves; then the function of those sizes (the sliced dimension's
// largest size that fits, for each slice of the batch, in place: no copy).
int run(Loaded* l, void** args) {
  int64_t n[kDims];
  int from[kDims];
  size_t index = 0;  // into kImpls, the sliced dimension's size left at its first
  for (int d = 0; d < kDims; ++d) {
    n[d] = -1;
    from[d] = -1;
    for (int i = 0; i < kUserArgs; ++i) {
      if (!kAxes[d][i]) continue;
      const auto* b = static_cast<const halide_buffer_t*>(args[i]);
      if (!b || (d == kSliced && !b->host)) {
        return fail(std::string(kModel) + ": argument '" + kNames[i] +
                    "' is no buffer with host memory; bounds queries are not supported");
      }
      for (int axis = 0; axis < 32; ++axis) {
        if (!(kAxes[d][i] & (1u << axis))) continue;
        if (b->dimensions <= axis) {
          return fail(std::string(kModel) + ": argument '" + kNames[i] +
                      "' is no buffer of the model's rank");
        }
        const int64_t e = b->dim[b->dimensions - 1 - axis].extent;
        if (n[d] < 0) {
          n[d] = e;
          from[d] = i;
        } else if (e != n[d]) {
          return fail(std::string(kModel) + ": '" + kNames[i] + "' has " + kSymbols[d] + " = " +
                      std::to_string(e) + " but '" + kNames[from[d]] + "' has " + std::to_string(n[d]));
        }
      }
    }
    size_t k = 0;
    if (kExact[d]) {
      while (k < kCount[d] && kSizes[d][k] != n[d]) ++k;
      if (k == kCount[d]) {
        return fail(std::string(kModel) + ": " + kSymbols[d] + " = " + std::to_string(n[d]) +
                    " is not one of the sizes it was compiled for: " + listed(d));
      }
    } else if (n[d] < kMin[d] || n[d] > kMax[d]) {
      return fail(std::string(kModel) + ": " + kSymbols[d] + " = " + std::to_string(n[d]) +
                  " is outside the sizes it was compiled for, " + std::to_string(kMin[d]) + ".." +
                  std::to_string(kMax[d]));
    }
    index = index * kCount[d] + k;
  }
  void* all[sizeof kPlan / sizeof kPlan[0]];
  if (kSliced < 0) {
    weights_and(l, args, all);
    return kImpls[index](all);
  }
  // The sliced dimension's stride in kImpls.
  size_t stride = 1;
  for (int d = kSliced + 1; d < kDims; ++d) stride *= kCount[d];
  const int64_t total = n[kSliced];
  halide_buffer_t views[kUserArgs];
  std::vector<halide_dimension_t> dims[kUserArgs];
  void* user[kUserArgs];
  for (int64_t done = 0; done < total;) {
    size_t k = kCount[kSliced] - 1;
    while (kSizes[kSliced][k] > total - done) --k;  // kSizes[kSliced][0] is 1
    const int64_t size = kSizes[kSliced][k];
    for (int i = 0; i < kUserArgs; ++i) {
      auto* src = static_cast<halide_buffer_t*>(args[i]);
      user[i] = src;
      if (!kAxes[kSliced][i]) continue;
      views[i] = *src;
      dims[i].assign(src->dim, src->dim + src->dimensions);
      halide_dimension_t& outer = dims[i].back();
      views[i].dim = dims[i].data();
      // host points at the buffer's min: the slice starts `done` rows on, its min 0.
      views[i].host = src->host + done * int64_t(outer.stride) * src->type.bytes();
      outer.extent = int32_t(size);
      outer.min = 0;
      views[i].device = 0;
      views[i].device_interface = nullptr;
      user[i] = &views[i];
    }
    weights_and(l, user, all);
    if (int rc = kImpls[index + k * stride](all)) return rc;
    done += size;
  }
  return 0;
}

// The metadata of an argument that carries a dynamic dimension has no estimate for its
// extent there: runtime::Model reads -1, and NAME_dynamic for the symbols and their sizes.
void describe(halide_filter_argument_t* user) {
  static std::vector<std::vector<const int64_t*>> estimates(kUserArgs);
  for (int i = 0; i < kUserArgs; ++i) {
    unsigned axes = 0;
    for (int d = 0; d < kDims; ++d) axes |= kAxes[d][i];
    if (!axes || !user[i].buffer_estimates) continue;
    const int r = user[i].dimensions;
    estimates[i].assign(user[i].buffer_estimates, user[i].buffer_estimates + 2 * r);
    for (int axis = 0; axis < r; ++axis) {
      if (axes & (1u << axis)) estimates[i][2 * (r - 1 - axis) + 1] = nullptr;
    }
    user[i].buffer_estimates = estimates[i].data();
  }
}

}  // namespace

// Per dynamic dimension, ';' between them: "SYMBOL MIN MAX" (every size in MIN..MAX) or
// "SYMBOL MIN MAX S1,S2,..." (those sizes only), then "@ARG.AXIS,...": the caller's arguments
// (inputs, then outputs, from 0) and their row-major axes that are the symbol.
extern "C" const char* )" << name << R"(_dynamic() {
  return kDescribed;
}

namespace {
)";
  }
  std::ostringstream src;
  src << "// Generated by opfuse's graph generator: the entry point of " << name << ".\n"
      << "// It maps " << name << ".weights read-only on first use (beside the program or\n"
      << "// shared object holding this code, else where opfuse wrote it), checks it against\n"
      << "// this model (runtime/weights_file.h), and calls " << name << "_impl with the weights.\n"
      << "#include <HalideRuntime.h>\n#include <dlfcn.h>\n#include <fcntl.h>\n"
      << "#include <sys/mman.h>\n#include <sys/stat.h>\n#include <unistd.h>\n\n"
      << "#include <atomic>\n#include <cerrno>\n#include <mutex>\n#include <string>\n#include "
         "<vector>\n\n"
      << "// runtime/weights_file.h, the file's format:\n"
      << format_text << "\n"
      << impl_decls.str() << "extern \"C\" int " << name << "_argv(void** args);\n\n"
      << "namespace {\n\n"
      << "namespace w = opfuse::weights;\n"
      << "constexpr uint64_t kModelHash = " << h.model_hash << "ull;\n"
      << "constexpr uint32_t kWeights = " << weight << ";\n"
      << "constexpr int kUserArgs = " << user_count << ";\n"
      << "const char* const kWrittenAt = " << c_string(abs_weights) << ";\n"
      << "const char* const kFileName = " << c_string(name + ".weights") << ";\n"
      << "const w::Expected kExpected[] = {\n"
      << table.str() << "};\n"
      << "// Per argument of " << name
      << "_impl: a weight's index, or -1 - k for the caller's k-th.\n"
      << "const int kPlan[] = {" << plan.str() << "};\n"
      << "constexpr bool kSerialise = " << (gpu ? "true" : "false") << ";\n\n"
      << R"(struct Loaded {
  halide_buffer_t bufs[kWeights ? kWeights : 1] = {};
  halide_dimension_t dims[kWeights ? kWeights : 1][w::kMaxRank] = {};
};
std::atomic<Loaded*> loaded{nullptr};
std::mutex load_mutex, call_mutex;
// Every file mapped, unmapped when the library is unloaded (dlclose) or the program ends.
struct Mappings {
  std::vector<std::pair<void*, uint64_t>> maps;
  std::vector<Loaded*> loads;
  ~Mappings() {
    for (auto& m : maps) munmap(m.first, m.second);
    for (Loaded* l : loads) delete l;
  }
} mappings;

int fail(const std::string& msg) {
  halide_error(nullptr, (msg + "\n").c_str());
  return halide_error_code_generic_error;
}

// Under load_mutex. A file loaded before stays mapped: a call on another thread may read it.
int load(const std::string& path) {
  for (const halide_filter_metadata_t* (*md)() : kMetadata) {
    if (md()->num_arguments != int(sizeof kPlan / sizeof kPlan[0])) {
      return fail(std::string(")"
      << name << R"(: the generated function ") + md()->name +
                  " takes other arguments than its entry point passes");
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open weights file " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return fail("cannot stat weights file " + path);
  }
  const uint64_t size = uint64_t(st.st_size);
  void* map = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (map == MAP_FAILED) return fail("cannot map weights file " + path + ": " + std::strerror(errno));
  uint64_t offsets[kWeights ? kWeights : 1];
  const std::string err = w::validate(static_cast<const unsigned char*>(map), size, path,
                                      kModelHash, kExpected, kWeights, offsets);
  if (!err.empty()) {
    if (map) munmap(map, size);
    return fail(err);
  }
  Loaded* l = new Loaded;
  for (uint32_t i = 0; i < kWeights; ++i) {
    const w::Expected& e = kExpected[i];
    halide_buffer_t& b = l->bufs[i];
    b.host = static_cast<uint8_t*>(map) + offsets[i];
    b.flags = halide_buffer_flag_host_dirty;  // a GPU pipeline copies it to the device once
    b.type = halide_type_t(halide_type_code_t(e.dtype), e.bits);
    b.dimensions = e.rank;
    b.dim = l->dims[i];
    int32_t stride = 1;
    for (int d = 0; d < e.rank; ++d) {  // Halide's dimension 0 is the last axis
      l->dims[i][d] = halide_dimension_t{0, int32_t(e.dims[e.rank - 1 - d]), stride, 0};
      stride *= int32_t(e.dims[e.rank - 1 - d]);
    }
    if (e.layout == w::kCoutBlocked) {  // Halide dims (lane, ci in chunk, kw, kh, chunk, block)
      const int32_t extents[6] = {int32_t(e.block), int32_t(e.chunk), int32_t(e.dims[3]),
                                  int32_t(e.dims[2]), int32_t(e.dims[1] / e.chunk),
                                  int32_t(e.dims[0] / e.block)};
      b.dimensions = 6;
      for (int d = 0, s = 1; d < 6; s *= extents[d], ++d) {
        l->dims[i][d] = halide_dimension_t{0, extents[d], s, 0};
      }
    }
    if (e.layout == w::kColumnPanels) {  // Halide dims (lane, k, panel)
      const int32_t extents[3] = {int32_t(e.block), int32_t(e.dims[0]),
                                  int32_t(w::column_panels(e))};
      b.dimensions = 3;
      for (int d = 0, s = 1; d < 3; s *= extents[d], ++d) {
        l->dims[i][d] = halide_dimension_t{0, extents[d], s, 0};
      }
    }
    if (e.layout == w::kCoutInnermost) {  // Halide dims kw, kh, ci, co: co, kw, kh, ci in memory
      const int32_t co = int32_t(e.dims[0]), kw = int32_t(e.dims[3]), kh = int32_t(e.dims[2]);
      l->dims[i][3].stride = 1;
      l->dims[i][0].stride = co;
      l->dims[i][1].stride = co * kw;
      l->dims[i][2].stride = co * kw * kh;
    }
  }
  mappings.maps.emplace_back(map, size);
  mappings.loads.push_back(l);
  loaded.store(l, std::memory_order_release);
  return 0;
}

std::string beside(std::string file) {
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos) return "";
  const std::string path = file.substr(0, slash) + "/" + kFileName;
  return access(path.c_str(), F_OK) == 0 ? path : "";
}

// Beside the shared object holding this code, or beside the program (a static link: dladdr
// then names the program as it was started, which may be relative), else where opfuse wrote it.
std::string default_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&)"
      << name << R"(_argv), &info) && info.dli_fname) {
    const std::string p = beside(info.dli_fname);
    if (!p.empty()) return p;
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    const std::string p = beside(exe);
    if (!p.empty()) return p;
  }
  return kWrittenAt;
}

)" << run_fn.str()
      << R"(}  // namespace

extern "C" int )"
      << name << R"(_load_weights(const char* path) {
  std::lock_guard<std::mutex> lock(load_mutex);
  if (!path && loaded.load(std::memory_order_acquire)) return 0;  // the default, loaded before
  return load(path ? path : default_path());
}

extern "C" int )"
      << name << R"(_argv(void** args) {
  Loaded* l = loaded.load(std::memory_order_acquire);
  if (!l) {
    std::lock_guard<std::mutex> lock(load_mutex);
    l = loaded.load(std::memory_order_acquire);
    if (!l) {
      if (int rc = load(default_path())) return rc;
      l = loaded.load(std::memory_order_acquire);
    }
  }
  if (kSerialise) {
    std::lock_guard<std::mutex> lock(call_mutex);
    return run(l, args);
  }
  return run(l, args);
}

extern "C" const struct halide_filter_metadata_t* )"
      << name << R"(_metadata() {
  static const halide_filter_metadata_t md = [] {
    const halide_filter_metadata_t* impl = )"
      << impl << R"(_metadata();
    static halide_filter_argument_t user[kUserArgs];
    for (int i = 0; i < impl->num_arguments; ++i) {
      if (kPlan[i] < 0) user[-1 - kPlan[i]] = impl->arguments[i];
    }
    describe(user);
    halide_filter_metadata_t m = *impl;
    m.num_arguments = kUserArgs;
    m.arguments = user;
    m.name = ")"
      << name << R"(";
    return m;
  }();
  return &md;
}

extern "C" int )"
      << name << "(" << params.str() << ") {\n"
      << "  void* args[] = {" << call.str() << "};\n"
      << "  return " << name << "_argv(args);\n}\n";
  {
    const std::string path = prefix + "_entry.cpp";
    std::ofstream f(path);
    f << src.str();
    check_stream(f, path);
  }
  std::ostringstream hdr;
  const std::string guard = "OPFUSE_" + name + "_H";
  hdr << "// " << name << ": a model compiled by opfuse, its weights in " << name << ".weights.\n"
      << "// The entry point takes the model's inputs, then its outputs, each a halide_buffer_t\n"
      << "// (dimension 0 the tensor's last axis). It loads " << name << ".weights on first use\n"
      << "// from beside the program or shared object, else from where opfuse wrote it\n"
      << "// (" << abs_weights << "); " << name << "_load_weights loads another copy.\n"
      << "// Every function returns 0, or a Halide error code with the message given to\n"
      << "// halide_error (a missing, truncated, corrupted or mismatched weights file included).\n"
      << "#ifndef " << guard << "\n#define " << guard << "\n\n#include <HalideRuntime.h>\n\n"
      << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
      << "int " << name << "(" << params.str() << ");\n"
      << "int " << name << "_argv(void** args);\n"
      << "const struct halide_filter_metadata_t* " << name << "_metadata(void);\n"
      << "// NULL: the default file, if none is loaded yet.\n"
      << "int " << name << "_load_weights(const char* path);\n"
      << (dispatch ? "// Its dynamic dimensions (" + dispatch_to_string(*dispatch) +
                         "), ';' between them: \"SYMBOL MIN MAX\" (every size in MIN..MAX) or\n"
                         "// \"SYMBOL MIN MAX S1,S2,...\" (those sizes only), then "
                         "\"@ARG.AXIS,...\" (the\n"
                         "// arguments, inputs then outputs from 0, and their row-major axes that "
                         "carry it).\n"
                         "const char* " +
                         name + "_dynamic(void);\n"
                   : std::string())
      << "\n"
      << "#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n\n#endif\n";
  {
    const std::string path = prefix + ".h";
    std::ofstream f(path);
    f << hdr.str();
    check_stream(f, path);
  }
}

}  // namespace opfuse::generators
