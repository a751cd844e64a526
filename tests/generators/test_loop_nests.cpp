// The fused schedule is visibly its records': for every zoo model, the lowered loop nest
// (Halide's .stmt output of the AOT build) has as many parallel tiles per root as its record
// says, stores of its vector width, an accumulator per register block of the record's
// lanes x vectors x rows, the record's inlined members nowhere, its compute_at members inside
// their root's parallel tile loop, each of several tiles computing a part of the member (not
// all of it: tiles whose bounds Halide cannot narrow recompute the whole tensor in every
// tile; a single tile computes it whole, once), its materialised members once outside the
// tile loops, its stored nodes produced, and a horizontal group's siblings in one tile loop;
// the unfused build materialises every node. It reads the host build and the explicit AVX2
// and AVX-512 builds, whose vector widths give other tiles (the AVX2 build once chunked
// perception's classifier into 4 tiles that each computed the whole global pool). The OpenCL
// and CUDA builds launch each root's kernel with the record's blocks and threads.
#include <doctest/doctest.h>

#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fusion/graph/json_io.h"

namespace {

// Names of the parallel tile bodies ("internal func <pipeline>_par_for_<loop> (").
std::vector<std::string> tile_bodies(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("_par_for_");
    if (line.rfind("internal func ", 0) == 0 && at != std::string::npos) {
      out.push_back(line.substr(at, line.find(' ', at) - at));
    }
  }
  return out;
}

// Extent of each parallel tile loop: body name -> tiles, from
// `halide_do_par_for((halide_task_t)::<pipeline>_par_for_<loop>, min, extent, ...)`.
std::map<std::string, int64_t> tile_counts(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, int64_t> out;
  for (std::string line; std::getline(in, line);) {
    const size_t call = line.find("halide_do_par_for(");
    if (call == std::string::npos) continue;
    const size_t at = line.find("_par_for_", call + 18), comma = line.find(',', at);
    if (at == std::string::npos || comma == std::string::npos) continue;
    const size_t second = line.find(',', comma + 1);
    out[line.substr(at, comma - at)] = std::stoll(line.substr(second + 1));
  }
  return out;
}

struct TileAllocation {
  int64_t elements = 0;
  std::string body;  // "_par_for_<loop>": the tile loop it is in
};

// name -> `allocate name[type * e0 * e1 ...]` inside a parallel tile body (or anywhere).
std::map<std::string, TileAllocation> tile_allocations(const std::string& path,
                                                       bool anywhere = false) {
  std::ifstream in(path);
  std::map<std::string, TileAllocation> out;
  std::string line, body;
  while (std::getline(in, line)) {
    if (line.find(" func ") != std::string::npos || line.rfind("func ", 0) == 0) {
      const size_t at = line.find("_par_for_");
      body = at == std::string::npos ? "" : line.substr(at, line.find(' ', at) - at);
    }
    const size_t a = line.find("allocate ");
    if ((body.empty() && !anywhere) || a == std::string::npos) continue;
    const size_t open = line.find('[', a), close = line.find(']', a);
    const std::string name = line.substr(a + 9, open - a - 9);
    std::istringstream dims(line.substr(open + 1, close - open - 1));
    int64_t n = 1;
    for (std::string tok; dims >> tok;) {
      if (std::isdigit(static_cast<unsigned char>(tok[0]))) n *= std::stoll(tok);
    }
    out[name] = {n, body};
  }
  return out;
}

// buffer -> the vector widths of its dense stores, `name[ramp(base, 1, lanes)] = ...`.
std::map<std::string, std::set<int64_t>> store_lanes(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::set<int64_t>> out;
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(' ');
    const size_t open = line.find("[ramp(");
    if (start == std::string::npos || open == std::string::npos || open <= start) continue;
    const std::string name = line.substr(start, open - start);
    if (name.find_first_of(" =(") != std::string::npos) continue;  // not a store
    int depth = 0;
    size_t last_comma = std::string::npos, close = std::string::npos;
    for (size_t i = open + 5; i < line.size(); ++i) {
      if (line[i] == '(') ++depth;
      if (line[i] == ')' && --depth == 0) {
        close = i;
        break;
      }
      if (line[i] == ',' && depth == 1) last_comma = i;
    }
    if (close == std::string::npos || last_comma == std::string::npos) continue;
    const std::string lanes = line.substr(last_comma + 1, close - last_comma - 1);
    if (lanes.find_first_not_of(" 0123456789") != std::string::npos) continue;
    out[name].insert(std::stoll(lanes));
  }
  return out;
}

struct Produce {
  std::string section;  // the function the line is in ("..._par_for_<loop>" for tile bodies)
  std::vector<std::string> enclosing;  // produce blocks it is nested in
};

// name -> where `produce name {` occurs.
std::multimap<std::string, Produce> parse_stmt(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing " << path);
  std::multimap<std::string, Produce> out;
  std::string line, section;
  std::vector<std::pair<int, std::string>> stack;  // (depth at open, produce name)
  int depth = 0;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    const std::string body = line.substr(start);
    // "func f (", "internal func f (", "external_plus_metadata func f (": a new function.
    const size_t func = body.find(" func ");
    if (body.rfind("func ", 0) == 0 || (func != std::string::npos && func < body.find('('))) {
      section = body;
      stack.clear();
      depth = 0;
    }
    if (body.rfind("produce ", 0) == 0) {
      const std::string name = body.substr(8, body.find(' ', 8) - 8);
      Produce p{section, {}};
      for (const auto& s : stack) p.enclosing.push_back(s.second);
      out.emplace(name, p);
      stack.emplace_back(depth, name);
    }
    for (char c : body) {
      if (c == '{') ++depth;
      if (c == '}') {
        --depth;
        while (!stack.empty() && stack.back().first >= depth) stack.pop_back();
      }
    }
  }
  return out;
}

struct Launch {
  int64_t blocks = 0, threads = 0;
};

// kernel name -> its launch, from `halide_cuda_run(cuda[0], "_kernel_<name>", bx, by, bz,
// tx, ty, tz, ...)` or `halide_opencl_run(opencl[0], ...)` (one-dimensional grids: opfuse
// fuses a root's dims into one).
std::map<std::string, Launch> gpu_launches(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, Launch> out;
  for (std::string line; std::getline(in, line);) {
    size_t call = line.find("halide_cuda_run(cuda[0], \"_kernel_");
    if (call == std::string::npos) call = line.find("halide_opencl_run(opencl[0], \"_kernel_");
    if (call == std::string::npos) continue;
    const size_t name = line.find("_kernel_", call), end = line.find('"', name);
    std::istringstream args(line.substr(end + 2));
    std::vector<int64_t> v;
    for (std::string tok; v.size() < 6 && std::getline(args, tok, ',');) v.push_back(std::stoll(tok));
    out[line.substr(name + 8, end - name - 8)] = {v[0] * v[1] * v[2], v[3] * v[4] * v[5]};
  }
  return out;
}

std::vector<std::array<std::string, 3>> entries(const char* list = OPFUSE_ZOO_STMT) {
  std::vector<std::array<std::string, 3>> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const auto a = item.find(':'), b = item.find(':', a + 1);
    out.push_back({item.substr(0, a), item.substr(a + 1, b - a - 1), item.substr(b + 1)});
  }
  return out;
}

}  // namespace

TEST_CASE("each zoo model's host loop nest follows its plan") {
  int checked = 0, partial_tiles = 0, horizontal = 0, accumulators = 0;
  int record_tiles = 0, record_blocks = 0, record_lanes = 0, root_loop_anchors = 0;
  for (const auto& [model, strategy, stmt] : entries()) {
    INFO(model << " " << strategy);
    const auto produces = parse_stmt(stmt);
    const auto allocations = tile_allocations(stmt);
    const auto all_allocations = tile_allocations(stmt, true);
    const auto lanes = store_lanes(stmt);
    const auto tiles = tile_counts(stmt);
    const auto bodies = tile_bodies(stmt);
    const std::string plan_path =
        stmt.substr(0, stmt.size() - 5) + ".plan.json";  // X.stmt -> X.plan.json
    std::ifstream pin(plan_path);
    REQUIRE_MESSAGE(pin.good(), "missing " << plan_path);
    const auto plan = nlohmann::json::parse(pin);
    const auto g =
        opfuse::graph::load_graph_json(std::string(OPFUSE_MODELS_DIR) + "/cpu/" + model + ".json");
    std::set<std::string> outputs(g.outputs().begin(), g.outputs().end());
    // Chunked blocks' accumulators over a tile -> the floats of the block in registers.
    std::map<std::string, int64_t> tile_accumulators;
    for (const auto& group : plan["groups"]) {
      // The record's placements: what the emitter was told to do with each node.
      std::map<std::string, std::vector<std::string>> sched;
      for (const auto& n : group["record"]["nodes"]) {
        const std::string p = n["placement"];
        const bool root_loops = n.contains("block") && n["block"].contains("in_root_loops");
        sched[p == "root"           ? "store"
              : p == "inline"       ? "inline"
              : p == "materialized" ? "materialize"
              : root_loops          ? "root_loops"
                                    : "compute_at"]
            .push_back(n["node"]);
        // The record's tile count is the loop nest's: the parallel loop of the root's tiles
        // ("_par_for_<root>[_out|_global_wrapper...]_s0_..."), and an anchor's accumulator
        // is a block of lanes x vectors x rows.
        if (n.contains("tiling") && !n.contains("compute_with") &&
            n["tiling"]["kind"] != "gpu") {
          const std::string node = n["node"];
          int found = 0;
          for (const auto& [body, count] : tiles) {
            const std::string head = "_par_for_" + node + "_";
            if (body.rfind(head, 0) != 0) continue;
            const std::string rest = body.substr(head.size());
            if (rest.rfind("s0_", 0) != 0 && rest.rfind("out_s0_", 0) != 0 &&
                rest.rfind("global_wrapper", 0) != 0)
              continue;
            ++found;
            CHECK_MESSAGE(count == n["tiling"]["tiles"].get<int64_t>(),
                          node << ": " << count << " tiles in the loop nest, "
                               << n["tiling"]["tiles"] << " in its record");
            ++record_tiles;
          }
          // One tile: Halide emits no parallel loop.
          CHECK_MESSAGE((found == 1 || (found == 0 && n["tiling"]["tiles"] == 1)),
                        node << ": " << found << " tile loops found for its record of "
                             << n["tiling"]["tiles"] << " tiles");
        }
        // The record's vector widths are the stores': a root's own (not an anchor's, whose
        // stores are its block's) and every accumulator's.
        if (n.contains("tiling") && n["tiling"]["kind"] != "gpu" && !n.contains("block") &&
            n["tiling"]["vector_lanes"].get<int64_t>() > 1) {
          const std::string node = n["node"];
          const auto it = lanes.find(n.contains("output") ? node + "_out" : node);
          if (it != lanes.end()) {
            CHECK_MESSAGE(*it->second.rbegin() == n["tiling"]["vector_lanes"].get<int64_t>(),
                          node << ": stores of " << *it->second.rbegin()
                               << " lanes, its record says " << n["tiling"]["vector_lanes"]);
            ++record_lanes;
          }
        }
        if (n.contains("block")) {
          const auto it = lanes.find(n["node"].get<std::string>() + "_acc");
          REQUIRE_MESSAGE(it != lanes.end(), n["node"] << ": no vector stores to its _acc");
          CHECK_MESSAGE(it->second == std::set<int64_t>{n["block"]["lanes"].get<int64_t>()},
                        n["node"] << ": accumulator stores of " << *it->second.begin()
                                  << ".. lanes, its block has " << n["block"]["lanes"]);
          ++record_lanes;
        }
        if (n.contains("block") && !n["block"].contains("whole_dims")) {
          const auto acc = all_allocations.find(n["node"].get<std::string>() + "_acc");
          REQUIRE_MESSAGE(acc != all_allocations.end(), n["node"] << " has a block but no _acc");
          const auto& b = n["block"];
          const int64_t width = b["lanes"].get<int64_t>() * b["vectors"].get<int64_t>(),
                        rows = b["rows"].get<int64_t>();
          if (b.value("reduction_chunk", 0) > 0) {
            // Chunked over its reduction, a block's accumulators live across the chunks in a
            // buffer of its channel block over the tile's rows, rounded up to whole blocks
            // (a linear's K = 1024 on a 32 KB L1: 6 rows of input pass half of it).
            CHECK_MESSAGE((acc->second.elements % (width * rows) == 0 &&
                           acc->second.elements >= width * rows),
                          n["node"] << ": a chunked accumulator of " << acc->second.elements
                                    << " floats for a block " << b);
            tile_accumulators[n["node"].get<std::string>() + "_acc"] = width * rows;
          } else {
            CHECK_MESSAGE(acc->second.elements == width * rows,
                          n["node"] << ": an accumulator of " << acc->second.elements
                                    << " floats for a block " << b);
          }
          ++record_blocks;
        }
      }
      if (group["kind"] == "horizontal") {
        // Siblings share one loop nest (compute_with): one tile body, named after the first.
        int own_bodies = 0;
        for (const std::string s : sched["store"]) {
          for (const auto& b : bodies) {
            own_bodies += b.rfind("_par_for_" + s + "_", 0) == 0 ||
                          b.rfind("_par_for_" + s + "_out_", 0) == 0;
          }
        }
        CHECK_MESSAGE(own_bodies == 1, "horizontal siblings in " << own_bodies << " tile loops");
        ++horizontal;
      }
      std::set<std::string> roots;
      for (const std::string s : sched["store"]) {
        // A stored graph output is computed directly into its pipeline output "<name>_out".
        const std::string root = outputs.count(s) && produces.count(s + "_out") ? s + "_out" : s;
        CHECK_MESSAGE(produces.count(root), root << " is stored, so it must be produced");
        roots.insert(root);
      }
      for (const std::string m : sched["materialize"]) {
        const auto range = produces.equal_range(m);
        REQUIRE_MESSAGE(range.first != range.second, m << " is materialised, yet never produced");
        for (auto it = range.first; it != range.second; ++it) {
          // Outside the tile loops of the group's roots: at top level, or in its own loop.
          const std::string& sec = it->second.section;
          CHECK_MESSAGE((sec.find("_par_for_") == std::string::npos ||
                         sec.find("_par_for_" + m + "_") != std::string::npos),
                        m << " is materialised once, outside the tile loops");
        }
      }
      for (const std::string m : sched["inline"]) {
        CHECK_MESSAGE(!produces.count(m), m << " is inlined, yet it has a produce block");
      }
      // Is a production inside the tile loop of one of the group's roots?
      auto in_root_tiles = [&](const auto& production) {
        bool inside = false;
        for (const auto& r : roots) {
          inside = inside || production.section.find("_par_for_" + r + "_s0") != std::string::npos;
          for (const auto& e : production.enclosing) inside = inside || e == r;
        }
        return inside;
      };
      // An anchor whose blocks are its root's loops: no loops (and no buffer) of its own, its
      // accumulators produced inside the root's tiles.
      for (const std::string m : sched["root_loops"]) {
        CHECK_MESSAGE(!produces.count(m),
                      m << " runs in its root's loops, yet has a produce block");
        const auto range = produces.equal_range(m + "_acc");
        REQUIRE_MESSAGE(range.first != range.second, m << ": no accumulator produced");
        for (auto it = range.first; it != range.second; ++it) {
          CHECK_MESSAGE(in_root_tiles(it->second),
                        m << "'s accumulators should be inside its root's tile loop");
        }
        ++root_loop_anchors;
      }
      for (const std::string m : sched["compute_at"]) {
        const auto range = produces.equal_range(m);
        REQUIRE_MESSAGE(range.first != range.second,
                        m << " is computed at a tile, yet never produced");
        for (auto it = range.first; it != range.second; ++it) {
          CHECK_MESSAGE(in_root_tiles(it->second),
                        m << " should be computed inside the tile loop of its root");
        }
        const auto alloc = allocations.find(m);
        if (alloc != allocations.end()) {
          int64_t whole = 1;
          for (const auto& n : g.nodes()) {
            if (n.name != m) continue;
            for (int64_t d : g.tensor(n.outputs[0]).shape) whole *= d;
          }
          // Several tiles that each compute the whole member do its work once per tile. A
          // single tile computes it once, whole; several must each compute a part.
          const auto n_tiles = tiles.find(alloc->second.body);
          REQUIRE_MESSAGE(n_tiles != tiles.end(), "no halide_do_par_for of " << alloc->second.body);
          CHECK_MESSAGE((alloc->second.elements < whole || n_tiles->second == 1),
                        m << ": each of " << n_tiles->second << " tiles computes "
                          << alloc->second.elements << " of its " << whole << " values");
          partial_tiles += alloc->second.elements < whole;
        }
      }
    }
    // A register-blocked anchor's accumulator (<node>_acc, a stack array per block) takes at
    // most half the vector registers of its ISA, a conv's: 8 ymm (64 floats) on AVX2, 16 zmm
    // (256) on AVX-512; a matmul's or linear layer's 3/4 (beside its row of B and a broadcast
    // of A): 12 ymm (96), 24 zmm (384). The AVX-512 block on AVX2 (24 ymm) spills.
    const bool avx2 = stmt.find("_avx2.stmt") != std::string::npos;
    const bool avx512 = stmt.find("_avx512.stmt") != std::string::npos;
    if (avx2 || avx512) {
      for (const auto& [name, a] : allocations) {
        if (name.size() < 4 || name.compare(name.size() - 4, 4, "_acc") != 0) continue;
        const bool conv = name.rfind("conv", 0) == 0;
        const int64_t max_floats = (avx2 ? 8 : 16) * (avx2 ? 8 : 16) * (conv ? 2 : 3) / 2;
        // A chunked block's buffer spans the tile; its block is what the registers hold.
        const auto tiled = tile_accumulators.find(name);
        const int64_t block = tiled != tile_accumulators.end() ? tiled->second : a.elements;
        CHECK_MESSAGE(block <= max_floats,
                      name << ": a block of " << block << " accumulators, at most " << max_floats);
        ++accumulators;
      }
    }
    if (strategy == "unfused") {
      for (const auto& n : g.nodes()) {
        CHECK_MESSAGE(produces.count(n.name) + produces.count(n.name + "_out") > 0,
                      n.name << " must be materialised when unfused");
      }
    }
    ++checked;
  }
  CHECK(checked == 3 * 22);        // host, x86-avx2 and x86-avx512 builds of fused and unfused
  CHECK(partial_tiles >= 3 * 7);   // the zoo's conv, matmul and softmax members
  // Anchors with an elementwise epilogue (fused: cbr_pool's is a pool), in their root's loops.
  CHECK(root_loop_anchors >= 3 * 6);
  CHECK(horizontal >= 3 * 2);      // attention's QKV, mixed's two pools
  CHECK(accumulators >= 2 * 10);   // the zoo's blocked anchors, on AVX2 and on AVX-512
  CHECK(record_tiles >= 3 * 85);   // every root's tile loop of several tiles, fused and unfused
  CHECK(record_blocks >= 3 * 28);  // every blocked anchor's accumulator
  CHECK(record_lanes >= 3 * 60);   // vector stores of roots and accumulators
}

TEST_CASE("each zoo model's OpenCL and CUDA kernels launch as their records say") {
  int roots = 0, row_kernels = 0, files = 0;
  for (const auto& [model, strategy, stmt] : entries(OPFUSE_ZOO_GPU_STMT)) {
    INFO(stmt);
    const auto launches = gpu_launches(stmt);
    std::ifstream pin(stmt.substr(0, stmt.size() - 5) + ".plan.json");
    REQUIRE(pin.good());
    const auto plan = nlohmann::json::parse(pin);
    for (const auto& group : plan["groups"]) {
      const auto& rec = group["record"];
      for (const auto& n : rec["nodes"]) {
        const std::string node = n["node"];
        if (n.contains("tiling")) {
          REQUIRE(n["tiling"]["kind"] == "gpu");
          // The root's kernel: "<root>[_out]_s0_..." (its dims fused, then blocks x threads).
          int found = 0;
          for (const auto& [name, l] : launches) {
            if (name.rfind(node + "_s0_", 0) != 0 && name.rfind(node + "_out_s0_", 0) != 0)
              continue;
            ++found;
            CHECK_MESSAGE(l.threads == n["tiling"]["gpu_threads"].get<int64_t>(),
                          node << ": " << l.threads << " threads per block");
            CHECK_MESSAGE(l.blocks == n["tiling"]["tiles"].get<int64_t>(),
                          node << ": " << l.blocks << " blocks, the record says "
                               << n["tiling"]["tiles"]);
          }
          CHECK_MESSAGE(found == 1, node << ": " << found << " kernels for one root");
          roots += found;
        }
        if (n.contains("row_kernels")) {
          // Its statistics (mean, var; max, sum) are kernels of gpu_row_threads each.
          int found = 0;
          for (const auto& [name, l] : launches) {
            if (name.rfind(node + "_", 0) != 0 || name.rfind(node + "_out", 0) == 0 ||
                name.rfind(node + "_s0", 0) == 0)
              continue;
            ++found;
            CHECK_MESSAGE(l.threads == rec["gpu_row_threads"].get<int64_t>(),
                          name << ": " << l.threads << " threads per block");
          }
          CHECK_MESSAGE(found >= 1, node << ": no row-statistics kernels");
          row_kernels += found;
        }
      }
    }
    ++files;
  }
  // OpenCL always; CUDA where the toolkit was found when opfuse was configured.
#ifdef OPFUSE_EXPECT_CUDA
  CHECK(files == 2 * 2 * 11);
#else
  CHECK(files == 2 * 11);
#endif
  CHECK(roots >= files);            // at least one root per model and strategy
  CHECK(row_kernels >= 4 * files / 11);  // softmax, layer norm, attention and perception
}
