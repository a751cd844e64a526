#include "schedules/group_schedule.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/op_schema.h"

namespace opfuse::schedules {

using namespace fusion;

namespace {

using graph::IndexedGraph;

// A register-blocked anchor's block: 2 vectors of output channels (columns) x unrolled pixels
// (rows). Its accumulators take at most half the vector register file, the other half holds
// the loaded and broadcast inputs: 16 of AVX-512's 32 zmm, 8 of AVX2's 16 ymm. At least 8
// accumulators cover a 4-cycle FMA latency on 2 FMA pipes. With 16 ymm, 16 accumulators (the
// AVX-512 block) spill in the reduction loop. With 32 registers, convolutions whose weights
// stream from L2 take twice the vectors (GroupScheduler::wide_conv_block).
constexpr int kBlockVectors = 2;
constexpr int kWideBlockVectors = 2 * kBlockVectors;
constexpr int kMinBlockRows = 4;  // rows of a block where the extent allows no more
constexpr int kMinReductionChunk = 32;  // input channels a pass (reduction_chunk)
// Threads of a GPU root's block (at most the device's), and of a row-statistics kernel.
constexpr int kGpuThreads = 256;
constexpr int kGpuRowThreads = 64;

class GroupScheduler {
 public:
  GroupScheduler(const IndexedGraph& ig, const FusedGroup& g, const TargetFacts& t,
                 const std::unordered_map<std::string, size_t>& index,
                 const std::unordered_map<std::string, int>& output_of)
      : ig_(ig), g_(g), t_(t), index_(index), output_of_(output_of),
        members_(g.nodes.begin(), g.nodes.end()) {}

  GroupSchedule run() {
    GroupSchedule s;
    s.group = g_.id;
    for (const auto& name : g_.nodes) {
      if (!index_.count(name)) {
        throw std::invalid_argument("group " + std::to_string(g_.id) + ": no node named '" +
                                    name + "'");
      }
    }
    placements_of_members();
    apply_placement_requests();
    s.anchor = anchor_;
    s.vector_lanes = g_.request.vector_lanes > 0 ? g_.request.vector_lanes : default_lanes();
    lanes_ = s.vector_lanes;
    check_block_requests();
    s.gpu_row_threads = kGpuRowThreads;
    s.prefetch.distance = g_.request.prefetch_distance;
    s.prefetch.emitted = false;
    s.prefetch.why = t_.gpu ? "not emitted on a GPU: a block's loads are hidden by the other "
                              "resident warps"
                            : "not emitted: prefetching the next register block's input rows "
                              "(1 or 2 blocks ahead) measured x0.97-x0.99 on cbr_pool, mixed and "
                              "perception; the tile's input is in L2 and the hardware "
                              "prefetchers follow its rows";

    // Roots, one per stored node, in the group's order.
    std::vector<const NodeSchedule*> tile_owners;  // roots owning a tile loop (no sibling)
    std::vector<NodeSchedule> roots;
    roots.reserve(g_.nodes.size());
    for (const auto& name : g_.nodes) {
      if (!stored_.count(name)) continue;
      NodeSchedule r = make_root(name, Placement::root, "read outside the group: stored");
      auto out = output_of_.find(ig_.node(index_.at(name)).outputs[0]);
      // Read by anything (another group, or a member of this one, as a mean over it): then
      // it is stored itself, and the output copies it. Computed by the output directly, the
      // node is inlined there, and a member reading it would recompute it from members
      // computed inside the output's tiles: Halide refused such a plan (an output feeding a
      // squeeze-and-excite mean in its group).
      const bool read = !ig_.consumers(ig_.node(index_.at(name)).outputs[0]).empty();
      if (out != output_of_.end() && !read) {
        r.output = out->second;
        r.reason = "a graph output: the pipeline's output computes it directly";
      }
      // Siblings of a horizontal group share one loop nest where their shapes (and so their
      // tiles) agree and neither reads the other. CPU only: on a GPU each root is a kernel.
      // Not a diamond (relu -> max_pool and avg_pool in one group, relu computed once per
      // tile of the pools' fused loop): with compute_with at in_tile and the shared member
      // computed there, Halide 21 bounds what the second root reads by its whole extent once
      // the outputs have constant bounds (mixed: the conv computed 56 x 56 in each of 4
      // tiles), and without constant bounds the blocked conv ran 4x slower. Legality keeps
      // such a producer out of its window consumers' group; it is stored once instead.
      if (g_.kind == GroupKind::horizontal && !t_.gpu) {
        for (const NodeSchedule* other : tile_owners) {
          if (other->extents == r.extents && other->rule == r.rule &&
              !reaches_any(other->node, {name}) && !reaches_any(name, {other->node})) {
            r.compute_with = other->node;
            r.members_per_row = false;
            break;
          }
        }
      }
      roots.push_back(std::move(r));
      if (roots.back().compute_with.empty()) tile_owners.push_back(&roots.back());
    }
    std::map<std::string, const NodeSchedule*> root_of;
    for (const auto& r : roots) root_of[r.node] = &r;
    // A register-blocked anchor whose root's index space is not its own (a head split, a
    // transpose after it) would compute its blocks whole in every tile of that root: it is
    // computed once, in its own tiles, instead. BERT's q, k and v linears and attention's
    // matmuls were computed 4x over under the head-merging root.
    // So is a weight-bound anchor under a row statistic of its columns (a linear, then a
    // residual add and a layer norm): the root's tiles are rows, each would read all the
    // weights; in its own tiles of columns each weight is read once a call. GPT-2's c_proj
    // (9.4 MB of weights, 128 rows) under its layer norm's 4 row tiles read 38 MB: the GPT-2
    // block ran 9% slower, the BERT encoder 10%, than with c_proj in its own tiles.
    for (const auto& name : g_.nodes) {
      if (stored_.count(name) || !is_blocked_anchor(name) || materialized_.count(name)) continue;
      const std::vector<std::string> r = roots_reading(name);
      if (r.size() != 1) continue;
      const Tiling& root_tiling = root_of.at(r[0])->tiling;
      if (root_tiling.tiles <= 1) continue;
      const std::string tiles = std::to_string(root_tiling.tiles) + " tiles";
      if (!aligned(name, r[0])) {
        reason_[name] = "an anchor whose blocks do not align with root " + r[0] + "'s " + tiles +
                        ": computed once, in its own tiles, not whole in each";
      } else if (weight_bound_anchor(node(name)) && normalizes_columns(name, r[0]) &&
                 root_tiling.kind == Tiling::Kind::rows) {
        reason_[name] = "a weight-bound anchor under root " + r[0] +
                        "'s row statistic: computed once, in tiles of its columns, so each "
                        "weight is read once, not once in each of " + tiles;
      } else {
        continue;
      }
      materialized_.insert(name);
      inlined_.erase(name);
    }

    // Members: at the tile of the one root that reads them, or their own root.
    std::vector<NodeSchedule> members;
    for (const auto& name : g_.nodes) {
      if (stored_.count(name)) continue;
      const bool inlined = inlined_.count(name) != 0;
      const std::vector<std::string> roots_of = roots_reading(name);
      const bool materialized = materialized_.count(name) != 0;
      // A member computed per tile cannot feed a materialized member (computed once, before
      // the tiles): it is materialized too unless it inlines into it.
      const bool feeds_materialized =
          !inlined && reaches_any(name, {materialized_.begin(), materialized_.end()});
      // On a GPU a member computed per thread of the root cannot feed the row-statistics
      // kernels (softmax, layer norm) that run before the root; in such groups those
      // members get their own kernel. Elementwise members still inline.
      const bool gpu_row = t_.gpu && !inlined && has_row_statistics();
      if (roots_of.size() != 1 || materialized || feeds_materialized || gpu_row) {
        std::string why = materialized ? reason_.at(name)
                          : roots_of.size() != 1
                              ? "read by " + std::to_string(roots_of.size()) +
                                    " roots: computed once, before their tiles"
                          : feeds_materialized ? "feeds a materialized member"
                                               : "on a GPU, beside row-statistics kernels: its "
                                                 "own kernel";
        roots.push_back(make_root(name, Placement::materialized, why));
        continue;
      }
      const NodeSchedule& root = *root_of.at(roots_of[0]);
      NodeSchedule m;
      m.node = name;
      m.root = root.node;
      if (inlined) {
        // Where an inlined member's helpers (a concat's parts) are computed: at the
        // materialized member that alone reads it, which runs before the root's tiles.
        const std::vector<std::string> readers = roots_reading(name, true);
        if (readers.size() == 1 && materialized_.count(readers[0])) m.root = readers[0];
      }
      m.reason = reason_.at(name);
      m.placement = inlined               ? Placement::inlined
                    : root.members_per_row ? Placement::per_row
                                           : Placement::at_tile;
      decorate(m, root.node);
      members.push_back(std::move(m));
    }
    s.nodes = std::move(roots);
    for (auto& m : members) s.nodes.push_back(std::move(m));
    blocks_in_root_loops(s.nodes);
    // A Winograd conv in tiles of output channels (a weight-bound one, see tile_rule) has its
    // input transform computed once, not once per chunk.
    for (NodeSchedule& n : s.nodes) {
      if (!n.block || !n.block->winograd) continue;
      for (const NodeSchedule& r : s.nodes) {
        if (r.node == n.root) {
          n.block->winograd_input_whole = r.tiling.kind == Tiling::Kind::column_chunks;
        }
      }
    }
    return s;
  }

  // Which anchors run as their root's loops (RegisterBlock::in_root_loops): the root itself,
  // or an anchor computed at its tile whose every path to the root is inlined elementwise
  // ops of the anchor's shape. Not with reduction chunks (their accumulators are a tile-sized
  // buffer anyway), nor under roots whose tile holds per-row members or shares its loop with
  // a sibling, nor on a GPU.
  void blocks_in_root_loops(std::vector<NodeSchedule>& nodes) const {
    if (t_.gpu) return;
    std::map<std::string, const NodeSchedule*> roots;
    std::set<std::string> shared;  // roots whose tile loop another root joins
    // Roots whose loops one anchor already runs as its blocks: a root's loops are split once
    // (two anchors of a residual join, conv + downsample conv -> add, each at the tile: the
    // second keeps its own loops there).
    std::set<std::string> taken;
    for (const NodeSchedule& n : nodes) {
      if (n.placement == Placement::root || n.placement == Placement::materialized) {
        roots[n.node] = &n;
        if (!n.compute_with.empty()) shared.insert(n.compute_with);
      }
    }
    // Tiles of whole blocks: chunks of columns guard their last, shorter chunk with an if,
    // and a block computed there would read weights past the last channel.
    auto loops_fit = [&](const NodeSchedule& r, const RegisterBlock& b) {
      const Tiling& t = r.tiling;
      return !r.members_per_row && r.compute_with.empty() && !shared.count(r.node) &&
             ((t.kind == Tiling::Kind::rows && t.split_dim >= b.row_dim) ||
              (t.kind == Tiling::Kind::column_chunks && r.extents[0] % t.factor == 0));
    };
    for (NodeSchedule& n : nodes) {
      // A Winograd conv's output is a transform of its GEMMs' blocks, not their loops.
      if (!n.block || n.block->whole_dims || n.block->reduction_chunk > 0 || n.block->winograd) {
        continue;
      }
      if (n.placement == Placement::root || n.placement == Placement::materialized) {
        n.block->in_root_loops = loops_fit(n, *n.block);
        if (n.block->in_root_loops) taken.insert(n.node);
        continue;
      }
      if (n.placement != Placement::at_tile || !loops_fit(*roots.at(n.root), *n.block) ||
          taken.count(n.root)) {
        continue;
      }
      const graph::Shape& shape = tensor_of(n.node).shape;
      bool epilogue = tensor_of(n.root).shape == shape;
      walk_downstream(n.node, [&](const std::string& m) {
        const auto k = ig_.kind(index_.at(m));
        epilogue = epilogue && (m == n.root || inlined_.count(m)) &&
                   (k == graph::FusionKind::elementwise || k == graph::FusionKind::broadcast) &&
                   tensor_of(m).shape == shape;
        return epilogue && m != n.root;
      });
      n.block->in_root_loops = epilogue;
      if (epilogue) taken.insert(n.root);
    }
  }

  // The tiling of a root of `extents` (Halide order), from the cost model's working-set
  // fraction, at least 2 tiles per core.
  //
  // Tiles are boxes: the dims inside the split dim whole, the split dim in pieces of F, the
  // dims outside it one point per tile, fused with the pieces into the parallel loop. Members
  // computed at the tile then get exact bounds; tiles of a fused (flattened) row range would
  // not: Halide bounds y = (row / W) % H over a range of rows by all of [0, H), so every tile
  // computed every member's whole tensor (a conv anchor 4x over on 2 cores).
  static Tiling tile(const std::vector<int64_t>& ext, double tile_fraction, const TileRule& rule,
                     int lanes, int cores, bool gpu, int gpu_threads) {
    Tiling t;
    const int k = int(ext.size());
    int64_t points = 1;
    for (int64_t e : ext) points *= e;
    if (gpu) {
      t.kind = Tiling::Kind::gpu;
      t.gpu_threads = gpu_threads;
      t.factor = gpu_threads;
      t.tiles = (points + gpu_threads - 1) / gpu_threads;
      return t;
    }
    int v = lanes;
    while (v > 1 && v > ext[0]) v /= 2;
    t.vector_lanes = v;
    if (k == 1) {
      t.kind = Tiling::Kind::chunks;
      t.factor = std::max<int64_t>(
          v, std::min<int64_t>(int64_t(std::ceil(double(ext[0]) * tile_fraction)),
                               (ext[0] + 2 * cores - 1) / (2 * cores)));
      t.tiles = (ext[0] + t.factor - 1) / t.factor;
      return t;
    }
    int64_t outer_ext = 1;
    for (int i = 1; i < k; ++i) outer_ext *= ext[i];
    // Tiles are chunks of dim 0, 2 per core, in multiples of m, each holding all rows, where
    // - the convs are weight-bound (rule.channel_chunks): chunks of whole register blocks, each
    //   tile all the pixels, so each weight is read from memory once a call;
    // - there are too few rows for the cores ([1, 49152] after a flatten): chunks of vectors.
    const bool weight_bound = rule.channel_chunks > 0 &&
                              ext[0] >= int64_t(2 * cores) * rule.channel_chunks;
    if (weight_bound ||
        (outer_ext < 2 * cores && rule.chunk_columns && ext[0] >= int64_t(2 * cores) * v)) {
      const int64_t m = weight_bound ? rule.channel_chunks : v;
      t.kind = Tiling::Kind::column_chunks;
      t.factor = balanced_tile_factor(ext[0], (ext[0] / (2 * cores) + m - 1) / m * m, m, 1, 0, cores);
      t.tiles = (ext[0] + t.factor - 1) / t.factor;
      // The last chunk holds at least m columns (a whole register block).
      while (t.tiles > 1 && ext[0] - t.factor * (t.tiles - 1) < m) {
        t.factor += m;
        t.tiles = (ext[0] + t.factor - 1) / t.factor;
      }
      return t;
    }
    t.kind = Tiling::Kind::rows;
    // Heads, 2 a core (as chunks of columns); fewer, tiles of rows.
    if (rule.head_chunks && k >= 3 && points / (ext[0] * ext[1]) >= 2 * cores) {
      t.split_dim = 2;
      t.factor = 1;
      t.tiles = points / (ext[0] * ext[1]);
      return t;
    }
    int64_t rows = std::max<int64_t>(1, int64_t(std::floor(double(outer_ext) * tile_fraction)));
    rows = std::min<int64_t>(rows, std::max<int64_t>(1, (outer_ext + 2 * cores - 1) / (2 * cores)));
    rows = std::min(outer_ext, (rows + rule.row_multiple - 1) / rule.row_multiple * rule.row_multiple);
    // The split dim j: the innermost at or outside min_dim, not held whole, whose rows reach
    // `rows`. A tile holds the dims inside j, F rows of j and the whole dims outside j.
    const int min_dim = std::min(std::max(rule.min_dim, 1), k - 1);
    auto whole = [&](int d) { return rule.whole.count(d) != 0; };
    auto whole_outside = [&](int j) {
      int64_t n = 1;
      for (int d = j + 1; d < k; ++d) n *= whole(d) ? ext[d] : 1;
      return n;
    };
    int last = k - 1;  // the outermost dim that may be split
    while (last > 1 && whole(last)) --last;
    int j = 1;
    int64_t inner = 1;  // rows of the dims inside j
    while (j < last && (j < min_dim || whole(j) || inner * ext[j] * whole_outside(j) < rows)) {
      inner *= ext[j++];
    }
    const int64_t held = inner * whole_outside(j);
    int64_t factor = std::clamp<int64_t>((rows + held - 1) / held, 1, ext[j]);
    const int64_t multiple = j == min_dim ? std::max<int64_t>(rule.multiple, 1) : 1;
    if (multiple > 1) factor = std::min(ext[j], (factor + multiple - 1) / multiple * multiple);
    int64_t others = 1;  // tiles of the dims outside j
    for (int d = j + 1; d < k; ++d) others *= whole(d) ? 1 : ext[d];
    factor = balanced_tile_factor(ext[j], factor, multiple, others, 1, cores);
    t.split_dim = j;
    t.factor = factor;
    t.tiles = (ext[j] + factor - 1) / factor * others;
    for (int d = j + 1; d < k; ++d) {
      if (whole(d)) t.whole_dims.push_back(d);
    }
    return t;
  }

 private:
  const graph::Node& node(const std::string& name) const { return ig_.node(index_.at(name)); }
  const graph::Tensor& tensor_of(const std::string& name) const {
    return ig_.graph().tensor(node(name).outputs[0]);
  }
  std::string where(const std::string& name) const {
    return "group " + std::to_string(g_.id) + ", node '" + name + "' (" + node(name).op + ")";
  }

  // --- placements -----------------------------------------------------------------------
  // Softmax and layer norm read only elementwise consumers in the group: their output is an
  // elementwise function of the input and the row statistics (max and sum, mean and
  // variance), so it inlines into those consumers while the statistics are computed at
  // their tile. Stored, the normalised rows made a tile-sized intermediate written and read
  // again (layernorm's 393 KB per tile).
  bool row_statistics_inline(size_t n) const {
    if (!graph::has_trait(ig_.node(n).op, graph::OpTrait::row_statistic)) return false;
    for (size_t c : ig_.consumers(ig_.node(n).outputs[0])) {
      if (!members_.count(ig_.node(c).name) || ig_.kind(c) != graph::FusionKind::elementwise)
        return false;
    }
    return true;
  }

  // Does a member read `n`'s output broadcast, its tensor having twice the elements or more
  // (not a concat that adds a row)? Inlined there, `n` is recomputed for every element of
  // the reader: squeeze-and-excite's sigmoid
  // of 32 channels, inlined into the 112x112x32 product that scales the activation by it, was
  // evaluated 12544 times over. EfficientNet-B0's 16 such groups (conv, sigmoid, product),
  // their times summed over each run of the network, JIT, 2 Zen 5 cores (AVX-512), two runs
  // alternated: 255 -> 197 us and 528 -> 440 us. CPU only: a GPU thread computes its own.
  bool read_broadcast(size_t n) const {
    if (t_.gpu) return false;
    const int64_t mine = graph::num_elements(ig_.graph().tensor(ig_.node(n).outputs[0]).shape);
    for (size_t c : ig_.consumers(ig_.node(n).outputs[0])) {
      if (members_.count(ig_.node(c).name) &&
          graph::num_elements(ig_.graph().tensor(ig_.node(c).outputs[0]).shape) >= 2 * mine)
        return true;
    }
    return false;
  }

  // Does a member downstream of `name` in the group map a tile's rows to a range of `name`'s
  // that Halide bounds by (nearly) its whole extent? A reshape that splits or merges dims
  // above a trailing dim it keeps: Swin-T's window partition, [1, 56, 56, 96] ->
  // [1, 8, 7, 8, 7, 96]; its stem's second layer norm, computed at the tiles of windows it
  // feeds, was computed whole in each of 16 tiles (1.1 ms against 0.17 ms predicted). Or a
  // roll (below).
  bool remaps_rows_below(const std::string& name) const {
    bool found = false;
    walk_downstream(name, [&](const std::string& m) {
      found = found || reshapes_outer_dims(node(m)) || rolls(node(m));
      return !found;
    });
    return found;
  }
  // Is `n` a roll: a concat along an outer axis of two slices of one tensor (Swin-T's cyclic
  // shift, x[53:56] ++ x[0:53] along H)? A tile's rows read both ends of the tensor, and Halide
  // bounds the tensor by their hull: each of 8 tiles of a shifted block's roll computed the
  // layer norm it reads whole.
  bool rolls(const graph::Node& n) const {
    if (n.op != "concat") return false;
    const int rank = int(ig_.graph().tensor(n.outputs[0]).shape.size());
    if (graph::normalize_axis(n, graph::attr_int(n, "axis", 0), rank) == rank - 1) return false;
    std::set<std::string> sliced;  // the tensors the parts slice
    for (const auto& part : n.inputs) {
      const int p = ig_.producer(part);
      if (p < 0 || ig_.node(size_t(p)).op != "slice") continue;
      if (!sliced.insert(ig_.node(size_t(p)).inputs[0]).second) return true;
    }
    return false;
  }
  // Is `n` a reshape that splits or merges dims above a trailing dim it keeps?
  bool reshapes_outer_dims(const graph::Node& n) const {
    if (n.op != "reshape") return false;
    const graph::Shape& in = ig_.graph().tensor(n.inputs[0]).shape;
    const graph::Shape& out = ig_.graph().tensor(n.outputs[0]).shape;
    const std::pair<size_t, size_t> kept = graph::reshape_kept_dims(in, out);
    const size_t lead = kept.first, trail = kept.second;  // captured: not a binding (C++17)
    auto moved = [&](const graph::Shape& s) {
      return std::count_if(s.begin() + lead, s.end() - trail, [](int64_t d) { return d > 1; });
    };
    return trail > 0 && (moved(in) > 1 || moved(out) > 1);
  }

  void placements_of_members() {
    anchor_ = g_.nodes.back();
    for (const auto& name : g_.nodes) {
      if (graph::has_trait(node(name).op, graph::OpTrait::anchor)) {
        anchor_ = name;
        break;
      }
    }
    for (const auto& name : g_.nodes) {
      const size_t n = index_.at(name);
      const std::string& out = ig_.node(n).outputs[0];
      bool escapes = ig_.is_graph_output(out);
      for (size_t c : ig_.consumers(out)) escapes = escapes || !members_.count(ig_.node(c).name);
      const auto k = ig_.kind(n);
      bool feeds_anchor = false;
      for (size_t c : ig_.consumers(out)) {
        feeds_anchor = feeds_anchor || (members_.count(ig_.node(c).name) &&
                                        graph::has_trait(ig_.node(c).op, graph::OpTrait::anchor));
      }
      if (escapes) {
        stored_.insert(name);
        reason_[name] = "read outside the group: stored";
      } else if (ig_.node(n).op == "transpose" && feeds_anchor) {
        materialized_.insert(name);
        reason_[name] =
            "a transpose an anchor reads: every tile reads all of it, and inlined its strided "
            "reads would turn the anchor's vector loads into gathers";
      } else if (reshapes_outer_dims(ig_.node(n)) && feeds_anchor) {
        // Swin-T's shifted windows (a roll's slices and concat, the window partition's
        // reshapes and permute) inlined into the qkv linear: the / and % and selects ran for
        // every element its blocks broadcast. Materialized, its 5 groups (JIT, 2 Zen 4 cores,
        // alternated): 1.45, 1.16, 1.28, 1.28, 1.25 -> 1.09, 0.94, 0.90, 0.89, 0.89 ms.
        materialized_.insert(name);
        reason_[name] =
            "a reshape of outer dims an anchor reads: inlined, its index arithmetic "
            "would run for every element the anchor's blocks broadcast";
      } else if (k == graph::FusionKind::elementwise || k == graph::FusionKind::broadcast ||
                 k == graph::FusionKind::injective) {
        if (k != graph::FusionKind::injective && read_broadcast(n)) {
          reason_[name] =
              "elementwise, read broadcast by a larger member: computed per tile, not once per "
              "element of its reader";
        } else {
          inlined_.insert(name);
          reason_[name] = "elementwise: recomputed where it is read";
        }
      } else if (!graph::has_trait(ig_.node(n).op, graph::OpTrait::anchor) &&
                 remaps_rows_below(name)) {
        materialized_.insert(name);
        reason_[name] =
            "read through a reshape of outer dims (as a window partition) or a roll: a tile's "
            "rows map through / and % or to both ends of it, which Halide bounds by their whole "
            "range, so computed per tile it would be computed whole in every tile";
      } else if (row_statistics_inline(n)) {
        inlined_.insert(name);
        reason_[name] = "a row statistic read only elementwise: its statistics at the tile, "
                        "its rows inline";
      } else {
        reason_[name] = graph::has_trait(ig_.node(n).op, graph::OpTrait::anchor)
                            ? "an anchor: register-blocked in its root's tile"
                            : "a reduction or window: computed per tile";
      }
    }
    split_transcendental_chains();
  }

  // An inlined expression holds at most one transcendental (exp, tanh, sigmoid, erf ...):
  // where a second one would join it, the inlined value feeding it is computed per tile
  // instead (a tile-local buffer, L2-resident), cutting the loop body in two. With two
  // exp-based tanh in one body at 4 vectors per iteration, the chain's registers spill:
  // ew_chain_8 fused 0.276 -> 0.204 ms (JIT, alternately; the same as splitting the group,
  // without its round trip through memory).
  void split_transcendental_chains() {
    std::unordered_map<size_t, int> count;  // transcendentals in a member's inlined expression
    auto inlined = [&](size_t n) { return inlined_.count(ig_.node(n).name) != 0; };
    for (size_t n : ig_.topo()) {
      if (!members_.count(ig_.node(n).name)) continue;
      const bool t = graph::has_trait(ig_.node(n).op, graph::OpTrait::transcendental);
      int below = 0;
      for (size_t p : ig_.preds(n)) {
        if (count.count(p) && inlined(p)) below = std::max(below, count[p]);
      }
      if (t && below >= 1) {
        for (size_t p : ig_.preds(n)) {
          if (!count.count(p) || !inlined(p) || count[p] < 1) continue;
          inlined_.erase(ig_.node(p).name);
          reason_[ig_.node(p).name] =
              "computed per tile: a second transcendental (" + ig_.node(n).name +
              ") would join its inlined expression and spill the loop body's registers";
        }
        below = 0;
      }
      count[n] = below + (t ? 1 : 0);
    }
  }

  void apply_placement_requests() {
    for (const auto& [name, want] : g_.request.placements) {
      if (!members_.count(name)) {
        throw std::invalid_argument("group " + std::to_string(g_.id) + ": placement for '" +
                                    name + "', which is not in the group");
      }
      if (stored_.count(name)) {
        if (want == "root") continue;
        throw std::invalid_argument(where(name) + ": read outside the group, so it is stored; "
                                    "it cannot be '" + want + "'");
      }
      const bool anchor = graph::has_trait(node(name).op, graph::OpTrait::anchor);
      const std::string now = inlined_.count(name)        ? "inline"
                              : materialized_.count(name) ? "materialized"
                                                          : "compute_at";
      if (want == now) continue;  // the stage's own choice, with its reason
      if (want == "inline") {
        if (anchor) {
          throw std::invalid_argument(where(name) + ": an anchor cannot be inlined (its "
                                      "register-blocked accumulator is computed at its loop)");
        }
        inlined_.insert(name);
        materialized_.erase(name);
      } else if (want == "compute_at") {
        inlined_.erase(name);
        materialized_.erase(name);
      } else if (want == "materialized") {
        inlined_.erase(name);
        materialized_.insert(name);
      } else {
        throw std::invalid_argument(where(name) + ": placement '" + want +
                                    "' is none of inline, compute_at, materialized");
      }
      reason_[name] = "requested by the plan";
    }
  }

  // Several vectors per inner iteration on the CPU: independent vectors hide the latency of
  // long inlined chains (exp, divisions) and of reductions, which one vector leaves exposed.
  // Measured with `opfuse run --plan` on the zoo (p50 at 32 -> 64 lanes, natural 16):
  // ew_chain_4/8/16 -16/-20/-36%, attention -24%, layernorm -8%, softmax -7%, but mlp +19%
  // (its register-blocked linears); and at 16 -> 32 lanes convolution groups lose up to 2x
  // (perception, NCHW). So: 4 vectors without an anchor, 2 with matmul/linear anchors, the
  // natural width with a convolution. A plan's vector_lanes overrides this.
  // The matmul's 2 registers per vector only where its block of 2 x 4 of them fits the
  // accumulator budget (AVX-512's 16 zmm); with AVX2's 8 ymm they left 2 rows per block, and
  // the natural width (2 x 4 ymm) measured x1.3-1.5 faster on mlp (JIT, AVX2 code).
  int default_lanes() const {
    if (t_.gpu) return t_.lanes;
    int vectors = 4;
    for (const auto& name : g_.nodes) {
      const std::string& op = node(name).op;
      if (op == "conv2d" || op == "conv2d_winograd") return t_.lanes;
      if (op == "matmul" || op == "linear") {
        vectors = accumulator_registers() >= 2 * kBlockVectors * kMinBlockRows ? 2 : 1;
      }
    }
    return vectors * t_.lanes;
  }

  // Threads per block of a GPU root: the plan's request, or 256 (at most the device's).
  int gpu_threads() const {
    const int want = g_.request.gpu_threads;
    if (want > 0) {
      if (t_.gpu_max_threads > 0 && want > t_.gpu_max_threads) {
        throw std::invalid_argument("group " + std::to_string(g_.id) + ": " +
                                    std::to_string(want) + " GPU threads per block, but the "
                                    "device allows " + std::to_string(t_.gpu_max_threads));
      }
      return want;
    }
    return t_.gpu_max_threads > 0 ? std::min(kGpuThreads, t_.gpu_max_threads) : kGpuThreads;
  }

  int accumulator_registers() const { return anchor_accumulator_registers(t_.vector_registers); }

  bool is_nchw_conv(const graph::Node& n) const {
    return n.op == "conv2d" &&
           graph::conv2d_window(n, ig_.graph().tensor(n.inputs[0]), ig_.graph().tensor(n.inputs[1]))
                   .layout == graph::Layout::NCHW;
  }
  // Anchors whose accumulators are register-blocked (CPU targets).
  bool is_blocked_anchor(const std::string& name) const {
    return !t_.gpu && graph::has_trait(node(name).op, graph::OpTrait::anchor);
  }
  bool has_blocked_anchor() const {
    for (const auto& name : g_.nodes) {
      if (is_blocked_anchor(name)) return true;
    }
    return false;
  }
  bool has_row_statistics() const {
    for (const auto& name : g_.nodes) {
      if (graph::has_trait(node(name).op, graph::OpTrait::row_statistic)) return true;
    }
    return false;
  }
  // Does the row statistic of `n` reduce over the tensor's last (contiguous) axis? Layer norm
  // always does (it normalises over x.shape[axis:]); softmax when its axis is the last.
  bool reduces_innermost_axis(const graph::Node& n) const {
    if (n.op == "layer_norm") return true;
    const graph::Shape& s = ig_.graph().tensor(n.inputs[0]).shape;
    return graph::normalize_axis(n, graph::attr_int(n, "axis", -1), s.size()) == int(s.size()) - 1;
  }

  // --- register blocks -------------------------------------------------------------------
  // Sizes fit the extents, so the block never needs a tail (ShiftInwards moves the last
  // block back), the accumulator's region is a constant and LLVM keeps it in registers.
  RegisterBlock block_shape(const std::string& name) const {
    const graph::Node& n = node(name);
    const graph::Shape& shape = tensor_of(name).shape;
    RegisterBlock b;
    const bool nchw = is_nchw_conv(n);
    b.row_dim = nchw ? 2 : 1;
    if (shape.size() <= size_t(b.row_dim)) return b;
    const int64_t ve = shape.back(), ue = shape[shape.size() - 1 - b.row_dim];
    // Fewer columns than a vector (an 8-channel NHWC conv on 16 lanes): the widest power of
    // two that fits, not scalar code.
    while (b.lanes * 2 <= std::min<int64_t>(ve, lanes_)) b.lanes *= 2;
    if (b.lanes < 4) b.lanes = 1;
    const bool two_vectors = ve >= int64_t(b.lanes) * kBlockVectors && b.lanes > 1;
    auto req = g_.request.blocks.find(name);
    if (n.op == "conv2d_winograd") {
      // A GEMM row per 2x2 output tile along W (ue / 2 of them), as an NHWC conv's rows per
      // pixel: 2 vectors of output channels x the accumulator budget's rows, rows that divide
      // the tiles where some in [4, wanted] do. With 32 vector registers and Cout in whole
      // panels of the transformed weights (graph::WinogradWeights, 64 channels), 4 vectors
      // (the panel's row, one contiguous 256-byte run per input channel) x 7 rows, as
      // wide_conv_block: ResNet-18 AOT, 2 threads, AVX-512 (2 Xeon cores with AMX),
      // 3 runs alternated, 12.06 -> 11.03 ms. (Before the panel layout, on 2 Zen 5 cores,
      // 7 x 4 measured slower: 6.83 -> 7.34 ms through the JIT.)
      b.winograd = true;
      b.vectors = two_vectors ? kBlockVectors : 1;
      const int64_t tiles = (ue + 1) / 2;
      int rows_wanted = std::max(1, accumulator_registers() / b.vectors);
      if (wide_block_target(b, ve) && graph::kWeightPanel == kWideBlockVectors * b.lanes) {
        b.vectors = kWideBlockVectors;
        rows_wanted = wide_block_rows();
      }
      b.rows = int(std::min<int64_t>(rows_wanted, tiles));
      for (int r = b.rows; r >= std::min(rows_wanted, kMinBlockRows); --r) {
        if (tiles % r == 0) {
          b.rows = r;
          break;
        }
      }
    } else if (nchw) {
      // Channels x pixel vectors, 8 accumulators where the channels allow: a block that
      // divides the channel count wastes nothing (12 channels in blocks of 8 compute 16).
      // 8 accumulators at most, also on AVX-512 (16 measured no faster on perception).
      const std::pair<int, int> shapes[] = {{8, 1}, {4, 2}, {2, 2}};  // (channels, vectors)
      const int budget = accumulator_registers();
      auto fits = [&](int ch, int nv) { return (nv == 1 || two_vectors) && ch * nv <= budget; };
      std::optional<std::pair<int, int>> pick;
      for (const auto& [ch, nv] : shapes) {
        if (!pick && ue % ch == 0 && fits(ch, nv)) pick = std::make_pair(ch, nv);
      }
      for (const auto& [ch, nv] : shapes) {
        if (!pick && ue >= ch && fits(ch, nv)) pick = std::make_pair(ch, nv);
      }
      b.rows = pick ? pick->first : 1;
      b.vectors = pick ? pick->second : 1;
    } else {
      // A conv's rows fill the accumulator budget (half the register file): on AVX-512 an
      // NHWC conv is 2 x 8 (16 zmm: at 8 the FMA latency of 2 pipes is covered with no slack;
      // measured x1.10 on cbr_pool, mixed and perception, while 6 rows, which do not divide
      // W = 56, lost 20%; 7 and 14 rows, 14 and 28 accumulators, measured the same as 8); on
      // AVX2 half the rows. A matmul's take more (below).
      b.vectors = two_vectors ? kBlockVectors : 1;
      const int regs_per_vector = std::max(1, b.lanes / t_.lanes);
      const int budget = std::max(1, accumulator_registers() / regs_per_vector);  // in vectors
      int rows_wanted = std::max(1, budget / b.vectors);
      // The channels that blocks of `width` compute to cover `e` (the last one moved back).
      auto padded = [&](int64_t e, int64_t width) { return (e + width - 1) / width * width; };
      // The rows of a block of `vectors` weight vectors beside one broadcast of the input: as
      // many as the rest of the register file takes, the accumulators at most 3/4 of it.
      auto rows_for = [&](int vectors) {
        const int regs = vectors * regs_per_vector;
        return std::max(1, std::min((t_.vector_registers - regs - 1) / regs,
                                    3 * t_.vector_registers / 4 / regs));
      };
      // Channels (columns) in 3 vectors where they fill 3 but not 2: 2-vector blocks moved
      // back compute 10 vectors for 9, 128 columns for 96. Swin-T's 96 and 288 columns at 32
      // lanes, its stage-1 linears 3 x 32 columns x 4 rows (24 zmm accumulators, as 2 x 6), in
      // the network (JIT, 2 Zen 4 cores): 96 columns 1.95 -> 1.46 and 0.50 -> 0.37 ms, 288
      // columns 1.26 -> 1.10 ms. MobileNetV2's and EfficientNet-B0's 144 channels at 16 lanes
      // (an expanding 1x1 conv 24 -> 144 and the depthwise conv after it, 56x56, alone, 10
      // runs alternated, medians): 3 x 16 x 8 rows 128.5 -> 113.8 and 114.5 -> 88.2 us. On
      // AVX2 their 24-channel projections (3 vectors of 8, 4 rows: 12 accumulators, 3 of the
      // weights, the broadcast), 144 -> 24 at 56x56 alone (x86-avx2 library, 10 runs
      // alternated): 0.136 -> 0.095 ms.
      const bool three_vectors = b.vectors == kBlockVectors &&
                                 ve % (int64_t(kBlockVectors) * b.lanes) != 0 &&
                                 ve % (3 * int64_t(b.lanes)) == 0 && rows_for(3) >= kMinBlockRows;
      if (n.op == "conv2d" && wide_conv_block(n, b, ve)) {
        b.vectors = kWideBlockVectors;
        rows_wanted = wide_block_rows();
      } else if (n.op == "conv2d" && three_vectors) {
        b.vectors = 3;
        rows_wanted = rows_for(3);
      } else if (n.op == "conv2d" && b.vectors == kBlockVectors && broadcasts_from_memory() &&
                 padded(ve, b.lanes) < padded(ve, int64_t(kBlockVectors) * b.lanes)) {
        // One vector where the channels end within a 2-vector block, which computes more
        // past them: EfficientNet-B0's 40, 80 and 112 channels at 16 lanes computed 64, 96
        // and 128 in 2-vector blocks, 48, 80 and 112 in one-vector ones (its rows as the
        // accumulator budget's). Its 1x1 projections alone (JIT, AVX-512, 8 runs alternated,
        // medians), 2 x 7 rows against 1 x 14: 240 -> 40 at 28x28 0.109 -> 0.083 ms, 480 -> 80
        // at 14x14 0.090 -> 0.078; 672 -> 112 at 14x14 ran in two modes, 0.17 -> 0.15 and
        // 0.33 -> 0.29. Not with 16 registers, where each FMA's broadcast is a load of its
        // own: AVX2's 1 x 7 against 2 x 4 on 240 -> 40 (5 vectors of 8, x86-avx2 library, 10
        // runs alternated): 0.108 -> 0.135 ms.
        b.vectors = 1;
        rows_wanted = budget;
      }
      if (n.op != "conv2d") {
        // A matmul's or linear layer's block holds its row of B (the block's vectors), one
        // broadcast of A and the accumulators: as many rows as the rest of the register file
        // takes, the accumulators at most 3/4 of it. AVX-512 (32 zmm, 2 x 32 lanes): 6 rows
        // of 4 zmm, 24 accumulators, not 4 (16): 1 process alternating the two, 2 Zen 5 cores,
        // GPT-2 block x0.87-0.90, BERT encoder x0.87-0.89, ViT-Tiny x0.96 (7 rows, 28, spill:
        // x1.11; 5: x0.90). AVX2 (16 ymm, 2 x 16 lanes): 2 rows of 4 ymm, as before. Rows need
        // not divide M here: 6 rows at M = 128 beat 4 by 13%.
        if (three_vectors) b.vectors = 3;
        const int vector_regs = b.vectors * regs_per_vector;
        rows_wanted = rows_for(b.vectors);
        // One row more where it divides M and the wanted block would overlap itself badly:
        // with 32 registers (AVX-512's FMA takes its broadcast from memory) 7 rows of 4 zmm
        // fill the file. Overlapping blocks compute ceil(M / r) r rows; a 7-row block does
        // ~0.87 of a 6-row one's work a cycle. Swin-T's linears (AVX-512, 2 Zen 4 cores,
        // JIT, in the network): M = 7 1.90 -> 1.25 ms, M = 14 1.47 -> 1.32 ms, but M = 49 and
        // 56 lost 2-30% with 7 rows; so 7 rows where 6 compute >= 1 / 0.87 the rows M holds.
        auto overlaps_badly = [&](int r) {
          const int64_t overlapping = (ue + r - 1) / r * r;
          return ue % r != 0 && 0.87 * double(overlapping) > double(ue);
        };
        const int rows_more = wide_block_rows(vector_regs);
        if (broadcasts_from_memory() && rows_more > rows_wanted && ue % rows_more == 0 &&
            overlaps_badly(rows_wanted)) {
          rows_wanted = rows_more;
        }
        // Else fewer rows, the most that divide M, where the wanted ones overlap as badly:
        // Swin-T's window attention (M = 49 tokens) in 12-row blocks computed 60 rows, and 7
        // rows (14 accumulators, not 24) computed its 17 attention groups in 3666 -> 3097 and
        // 3674 -> 3410 us a run (JIT, 2 Zen 4 cores, 2 runs alternated); 10 rows (50) measured
        // the same as 7, 11 (the last block moved back 6 rows) 20% slower than 12.
        if (overlaps_badly(rows_wanted)) {
          for (int r = rows_wanted - 1; r >= kMinBlockRows; --r) {
            if (ue % r == 0) {
              rows_wanted = r;
              break;
            }
          }
        }
      }
      const int fallback = n.op != "conv2d" ? rows_wanted : std::min(rows_wanted, kMinBlockRows);
      // Rows that divide the row dim where some in [fallback, wanted] do, so that no block
      // overlaps another (a row narrower than the wanted block, 7 of ResNet's last stage, is
      // one block). ShiftInwards moves an overlapping last block back, and the loop then
      // partitions badly: 3x3 convs at W = 28, 1 thread, AVX-512 (Zen 5), 8 rows against 7:
      // 1.16 -> 0.52 ms with stride 2 (64 -> 128 channels), 1.48 -> 1.13 ms at 128 channels;
      // W = 14, 256 channels: 1.85 -> 1.56 ms.
      // (A matmul with fewer rows than its block, M = 1-5: one block of them all.)
      b.rows = ue >= rows_wanted  ? rows_wanted
               : n.op != "conv2d" ? int(std::max<int64_t>(ue, 1))
                                  : 1;
      for (int r = std::min<int64_t>(rows_wanted, ue); r >= fallback; --r) {
        if (ue % r == 0) {
          b.rows = r;
          break;
        }
      }
      if (n.op != "conv2d") one_vector_block(b, ue, ve, regs_per_vector);
    }
    if (req != g_.request.blocks.end()) {
      if (req->second.rows > 0) b.rows = req->second.rows;
      if (req->second.vectors > 0) b.vectors = req->second.vectors;
    }
    return b;
  }

  // A matmul's or linear's block of one vector of columns and as many rows as leave one
  // register spare beside that vector (14 on AVX-512), the most that divide M, where the block
  // chosen overlaps M or fills the register file and the taller one holds as many
  // accumulators. Swin-T's linears run over [1, H, W, C] in rows of W = 14, 28 and 56, which
  // 6-row blocks of 2 vectors overlap and whose 7-row ones fill all 32 registers (28
  // accumulators, 4 of B); 14 rows x 1 vector hold the same accumulators and 2 of B. Alone
  // (JIT, 2 Zen 4 cores, 3 runs alternated, ms): [14, 14, 1536] -> 384 1.217 -> 1.010,
  // [14, 14, 384] -> 1536 1.286 -> 1.051, [28, 28, 192] -> 768 1.085 -> 1.027, [56, 56, 96] ->
  // 384 1.110 -> 1.028 (the first flattened to M = 196: 1.03). Not where the taller block
  // holds fewer accumulators: BERT's M = 128 (8 rows x 1 against its 2-vector block: 3.16 ->
  // 3.34 ms alone), W = 7 (7 x 1 against 7 x 2). Targets with 16 registers keep their blocks.
  // `regs`: the registers one vector of the block takes (block_shape's regs_per_vector).
  void one_vector_block(RegisterBlock& b, int64_t ue, int64_t ve, int regs) const {
    if (!broadcasts_from_memory() || b.vectors < 2 || ve % b.lanes != 0) return;
    const bool full = (b.rows + 1) * b.vectors * regs >= t_.vector_registers;
    if (ue % b.rows == 0 && !full) return;
    const int most = (t_.vector_registers - regs - 1) / regs;
    for (int r = int(std::min<int64_t>(most, ue)); r >= 1; --r) {
      if (ue % r != 0) continue;
      if (r >= b.rows * b.vectors) {
        b.vectors = 1;
        b.rows = r;
      }
      return;
    }
  }

  // An NHWC conv's block of 4 vectors of output channels x 7 rows (28 accumulators), not 2 x
  // 8: on a target with 32 vector registers (AVX-512, whose FMA takes its broadcast input
  // from memory, so the block needs registers for its accumulators and its 4 weight vectors
  // only), where Cout is a multiple of 4 vectors and the block's weight slice at 2 vectors
  // (KH KW Cin x 32 floats) already outgrows L1: each step of the reduction then loads 4
  // weight vectors and 7 inputs for 28 FMAs instead of 2 and 8 for 16, and its weights come
  // from L2 either way. AOT, 2 threads, AVX-512 (2 Xeon cores with AMX), conv + relu,
  // 3 runs alternated, ms: 3x3 56x56x64 0.940 -> 0.816; 28x28x128 0.954 -> 0.858; 14x14x256
  // 0.952 -> 0.899 (chunked, 32 channels); 7x7x512 0.946 -> 0.861; stride 2, 28x28x128 ->
  // 14x14x256 0.498 -> 0.438; 1x1 28x28, 512 -> 128 0.364 -> 0.344. Where the slice fits L1
  // at 2 vectors it does not at 4: 1x1 14x14, 256 -> 1024, 0.331 -> 0.356; the 7x7 stem
  // (Cin 3) 0.893 -> 0.881, the same.
  // Not a conv whose windows do not overlap (a patch embedding: stride = kernel; a dilated
  // kernel spans (k - 1) d + 1 inputs): no input is shared by neighbouring pixels, so a wide
  // block's saving (each broadcast feeding 4 weight vectors) buys little, while its weights,
  // streamed from L2 for every block of pixels, cost twice the loads per FMA of 2 vectors over
  // twice the rows. ViT-Tiny's
  // 16x16 / 16 patch embedding (768 weights a channel), 4 x 7 -> 2 x 7 blocks (JIT, 2 Zen 4
  // cores, 60 runs each alternated in fives, both orders): 13.71 -> 13.48 and 13.67 -> 13.40
  // ms; 2 x 14 (past the accumulator budget) 13.42, 6 x 4 about the same.
  bool wide_conv_block(const graph::Node& n, const RegisterBlock& b, int64_t cout) const {
    if (!wide_block_target(b, cout)) return false;
    const graph::Shape& w = ig_.graph().tensor(n.inputs[1]).shape;
    if (w.size() != 4) return false;
    const graph::Window2d win =
        graph::conv2d_window(n, ig_.graph().tensor(n.inputs[0]), ig_.graph().tensor(n.inputs[1]));
    bool disjoint = true, single = true;  // no two windows share an input; 1x1 windows
    for (int d = 0; d < 2; ++d) {
      const int64_t extent = win.dilations[size_t(d)] * (win.kernel[size_t(d)] - 1) + 1;
      disjoint = disjoint && win.strides[size_t(d)] >= extent;
      single = single && extent == 1;
    }
    if (disjoint && !single) return false;
    const int64_t slice = w[1] * w[2] * w[3] * kBlockVectors * b.lanes * int64_t(sizeof(float));
    return slice > t_.l1_bytes;
  }
  // Can a block of `cout` output channels in vectors of `b.lanes` be wide on this target: 32
  // vector registers, natural-width vectors, Cout in whole wide blocks.
  bool wide_block_target(const RegisterBlock& b, int64_t cout) const {
    return broadcasts_from_memory() && b.lanes == t_.lanes &&
           cout % (int64_t(kWideBlockVectors) * b.lanes) == 0;
  }
  // A target of 32 vector registers (AVX-512), whose FMA takes its broadcast operand from
  // memory: a block needs registers for its accumulators and its weight (B) vectors only.
  bool broadcasts_from_memory() const { return t_.vector_registers >= 32; }
  // The rows of a block of `vector_regs` weight registers where the broadcast takes none: the
  // registers they leave, 7 of AVX-512's 32 for a wide block's 4.
  int wide_block_rows(int vector_regs = kWideBlockVectors) const {
    return (t_.vector_registers - vector_regs) / vector_regs;
  }

  void check_block_requests() const {
    for (const auto& [name, req] : g_.request.blocks) {
      if (!members_.count(name)) {
        throw std::invalid_argument("group " + std::to_string(g_.id) + ": block for '" + name +
                                    "', which is not in the group");
      }
      if (!graph::has_trait(node(name).op, graph::OpTrait::anchor)) {
        throw std::invalid_argument(where(name) + ": only anchors have register blocks");
      }
      if (req.reduction_chunk > 0 && node(name).op != "linear" &&
          (node(name).op != "conv2d" || is_nchw_conv(node(name)))) {
        throw std::invalid_argument(where(name) + ": reduction_chunk splits the reduction of "
                                    "an NHWC convolution or a linear layer, not of this anchor");
      }
      if (t_.gpu) continue;  // no register blocks on a GPU: the request has no effect
      const RegisterBlock b = block_shape(name);
      const graph::Shape& shape = tensor_of(name).shape;
      if (shape.size() <= size_t(b.row_dim)) continue;
      const int64_t ue = shape[shape.size() - 1 - b.row_dim], ve = shape.back();
      if (b.rows > ue) {
        throw std::invalid_argument(where(name) + ": a block of " + std::to_string(b.rows) +
                                    " rows, but its dim " + std::to_string(b.row_dim) +
                                    " has only " + std::to_string(ue));
      }
      if (int64_t(b.vectors) * b.lanes > std::max<int64_t>(ve, b.lanes)) {
        throw std::invalid_argument(where(name) + ": a block of " + std::to_string(b.vectors) +
                                    " vectors of " + std::to_string(b.lanes) +
                                    " lanes, but it has only " + std::to_string(ve) + " columns");
      }
      if (b.accumulators(t_.lanes) > t_.vector_registers) {
        throw std::invalid_argument(
            where(name) + ": a block of " + std::to_string(b.accumulators(t_.lanes)) +
            " accumulator registers, but the target has " + std::to_string(t_.vector_registers));
      }
    }
  }

  // --- roots ----------------------------------------------------------------------------
  NodeSchedule make_root(const std::string& name, Placement p, const std::string& why) {
    NodeSchedule r;
    r.node = name;
    r.root = name;
    r.placement = p;
    r.reason = why;
    const graph::Shape& shape = tensor_of(name).shape;
    r.extents.assign(shape.rbegin(), shape.rend());
    r.rule = tile_rule(name, shape);
    const int threads = gpu_threads();
    r.tiling = tile(r.extents, g_.request.tile_fraction, r.rule, lanes_, t_.cores, t_.gpu, threads);
    // Row statistics (softmax, layer norm) of a root with several outer dims: computed per
    // row, which is what fits in L1. Not with a register-blocked anchor, whose blocks span
    // several rows.
    r.members_per_row = r.tiling.kind == Tiling::Kind::rows && r.extents.size() > 2 &&
                        has_row_statistics() && !has_blocked_anchor();
    if (const int64_t outer = sliced_reduction_extent(name, r.tiling); outer > 0) {
      r.reduction_slices = int(std::min<int64_t>(2 * t_.cores, outer));
      r.reduction_slice_rows = (outer + r.reduction_slices - 1) / r.reduction_slices;
    }
    decorate(r, name);
    return r;
  }

  // A pool over H and W of an NHWC tensor (a global pool, a mean over axes 1 and 2) is a point
  // per channel: one tile, whose single thread read the whole input. EfficientNet-B0's
  // squeeze-and-excite means over 112x112x32 and 56x56x96 took 150-210 us each (their input
  // written by both cores just before). In slices of the outermost reduced axis summed in
  // parallel, each core reads the rows it wrote. Inputs under 128 KB stay whole. Returns the
  // outermost reduced axis's extent where the sum is sliced, else 0.
  int64_t sliced_reduction_extent(const std::string& name, const Tiling& tiling) const {
    const graph::Node& n = node(name);
    if (t_.gpu || tiling.tiles >= t_.cores) return 0;
    const graph::Tensor& x = ig_.graph().tensor(n.inputs[0]);
    if (graph::num_elements(x.shape) < 32 * 1024) return 0;
    int64_t outer = 0;  // the outermost reduced axis's extent
    if (n.op == "global_avg_pool") {
      const graph::Window2d win = graph::pool_window(n, x);
      if (win.layout != graph::Layout::NHWC) return 0;
      outer = x.shape[size_t(win.h_axis())];
    } else if (n.op == "reduce_mean" || n.op == "reduce_sum") {
      const std::vector<bool> red = graph::reduced_axes(n, x.shape.size());
      if (red.back()) return 0;  // the contiguous axis: a row statistic's vector reduction
      for (size_t i = 0; i < red.size() && outer == 0; ++i) outer = red[i] ? x.shape[i] : 0;
    }
    return outer >= 2 && t_.cores > 1 ? outer : 0;
  }

  // The block and the helpers' facts of a node computed under `root`.
  void decorate(NodeSchedule& m, const std::string& root) const {
    const graph::Node& n = node(m.node);
    m.register_blocked = is_blocked_anchor(m.node);
    if (m.register_blocked && m.placement != Placement::inlined &&
        tensor_of(m.node).shape.size() > size_t(block_shape(m.node).row_dim)) {
      RegisterBlock b = block_shape(m.node);
      // Under a root of another rank or layout (a flatten, a transpose), a tile's region of
      // the anchor comes through divisions, modulos or permutations of the root's index, and
      // the tile rule cannot align it to the blocks: the block dims are computed whole, so no
      // block is ever cut short (ShiftInwards would move it before the region's start and
      // read before the input's: an explored attention plan did, at -48).
      b.whole_dims = !aligned(m.node, root);
      const bool nchw = b.row_dim == 2;
      if (b.winograd) {
        b.reduction_order = {0};  // ci
      } else if (n.op != "conv2d") {
        b.reduction_order = {0};  // k
        // Column blocks outside the row blocks where the weights outweigh the input: each
        // block's K x columns slice of them serves every row of the tile from cache.
        if (n.op == "linear") {
          // Weights the build knows, in panels a block's vectors fall within, are read so
          // (graph::linear_weight_panel).
          const graph::Tensor& w = ig_.graph().tensor(n.inputs[1]);
          const int64_t panel = graph::linear_weight_panel(w.shape);
          b.pack_weights = w.kind == graph::TensorKind::param && panel > 0 && panel % b.lanes == 0;
          b.channel_blocks_outside = weight_bound_anchor(n) || requested_chunk(n) > 0;
          if (b.channel_blocks_outside) b.reduction_chunk = reduction_chunk(n, b);
          // A chunked block's rows run past the tile's last row into its accumulators'
          // rounded-up buffer (the emitter's RoundUp), reading rows of input past it. A
          // producer in the pipeline computes them; a graph input, a buffer of its exact
          // extent, has none ("accessed at 131, beyond the max (127)": a 128 x 3072 -> 768
          // linear on its own, 6 rows a block). There the rows divide the row extent.
          if (b.reduction_chunk > 0 && reads_graph_input(m.node)) {
            const graph::Shape& out = tensor_of(m.node).shape;
            const int64_t extent = out[out.size() - 1 - size_t(b.row_dim)];
            while (extent % b.rows != 0) --b.rows;
          }
        }
      } else if (nchw) {
        b.reduction_order = {2, 1, 0};  // kw, kh, ci
        // The kernel-width loop is innermost and 1-7 long: unrolled, the block's FMAs are not
        // cut into short trips of loop overhead.
        b.unroll_kernel_width = ig_.graph().tensor(n.inputs[1]).shape.back() <= 7;
      } else {
        b.reduction_order = {0, 2, 1};  // ci innermost: contiguous NHWC reads
        // Weights [Cout, Cin, KH, KW] stored with Cout innermost: one contiguous vector load
        // per (ci, kh, kw) instead of a gather.
        b.pack_weights = true;
        // Loop order of the blocks in a tile. Pixel blocks outside, every pixel block reads
        // all the weights (9 Cin Cout floats): ResNet-18's 512-channel 3x3 convs at 7x7 read
        // 9.4 MB per block, 4 blocks a tile, 151 MB a call, and ran at 17 GB/s (8.9 ms).
        // Channel blocks outside, each channel block's weight slice (9 Cin x 32 floats, 590 KB
        // there) serves every pixel of the tile from cache, and the tile's input (its rows and
        // halo, all channels) is what is read again, once per channel block. A pixel block
        // re-reads 9 Cin Cout floats, a channel block about 9/8 of the tile's pixels x Cin:
        // for any Cout of a block or more, pixel blocks outside read ~Cout/32 x 8 times more.
        b.channel_blocks_outside = true;
        b.reduction_chunk = reduction_chunk(n, b);
      }
      m.block = b;
    }
    m.row_kernels = t_.gpu && graph::has_trait(n.op, graph::OpTrait::row_statistic);
    m.vectorize_row_reduction = !t_.gpu &&
                                graph::has_trait(n.op, graph::OpTrait::row_statistic) &&
                                reduces_innermost_axis(n);
  }

  int requested_chunk(const graph::Node& n) const {
    auto req = g_.request.blocks.find(n.name);
    return req != g_.request.blocks.end() ? req->second.reduction_chunk : 0;
  }

  // Input channels per pass of an NHWC conv's channel block over its tile, or K per pass of a
  // linear layer's column block (0: one pass). A pixel block reads KH rows x ((rows - 1) s +
  // (KW - 1) d + 1) pixels x Cin of input (a linear's: rows x K) and the block's weight slice,
  // KH KW Cin x its columns. Where the input alone passes half of L1 (ResNet's 3x3 convs at
  // 256 and 512 channels: 28 and 55 KB; GPT-2's c_proj, K = 3072: 48 KB), the two evict each
  // other and every FMA waits on L2. In chunks of c channels, the largest power of two whose
  // slice of weights fits L1 (a conv's; a linear's below), both stay there; the accumulators go to
  // a tile-sized buffer between chunks. 1 thread, AVX-512 (Zen 5, 48 KB L1), ms for 231 MFLOP,
  // whole / c = 16, 32, 64: 7x7x512 2.50 / 1.56, 1.86, 1.91; 14x14x256 (7 rows) 1.56 / -, 1.24, -;
  // 28x28x128 (input 14 KB, not chunked) 1.15 / -, 1.12, 1.11; 56x56x64 1.10 / -, 1.12, -. 2
  // threads, 128 x 3072 -> 768 (604 MFLOP): 2.85 / c = 64, 128, 256: 2.08, 2.12, 2.03; 128 x 768 ->
  // 3072 (input 12 KB, not chunked) 2.51 / c = 128: 2.21, 256: 3.29 (noisy).
  int reduction_chunk(const graph::Node& n, const RegisterBlock& b) const {
    const graph::Tensor& x = ig_.graph().tensor(n.inputs[0]);
    const graph::Tensor& w = ig_.graph().tensor(n.inputs[1]);
    int64_t cin = x.shape.back(), kh = 1, kw = 1, stride = 1, dilation = 1;
    if (n.op == "conv2d") {
      const graph::Window2d win = graph::conv2d_window(n, x, w);
      cin = w.shape[1], kh = w.shape[2], kw = w.shape[3];
      stride = win.strides[1], dilation = win.dilations[1];
    }
    // Blocks computed whole under an unaligned root keep their own per-block accumulator.
    if (b.whole_dims) return 0;
    if (const int want = requested_chunk(n); want > 0) return want >= cin ? 0 : want;
    const int64_t f = sizeof(float);
    const int64_t input = kh * ((b.rows - 1) * stride + (kw - 1) * dilation + 1) * cin * f;
    // A wide block's weights stream from L2 by design (wide_conv_block); chunks, which keep a
    // slice of them in L1 at the cost of a pass over the tile's input per chunk, pay only
    // where its input alone outgrows L1. ResNet-50 AOT with its 1x1 convs of 1024 input
    // channels unchunked (28 KB of input a block, against 128 channels a pass): 32.8 -> 31.7
    // ms (6 runs alternated, 2 AVX-512 Xeon cores); 3x3 stride 2, 28x28x128 -> 14x14x256
    // (46 KB): 0.457 -> 0.408 ms; 7x7x512 (55 KB) chunked: 0.90 against 0.97 whole.
    const bool wide = n.op == "conv2d" && b.vectors == kWideBlockVectors;
    if ((wide ? input : 2 * input) <= t_.l1_bytes) return 0;
    int64_t c = 1;
    if (n.op == "linear") {
      // A block of one vector where two would fit (one_vector_block's 14 rows) goes over K in
      // one pass: each chunk passes the tile's accumulators through the block again, per
      // vector of columns, twice as many as at 2 vectors. Unchunked against chunks of 256,
      // alone (JIT, 2 Zen 4 cores, 4 runs alternated, ms): [14, 14, 1536] -> 384 1.071 ->
      // 1.009, [14, 14, 384] -> 1536 1.085 -> 1.051, behind its layer norm 1.134 -> 1.107.
      if (broadcasts_from_memory() && b.vectors == 1 && w.shape.back() >= 2 * b.lanes) return 0;
      // A linear layer's weights serve only the tile's rows (128 tokens): they stream from
      // DRAM once a call and from L2 to each row block, as a wide block's do. Chunks keep the
      // block's rows of input in half of L1, no smaller: each chunk passes the tile's
      // accumulators (128 x 192 floats, out of L1) through the block again. BERT-base encoder
      // (2 layers, its two 3072 -> 768 linears in chunks of 128, 256, 512, 1024; AOT, 5 runs
      // alternated, 2 AVX-512 Xeon cores): 17.07, 15.73, 15.71, 15.41 ms; GPT-2 block 8.22,
      // 8.07, 7.83, 7.84 (unchunked 8.00); the linear alone, weights hot: 2.42, 2.36, 2.33,
      // 2.30 (2.37).
      while (2 * c < cin && 2 * b.rows * 2 * c * f <= t_.l1_bytes) c *= 2;
      return int(c);
    }
    const int64_t columns = int64_t(b.lanes) * b.vectors;
    while (2 * c < cin && kh * kw * 2 * c * columns * f <= t_.l1_bytes) c *= 2;
    // No fewer than 32 channels a pass: 4-vector blocks (wide_conv_block), whose slice at 16
    // channels fits L1, measured chunks of 16 slower than 32 (whose slice spills to L2): 3x3
    // 7x7x512 0.90 -> 1.00 ms, 14x14x256 0.93 -> 1.04 (AOT, 2 threads, 2 AVX-512 Xeon
    // cores); the inner loop's trip count is the chunk, its overhead paid each 9 c steps.
    c = std::max(c, std::min<int64_t>(kMinReductionChunk, cin / 2));
    return int(c);
  }

  // The tile rule of a root: a register-blocked anchor's blocks (4 rows of a matmul or an
  // NHWC conv, up to 8 channels of an NCHW conv) never straddle a tile, so tiles split the
  // block's row dim in multiples of the block, or an outer dim, or hold it whole.
  TileRule tile_rule(const std::string& root, const graph::Shape& root_shape) const {
    TileRule rule;
    // Row statistics (softmax, layer norm) are vectorised across rows: a tile holds at least
    // a vector of rows, or most lanes would be masked off.
    if (!t_.gpu && has_row_statistics()) rule.row_multiple = lanes_;
    const size_t rank = root_shape.size();
    bool weight_bound = true, any = false, heads = true;
    int64_t chunk = 1;
    for (const auto& name : g_.nodes) {
      if (!is_blocked_anchor(name) || rank < 2) continue;
      // Anchors in another root's tiles, or not aligned with this root (which compute their
      // block dims whole), put no constraint on these tiles; with only such anchors, chunks
      // of the root's dim 0 are safe.
      if (name != root && !reaches_any(name, {root})) continue;
      if (!aligned(name, root)) continue;
      rule.chunk_columns = false;
      const RegisterBlock bs = block_shape(name);
      any = true;
      heads = heads && name != root && splits_heads(name, root);
      // A chunk of the root's channels is a window into a concat's inputs: DenseNet's last
      // conv of a layer feeds channels [992, 1024) of the next concat, so a chunk [0, 256)
      // needs none of it, the clamped index asks for one channel, and a 32-channel block
      // shifted inwards to cover it starts at -31 (its weights read before their first).
      // An anchor broadcast into its root (a squeeze-excite FC's [1,1,1,C] scaling a
      // [1,H,W,C] tensor) is recomputed in each tile of rows, its weights read once a tile:
      // where the 2 tiles a core reads fewer weights than the root has elements, the root's
      // pixels are the tiles' work and split in rows. Chunks of channels had split
      // EfficientNet-B0's 144-channel SE multiply at 56x56 96 + 48 over 2 cores, each chunk
      // a strided walk of every pixel: 39 us in the network, 18-20 us in rows. Its 1152-channel
      // ones at 7x7 (as many weights as pixels) stay in chunks: 8 us, 13 us in rows.
      const int64_t root_elements = graph::num_elements(root_shape);
      const bool few_weights_a_tile =
          graph::num_elements(tensor_of(name).shape) < root_elements &&
          2 * t_.cores * graph::num_elements(ig_.graph().tensor(node(name).inputs[1]).shape) <=
              root_elements;
      weight_bound = weight_bound && weight_bound_anchor(node(name)) && !few_weights_a_tile &&
                     !offsets_columns(name, root) && !normalizes_columns(name, root);
      chunk = std::lcm(chunk, int64_t(bs.lanes) * bs.vectors);
      if (is_nchw_conv(node(name))) {
        // Blocks of an NCHW conv lie along C: tiles hold all channels and split H (or N),
        // which also keeps a tile's input rows (all channels, F + halo rows) in cache.
        rule.whole.insert(2);
        continue;
      }
      size_t ud = size_t(bs.row_dim);
      int64_t block = bs.rows;
      if (bs.winograd) ud = 2, block = 2;  // whole rows of W, H in whole 2x2 tiles
      if (ud >= rank || root_shape[rank - 1 - ud] < block) {  // no blocks: the dim is whole
        ud = std::min(ud + 1, rank - 1);
        block = 1;
      }
      if (int(ud) > rule.min_dim) {
        rule.min_dim = int(ud);
        rule.multiple = block;
      } else if (int(ud) == rule.min_dim) {
        rule.multiple = std::lcm(rule.multiple, block);
      }
    }
    // Chunks of whole blocks, the last one at least a block (tile() sees to it): a chunk
    // narrower than a block would have it read weights past the last channel. Where the
    // channels are no multiple of a block, the last chunk's last block shifts inwards (over a
    // linear's padded panels it computes into the padding instead: the emitter's
    // guard_columns): a classifier's 1000 columns in blocks of 64 had been one tile on one
    // core (MobileNetV2's GEMV, 5 MB of weights, 110 us in the network).
    // Split into heads, the chunks are heads: ViT-Tiny's q, k, v linear (576 columns, 197 rows)
    // under its head split, 12 groups (JIT, 2 Zen 4 cores, two sets of medians of 5 alternated
    // runs): 2.92 and 2.88 ms stored whole and copied into heads, 2.72 and 2.83 in tiles of one
    // head; in 3 tiles of 3 heads (as tiles of rows sized for the cache came out) 3.35 in one
    // run, the third tile left to one core.
    if (any && weight_bound && heads) {
      rule.head_chunks = true;
    } else if (any && weight_bound && root_shape.back() >= chunk) {
      rule.channel_chunks = chunk;
    }
    return rule;
  }

  // An NHWC conv with more weights than input (ResNet's last stages: 9.4 MB of weights for a
  // 100 KB 7x7x512 input). Tiles of rows each read all the weights, from memory once the
  // network's other weights have pushed them out of cache: ResNet-18's 7x7 convs took 3-4 ms
  // in the network (1.8 ms alone, their weights cached). Tiles of output channels read each
  // weight once a call and the small input once a tile: for T tiles, W + T I bytes, not
  // T W + I.
  // The same holds for a linear layer over few rows (GPT-2's c_fc at 128 tokens: 9.4 MB of
  // weights, 0.4 MB of input), which tiles of rows read 16 times over: 5.9 ms for 604 MFLOP.
  bool weight_bound_anchor(const graph::Node& n) const {
    if ((n.op != "conv2d" || is_nchw_conv(n)) && n.op != "linear" && n.op != "conv2d_winograd") {
      return false;
    }
    const graph::Tensor& x = ig_.graph().tensor(n.inputs[0]);
    const graph::Tensor& w = ig_.graph().tensor(n.inputs[1]);
    return w.kind == graph::TensorKind::param &&
           graph::num_elements(w.shape) > graph::num_elements(x.shape);
  }

  // Does `name` read a graph input, itself or through members of the group?
  bool reads_graph_input(const std::string& name) const {
    auto reads_input = [&](const std::string& m) {
      for (const std::string& t : node(m).inputs) {
        if (ig_.graph().tensor(t).kind == graph::TensorKind::input) return true;
      }
      return false;
    };
    bool found = reads_input(name);
    walk_upstream(name, [&](const std::string& m) {
      found = found || reads_input(m);
      return !found;
    });
    return found;
  }

  // --- walks inside the group -------------------------------------------------------------
  // Walks the group members downstream of `name`, each once; `visit(member)` says whether
  // to go on past it.
  template <typename Visit>
  void walk_downstream(const std::string& name, Visit visit) const {
    walk(
        name, [&](size_t u) -> const std::vector<size_t>& { return ig_.succs(u); }, visit);
  }
  // The same upstream: the group members `name` reads, transitively.
  template <typename Visit>
  void walk_upstream(const std::string& name, Visit visit) const {
    walk(
        name, [&](size_t u) -> const std::vector<size_t>& { return ig_.preds(u); }, visit);
  }
  template <typename Next, typename Visit>
  void walk(const std::string& name, Next next, Visit visit) const {
    std::vector<size_t> stack{index_.at(name)};
    std::unordered_set<size_t> seen;
    while (!stack.empty()) {
      const size_t u = stack.back();
      stack.pop_back();
      for (size_t s : next(u)) {
        const std::string& sn = ig_.node(s).name;
        if (!members_.count(sn) || !seen.insert(s).second) continue;
        if (visit(sn)) stack.push_back(s);
      }
    }
  }

  // Is an anchor's index space the root's in the dims its blocks use? The root itself, or
  // reached through ops that keep the dims' meaning (elementwise ops, windows, pools) and,
  // for a block over the last two axes (matmul, linear, an NHWC conv), reshapes that keep
  // those two axes: transformers' Conv1D is Reshape [S, K] -> Gemm -> Reshape [1, S, N], and
  // the reshape's lowering maps the shared trailing dims one to one. Unaligned, GPT-2's
  // c_attn, c_fc and c_proj were computed whole in each of 4 tiles.
  bool aligned(const std::string& anchor, const std::string& root) const {
    if (anchor == root) return true;
    const graph::Shape& a = tensor_of(anchor).shape;
    const graph::Shape& r = tensor_of(root).shape;
    const bool last_two = !is_nchw_conv(node(anchor));
    auto keeps_last_two = [](const graph::Shape& x, const graph::Shape& y) {
      return x.size() >= 2 && y.size() >= 2 && x.back() == y.back() &&
             x[x.size() - 2] == y[y.size() - 2];
    };
    bool moved = false;
    walk_downstream(anchor, [&](const std::string& m) {
      const graph::Node& n = node(m);
      if (graph::has_trait(n.op, graph::OpTrait::moves_layout)) {
        moved = moved || !last_two || n.op != "reshape" ||
                !keeps_last_two(ig_.graph().tensor(n.inputs[0]).shape, tensor_of(m).shape);
      }
      return m != root;
    });
    if (moved) return last_two && splits_heads(anchor, root);
    return a.size() == r.size() || (last_two && keeps_last_two(a, r));
  }

  // Is the path from an anchor over the last two axes to `root` a head split: one reshape
  // splitting the last axis, [.., S, H * D] -> [.., S, H, D], and transposes that keep D last
  // and bring S second to last, [.., H, S, D]? A tile of the root (D whole, rows of S, the
  // heads' dims one point each) then reads a box of the anchor: those rows and D columns,
  // whole blocks where D is a multiple of the block's width. Not aligned, ViT-Tiny's q, k, v
  // linear was stored whole and copied into heads in a second pass.
  // (The reverse, attention's matmuls and softmax computed at the tiles of rows of the
  // head-merging reshape after them, measured no faster than each computed whole in its own
  // tiles: ViT-Tiny's 12 attention groups 2.45-2.49 ms against 2.42, JIT, 2 Zen 4 cores,
  // medians of 5 alternated runs; their 3 x 197 x 197 scores stay in L2 either way.)
  bool splits_heads(const std::string& anchor, const std::string& root) const {
    if (tensor_of(anchor).shape.size() < 2) return false;
    const RegisterBlock b = block_shape(anchor);
    const int64_t width = int64_t(b.lanes) * b.vectors;
    size_t row = tensor_of(anchor).shape.size() - 2;  // the axis of the anchor's rows
    bool split = false;
    for (std::string m = anchor; m != root;) {
      std::vector<std::string> readers;
      for (size_t s : ig_.succs(index_.at(m))) {
        if (members_.count(ig_.node(s).name)) readers.push_back(ig_.node(s).name);
      }
      if (readers.size() != 1) return false;
      m = readers[0];
      const graph::Node& n = node(m);
      const graph::Shape& in = ig_.graph().tensor(n.inputs[0]).shape;
      const graph::Shape& out = tensor_of(m).shape;
      if (n.op == "reshape") {
        // Every axis but the last kept: the rows stay on axis `row`.
        if (split || in.empty() || graph::reshape_kept_dims(in, out).first + 1 < in.size() ||
            out.size() <= in.size() || out.back() % width != 0) {
          return false;
        }
        split = true;
      } else if (n.op == "transpose") {
        const std::vector<int64_t> perm = graph::attr_ints(n, "perm", {});
        if (perm.size() != out.size() || perm.back() != int64_t(out.size()) - 1) return false;
        row = size_t(std::find(perm.begin(), perm.end(), int64_t(row)) - perm.begin());
      } else if (graph::has_trait(n.op, graph::OpTrait::moves_layout) ||
                 graph::has_trait(n.op, graph::OpTrait::anchor)) {
        return false;
      }
    }
    return split && row + 2 == tensor_of(root).shape.size();
  }

  // Does a concat or slice along dim 0 (the last axis: NHWC channels, columns) lie between an
  // anchor and its root? Then the root's dim 0 is not the anchor's.
  bool offsets_columns(const std::string& anchor, const std::string& root) const {
    if (anchor == root) return false;  // its own tiles
    bool offset = false;
    walk_downstream(anchor, [&](const std::string& m) {
      const graph::Node& n = node(m);
      const int rank = int(tensor_of(m).shape.size());
      if (n.op == "concat") {
        offset = offset || graph::normalize_axis(n, graph::attr_int(n, "axis", 0), rank) == rank - 1;
      } else if (n.op == "slice") {
        const auto axes = graph::attr_ints(n, "axes", {});
        offset = offset || axes.empty();
        for (int64_t a : axes) offset = offset || graph::normalize_axis(n, a, rank) == rank - 1;
      }
      return m != root && !offset;
    });
    return offset;
  }

  // Does a row statistic over the last axis (a layer norm, a softmax) lie between an anchor and
  // its root? Then every tile of the root's dim 0 needs whole rows of the anchor: chunks of
  // that dim computed GPT-2's c_proj whole in each of 4 tiles.
  bool normalizes_columns(const std::string& anchor, const std::string& root) const {
    if (anchor == root) return false;  // its own tiles
    bool found = false;
    walk_downstream(anchor, [&](const std::string& m) {
      const graph::Node& n = node(m);
      found = found || (graph::has_trait(n.op, graph::OpTrait::row_statistic) &&
                        reduces_innermost_axis(n));
      return m != root && !found;
    });
    return found;
  }

  // Does `name` (transitively, inside the group) feed one of `targets`?
  bool reaches_any(const std::string& name, const std::set<std::string>& targets) const {
    bool found = false;
    walk_downstream(name, [&](const std::string& m) {
      found = found || targets.count(m) != 0;
      return !found;
    });
    return found;
  }

  // Stored nodes of the group that (transitively, inside the group) read `name`.
  // With `materialized`, materialized members count as roots too.
  std::vector<std::string> roots_reading(const std::string& name, bool materialized = false) const {
    std::vector<std::string> roots;
    walk_downstream(name, [&](const std::string& m) {
      if (!stored_.count(m) && !(materialized && materialized_.count(m))) return true;
      if (std::find(roots.begin(), roots.end(), m) == roots.end()) roots.push_back(m);
      return false;  // a root's own readers are its business
    });
    return roots;
  }

  const IndexedGraph& ig_;
  const FusedGroup& g_;
  const TargetFacts& t_;
  const std::unordered_map<std::string, size_t>& index_;
  const std::unordered_map<std::string, int>& output_of_;
  const std::set<std::string> members_;
  std::set<std::string> stored_, inlined_, materialized_;
  std::map<std::string, std::string> reason_;
  std::string anchor_;
  int lanes_ = 8;
};

}  // namespace

int64_t balanced_tile_factor(int64_t extent, int64_t factor, int64_t multiple,
                             int64_t other_tiles, int64_t per_tile, int cores) {
  multiple = std::max<int64_t>(multiple, 1);
  auto finish = [&](int64_t f) {
    const int64_t tiles = (extent + f - 1) / f * other_tiles;
    return (tiles + cores - 1) / cores * (f + per_tile);
  };
  int64_t best = factor;
  for (int64_t f = factor - multiple; f >= multiple; f -= multiple) {
    if (finish(f) < finish(best)) best = f;
  }
  return best;
}

TargetFacts facts_of(const HardwareProfile& hw) {
  TargetFacts t;
  t.gpu = hw.gpu;
  t.lanes = std::max(1, hw.vector_bytes / 4);
  t.vector_registers = hw.vector_registers;
  t.cores = std::max(1, hw.cores);
  t.gpu_max_threads = hw.gpu ? hw.max_threads_per_block : 0;
  if (const auto* l1 = hw.level("L1"); l1 && !hw.gpu && l1->size_bytes > 0) {
    t.l1_bytes = int(l1->size_bytes / t.cores);
  }
  return t;
}

const char* to_string(Placement p) {
  switch (p) {
    case Placement::inlined:
      return "inline";
    case Placement::at_tile:
      return "at_tile";
    case Placement::per_row:
      return "per_row";
    case Placement::root:
      return "root";
    default:
      return "materialized";
  }
}

std::optional<Placement> placement_named(const std::string& s) {
  for (Placement p : {Placement::inlined, Placement::at_tile, Placement::per_row, Placement::root,
                      Placement::materialized}) {
    if (s == to_string(p)) return p;
  }
  return std::nullopt;
}

const char* to_string(Tiling::Kind k) {
  switch (k) {
    case Tiling::Kind::chunks:
      return "chunks";
    case Tiling::Kind::column_chunks:
      return "column_chunks";
    case Tiling::Kind::rows:
      return "rows";
    default:
      return "gpu";
  }
}

const NodeSchedule* GroupSchedule::find(const std::string& node) const {
  for (const auto& n : nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

PipelineSchedule schedule_plan(const graph::Graph& g, const FusionPlan& plan,
                               const TargetFacts& target) {
  const IndexedGraph ig(g);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < ig.size(); ++i) index[ig.node(i).name] = i;
  std::unordered_map<std::string, int> output_of;
  for (size_t i = 0; i < g.outputs().size(); ++i) output_of[g.outputs()[i]] = int(i);
  PipelineSchedule s;
  s.target = target;
  std::set<int> rooted;
  for (const FusedGroup& grp : plan.groups) {
    s.groups.push_back(GroupScheduler(ig, grp, target, index, output_of).run());
    for (const auto& n : s.groups.back().nodes) {
      if (n.output >= 0) rooted.insert(n.output);
    }
  }
  // Outputs not rooted by any group (a stored node that other groups also read) copy it.
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (rooted.count(int(i))) continue;
    OutputCopy c;
    c.output = int(i);
    const graph::Shape& shape = g.tensor(g.outputs()[i]).shape;
    c.extents.assign(shape.rbegin(), shape.rend());
    c.tiling = GroupScheduler::tile(c.extents, 1.0, TileRule(), target.lanes, target.cores,
                                    target.gpu, kGpuThreads);
    s.output_copies.push_back(std::move(c));
  }
  return s;
}

namespace {

using json = nlohmann::ordered_json;

json tiling_json(const Tiling& t) {
  json j = {{"kind", to_string(t.kind)}, {"tiles", t.tiles}};
  if (t.kind == Tiling::Kind::gpu) {
    j["gpu_threads"] = t.gpu_threads;
    return j;
  }
  j["split_dim"] = t.split_dim;
  j["factor"] = t.factor;
  if (!t.whole_dims.empty()) j["whole_dims"] = t.whole_dims;
  j["vector_lanes"] = t.vector_lanes;
  return j;
}

json record_json(const GroupSchedule& s, const TargetFacts& t) {
  json j;
  j["anchor"] = s.anchor;
  if (!t.gpu) j["vector_lanes"] = s.vector_lanes;
  if (t.gpu) j["gpu_row_threads"] = s.gpu_row_threads;
  j["nodes"] = json::array();
  for (const NodeSchedule& n : s.nodes) {
    json jn = {{"node", n.node}, {"placement", to_string(n.placement)}};
    if (n.placement == Placement::root || n.placement == Placement::materialized) {
      if (n.output >= 0) jn["output"] = n.output;
      jn["extents"] = n.extents;
      jn["tiling"] = tiling_json(n.tiling);
      if (!n.compute_with.empty()) jn["compute_with"] = n.compute_with;
      if (n.members_per_row) jn["members_per_row"] = true;
      if (n.reduction_slices > 0) {
        jn["reduction_slices"] = n.reduction_slices;
        jn["reduction_slice_rows"] = n.reduction_slice_rows;
      }
    } else {
      jn["root"] = n.root;
    }
    if (n.block) {
      jn["block"] = {{"row_dim", n.block->row_dim},
                     {"lanes", n.block->lanes},
                     {"vectors", n.block->vectors},
                     {"rows", n.block->rows},
                     {"accumulators", n.block->accumulators(t.lanes)}};
      if (n.block->whole_dims) jn["block"]["whole_dims"] = true;
      jn["block"]["reduction_order"] = n.block->reduction_order;
      if (n.block->unroll_kernel_width) jn["block"]["unroll_kernel_width"] = true;
      if (n.block->pack_weights) jn["block"]["pack_weights"] = true;
      if (n.block->channel_blocks_outside) jn["block"]["channel_blocks_outside"] = true;
      if (n.block->reduction_chunk > 0) jn["block"]["reduction_chunk"] = n.block->reduction_chunk;
      if (n.block->in_root_loops) jn["block"]["in_root_loops"] = true;
      if (n.block->winograd) jn["block"]["winograd"] = true;
      if (n.block->winograd_input_whole) jn["block"]["winograd_input_whole"] = true;
    }
    if (n.vectorize_row_reduction) jn["vectorize_row_reduction"] = true;
    if (n.row_kernels) jn["row_kernels"] = true;
    jn["reason"] = n.reason;
    j["nodes"].push_back(jn);
  }
  j["prefetch"] = {{"distance", s.prefetch.distance},
                   {"emitted", s.prefetch.emitted},
                   {"why", s.prefetch.why}};
  return j;
}

json block_request_json(const RegisterBlock& b) {
  json j = {{"rows", b.rows}, {"vectors", b.vectors}};
  if (b.reduction_chunk > 0) j["reduction_chunk"] = b.reduction_chunk;
  return j;
}

// The requests that give this record again.
json requests_json(const GroupSchedule& s, const FusedGroup& g, const TargetFacts& t) {
  json j = {{"tile_fraction", g.request.tile_fraction},
            {"prefetch_distance", g.request.prefetch_distance},
            {"vector_lanes", t.gpu ? g.request.vector_lanes : s.vector_lanes}};
  if (t.gpu) {
    for (const NodeSchedule& n : s.nodes) {
      if (n.tiling.kind == Tiling::Kind::gpu) j["gpu_threads"] = n.tiling.gpu_threads;
    }
  }
  json placements = json::object(), blocks = json::object();
  for (const NodeSchedule& n : s.nodes) {
    if (n.placement == Placement::root) continue;
    placements[n.node] = n.placement == Placement::inlined        ? "inline"
                         : n.placement == Placement::materialized ? "materialized"
                                                                  : "compute_at";
    if (n.block) blocks[n.node] = block_request_json(*n.block);
  }
  for (const NodeSchedule& n : s.nodes) {
    if (n.placement == Placement::root && n.block) blocks[n.node] = block_request_json(*n.block);
  }
  if (!placements.empty()) j["placements"] = placements;
  if (!blocks.empty()) j["blocks"] = blocks;
  return j;
}

}  // namespace

std::string plan_to_json(const FusionPlan& p, const PipelineSchedule& s) {
  json j = json::parse(fusion::plan_to_json(p));
  j["target"] = {{"gpu", s.target.gpu},
                 {"lanes", s.target.lanes},
                 {"vector_registers", s.target.vector_registers},
                 {"cores", s.target.cores}};
  if (s.target.gpu) j["target"]["gpu_max_threads"] = s.target.gpu_max_threads;
  for (size_t i = 0; i < p.groups.size() && i < s.groups.size(); ++i) {
    j["groups"][i]["schedule"] = requests_json(s.groups[i], p.groups[i], s.target);
    j["groups"][i]["record"] = record_json(s.groups[i], s.target);
  }
  if (!s.output_copies.empty()) {
    j["output_copies"] = json::array();
    for (const auto& c : s.output_copies) {
      j["output_copies"].push_back(
          {{"output", c.output}, {"extents", c.extents}, {"tiling", tiling_json(c.tiling)}});
    }
  }
  // Keep "log" last, where a reader expects it.
  json log = j["log"];
  j.erase("log");
  j["log"] = log;
  return j.dump(2) + "\n";
}

std::string schedule_to_table(const PipelineSchedule& s) {
  std::ostringstream os;
  for (const GroupSchedule& g : s.groups) {
    os << "  group " << g.group << " (" << (s.target.gpu ? "gpu" : std::to_string(g.vector_lanes) +
                                                                  " lanes")
       << "):\n";
    for (const NodeSchedule& n : g.nodes) {
      os << "    " << std::left << std::setw(24) << n.node << std::setw(13) << to_string(n.placement);
      if (n.placement == Placement::root || n.placement == Placement::materialized) {
        const Tiling& t = n.tiling;
        os << t.tiles << " tiles, " << to_string(t.kind);
        if (t.kind == Tiling::Kind::gpu) {
          os << " x " << t.gpu_threads << " threads";
        } else {
          os << " dim " << t.split_dim << " by " << t.factor << ", " << t.vector_lanes
             << " lanes";
        }
        if (!n.compute_with.empty()) os << ", in " << n.compute_with << "'s loop";
        if (n.members_per_row) os << ", members per row";
      } else {
        os << "in " << n.root;
      }
      if (n.block) {
        os << "; block " << n.block->vectors << "x" << n.block->lanes << " lanes x "
           << n.block->rows << " rows (dim " << n.block->row_dim << ")"
           << (n.block->whole_dims ? ", block dims whole" : "");
      }
      os << "\n";
    }
  }
  return os.str();
}

std::set<std::string> weights_to_pack(const graph::Graph& g, const PipelineSchedule& s) {
  std::set<std::string> out;
  for (const auto& grp : s.groups) {
    for (const auto& n : grp.nodes) {
      if (!n.block || !n.block->pack_weights) continue;
      for (const auto& node : g.nodes()) {
        if (node.name != n.node || node.inputs.size() < 2) continue;
        if (g.tensor(node.inputs[1]).kind == graph::TensorKind::param) out.insert(node.inputs[1]);
      }
    }
  }
  return out;
}

std::set<std::string> file_packed_weights(const graph::Graph& g) {
  std::set<std::string> out;
  for (const auto& n : g.nodes()) {
    if ((n.op != "conv2d" && n.op != "linear") || n.inputs.size() < 2) continue;
    const graph::Tensor &x = g.tensor(n.inputs[0]), &w = g.tensor(n.inputs[1]);
    if (w.kind != graph::TensorKind::param) continue;
    if (n.op == "linear" ? graph::linear_weight_panel(w.shape) > 0
                         : w.shape.size() == 4 && graph::op_layout(n, x) == graph::Layout::NHWC) {
      out.insert(w.name);
    }
  }
  return out;
}

std::map<std::string, std::string> schedule_notes(const PipelineSchedule& s) {
  std::map<std::string, std::string> out;
  for (const GroupSchedule& g : s.groups) {
    for (const NodeSchedule& n : g.nodes) {
      std::string note = to_string(n.placement);
      if (n.placement == Placement::root || n.placement == Placement::materialized) {
        note += ": " + std::to_string(n.tiling.tiles) + " tiles";
      } else {
        note += " of " + n.root;
      }
      if (n.block) {
        note += ", block " + std::to_string(n.block->vectors * n.block->lanes) + "x" +
                std::to_string(n.block->rows);
      }
      out[n.node] = note;
    }
  }
  return out;
}

}  // namespace opfuse::schedules
