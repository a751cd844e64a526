#include "schedules/emitter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "fusion/graph/indexed_graph.h"
#include "fusion/graph/op_schema.h"
#include "fusion/hardware/host.h"

namespace opfuse::schedules {

using namespace Halide;

namespace {

// A register-blocked anchor's block: 2 vectors of output channels (columns) x unrolled pixels
// (rows). Its accumulators take at most half the vector register file, the other half holds
// the loaded and broadcast inputs: 16 of AVX-512's 32 zmm, 8 of AVX2's 16 ymm. At least 8
// accumulators cover a 4-cycle FMA latency on 2 FMA pipes. With 16 ymm, 16 accumulators (the
// AVX-512 block) spill in the reduction loop.
constexpr int kBlockVectors = 2;
constexpr int kMinBlockRows = 4;  // rows of a block where the extent allows no more

class Emitter {
 public:
  Emitter(const Pipeline& p, const fusion::FusionPlan& plan, const Target& t, int cores)
      : p_(p), plan_(plan), t_(t), isa_(isa_of(t)), ig_(*p.graph), gpu_(t.has_gpu_feature()) {
    natural_vec_ = vec_ = std::max(1, t.natural_vector_size(Float(32)));
    cores_ = std::max(1, cores);
    for (const auto& ln : p.lowered->nodes) lowered_[ln.node] = &ln;
    for (size_t i = 0; i < p.graph->outputs().size(); ++i)
      output_of_[p.graph->outputs()[i]] = int(i);
    for (size_t i = 0; i < ig_.size(); ++i) index_[ig_.node(i).name] = i;
  }

  void run() {
    for (const fusion::FusedGroup& g : plan_.groups) schedule_group(g);
    vec_ = natural_vec_;
    // Outputs not rooted by any group (a stored node that other groups also read) copy it.
    for (size_t i = 0; i < p_.outputs.size(); ++i) {
      if (!rooted_outputs_.count(int(i))) {
        root_schedule(p_.outputs[i], ig_.graph().tensor(p_.graph->outputs()[i]).shape, 1.0,
                      TileRule());
      }
    }
  }

 private:
  const graph::Tensor& tensor_of(const std::string& node) const {
    return ig_.graph().tensor(ig_.node(index_.at(node)).outputs[0]);
  }

  // --- roots --------------------------------------------------------------------------
  // What the tiles of a group's root must respect (Halide dim order, 0 = vectorised).
  struct TileRule {
    size_t min_dim = 1;    // tiles split this dim or an outer one: the dims inside it are whole
    int64_t multiple = 1;  // a split of min_dim itself takes a multiple of this many
    int64_t row_multiple = 1;  // points of the dims above 0 a tile holds: a multiple of this
    std::set<size_t> whole;    // dims outside the split one that tiles still hold whole
    bool chunk_columns = true;  // with too few rows for the cores, tiles may split dim 0
    bool operator==(const TileRule& o) const {
      return min_dim == o.min_dim && multiple == o.multiple && row_multiple == o.row_multiple &&
             whole == o.whole && chunk_columns == o.chunk_columns;
    }
  };

  // Schedules a group root; returns the loop level at which its members are computed.
  //
  // Tiles are boxes: the dims inside the split dim whole, the split dim in pieces of F, the
  // dims outside it one point per tile, fused with the pieces into the parallel loop. Members
  // computed at the tile then get exact bounds; tiles of a fused (flattened) row range would
  // not: Halide bounds y = (row / W) % H over a range of rows by all of [0, H), so every tile
  // computed every member's whole tensor (a conv anchor 4x over on 2 cores).
  LoopLevel root_schedule(Func r, const graph::Shape& shape, double tile_fraction,
                          const TileRule& rule, std::optional<LoopLevel>* row_level = nullptr) {
    std::vector<Var> args = r.args();
    const int k = int(args.size());
    std::vector<int64_t> ext(shape.rbegin(), shape.rend());  // Halide order
    if (gpu_) {
      Var fused = args[0];
      for (int i = 1; i < k; ++i) {
        Var f(r.name() + "_f" + std::to_string(i));
        r.fuse(fused, args[i], f);
        fused = f;
      }
      Var bx(r.name() + "_bx"), tx(r.name() + "_tx");
      int threads = 256;
      r.gpu_tile(fused, bx, tx, threads, TailStrategy::GuardWithIf);
      return LoopLevel(r, tx);
    }
    int v = vec_;
    while (v > 1 && v > ext[0]) v /= 2;
    // Loop names are the same in every root: compute_with matches a sibling's loops by name.
    Var to("tile"), ti("ti");
    if (k == 1) {
      const int64_t chunk =
          std::max<int64_t>(v, std::min<int64_t>(int64_t(std::ceil(double(ext[0]) * tile_fraction)),
                                                 (ext[0] + 2 * cores_ - 1) / (2 * cores_)));
      r.split(args[0], to, ti, int(chunk), TailStrategy::GuardWithIf);
      if (v > 1) r.vectorize(ti, v, TailStrategy::GuardWithIf);
      return tile_level(r, to);
    }
    int64_t outer_ext = 1;
    for (int i = 1; i < k; ++i) outer_ext *= ext[i];
    if (outer_ext < 2 * cores_ && rule.chunk_columns && ext[0] >= int64_t(2 * cores_) * v) {
      // Too few rows for the cores ([1, 49152] after a flatten): tiles are chunks of dim 0,
      // each holding the few rows whole.
      const int64_t chunk = (ext[0] / (2 * cores_) + v - 1) / v * v;
      r.split(args[0], to, ti, int(chunk), TailStrategy::GuardWithIf);
      std::vector<VarOrRVar> order{ti};
      order.insert(order.end(), args.begin() + 1, args.end());
      order.push_back(to);
      r.reorder(order);
      if (v > 1) r.vectorize(ti, v, TailStrategy::GuardWithIf);
      return tile_level(r, to);
    }
    // Tile rows from the cost model's working-set fraction, at least 2 tiles per core.
    int64_t rows = std::max<int64_t>(1, int64_t(std::floor(double(outer_ext) * tile_fraction)));
    rows =
        std::min<int64_t>(rows, std::max<int64_t>(1, (outer_ext + 2 * cores_ - 1) / (2 * cores_)));
    rows = std::min(outer_ext, (rows + rule.row_multiple - 1) / rule.row_multiple * rule.row_multiple);
    // The split dim j: the innermost at or outside min_dim, not held whole, whose rows reach
    // `rows`. A tile holds the dims inside j, F rows of j and the whole dims outside j.
    const size_t min_dim = std::min<size_t>(std::max<size_t>(rule.min_dim, 1), size_t(k - 1));
    auto whole = [&](size_t d) { return rule.whole.count(d) != 0; };
    auto whole_outside = [&](size_t j) {
      int64_t n = 1;
      for (size_t d = j + 1; d < size_t(k); ++d) n *= whole(d) ? ext[d] : 1;
      return n;
    };
    size_t last = size_t(k - 1);  // the outermost dim that may be split
    while (last > 1 && whole(last)) --last;
    size_t j = 1;
    int64_t inner = 1;  // rows of the dims inside j
    while (j < last && (j < min_dim || whole(j) || inner * ext[j] * whole_outside(j) < rows)) {
      inner *= ext[j++];
    }
    const int64_t held = inner * whole_outside(j);
    int64_t factor = std::clamp<int64_t>((rows + held - 1) / held, 1, ext[j]);
    if (j == min_dim && rule.multiple > 1) {
      factor = std::min(ext[j], (factor + rule.multiple - 1) / rule.multiple * rule.multiple);
    }
    // ShiftInwards: every tile has F rows (the last one overlaps its neighbour), so a
    // register-blocked anchor inside never sees fewer rows than its block.
    r.split(args[j], to, ti, int(factor), TailStrategy::ShiftInwards);
    std::vector<VarOrRVar> order(args.begin(), args.begin() + j);
    order.push_back(ti);
    for (size_t d = j + 1; d < size_t(k); ++d) {
      if (whole(d)) order.push_back(args[d]);
    }
    order.push_back(to);
    Var par = to;
    for (size_t d = j + 1; d < size_t(k); ++d) {
      if (whole(d)) continue;
      order.push_back(args[d]);
    }
    r.reorder(order);
    for (size_t d = j + 1; d < size_t(k); ++d) {
      if (whole(d)) continue;
      Var f("tile_p" + std::to_string(d));
      r.fuse(par, args[d], f);
      par = f;
    }
    if (v > 1) r.vectorize(args[0], v, TailStrategy::GuardWithIf);
    if (row_level && k > 2) *row_level = LoopLevel(r, j == 1 ? ti : args[1]);
    return tile_level(r, par);
  }

  // The parallel loop over tiles `par` becomes "tiles" around a loop of one trip,
  // "in_tile", where the tile's members are computed. The extra level serves horizontal
  // siblings fused into one loop (compute_with at "tiles"): Halide bounds producers computed
  // at a fused loop by a sibling's whole extent, but its own inner loop by its tile.
  LoopLevel tile_level(Func r, Var par) {
    Var tiles("tiles"), in_tile("in_tile");
    r.split(par, tiles, in_tile, 1).parallel(tiles);
    return LoopLevel(r, in_tile);
  }

  // --- members ------------------------------------------------------------------------
  void vectorize_inner(Func f) {
    if (gpu_ || f.args().empty()) return;
    f.vectorize(f.args()[0], vec_, TailStrategy::GuardWithIf);
    for (int u = 0; u < f.num_update_definitions(); ++u) {
      f.update(u).vectorize(f.args()[0], vec_, TailStrategy::GuardWithIf);
    }
  }

  // The register block of an anchor: `vectors` vectors of `lanes` along dim 0 (output
  // channels, columns; W for NCHW) x `rows` along dim `ud` (pixels, rows; C for NCHW).
  // Sizes fit the extents, so the block never needs a tail (ShiftInwards moves the last
  // block back), the accumulator's region is a constant and LLVM keeps it in registers.
  struct BlockShape {
    size_t ud = 1;
    int lanes = 1, vectors = 1, rows = 1;
  };
  BlockShape block_shape(const graph::Node& n) const {
    const graph::Shape& shape = tensor_of(n.name).shape;
    BlockShape b;
    const bool nchw = is_nchw_conv(n);
    b.ud = nchw ? 2 : 1;
    if (shape.size() <= b.ud) return b;
    const int64_t ve = shape.back(), ue = shape[shape.size() - 1 - b.ud];
    // Fewer columns than a vector (an 8-channel NHWC conv on 16 lanes): the widest power of
    // two that fits, not scalar code.
    while (b.lanes * 2 <= std::min<int64_t>(ve, vec_)) b.lanes *= 2;
    if (b.lanes < 4) b.lanes = 1;
    const bool two_vectors = ve >= int64_t(b.lanes) * kBlockVectors && b.lanes > 1;
    if (nchw) {
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
      return b;
    }
    // The rows fill the accumulator budget (half the register file): on AVX-512 an NHWC conv
    // is 2 x 8 (16 zmm: at 8 the FMA latency of 2 pipes is covered with no slack; measured
    // x1.10 on cbr_pool, mixed and perception, while 6 rows, which do not divide W = 56,
    // lost 20%; 7 and 14 rows, 14 and 28 accumulators, measured the same as 8), a matmul
    // 2 x 4 of its 2-register lanes (default_lanes: 2 x natural); on AVX2 half the rows.
    b.vectors = two_vectors ? kBlockVectors : 1;
    const int regs_per_vector = std::max(1, b.lanes / natural_vec_);
    const int budget = std::max(1, accumulator_registers() / regs_per_vector);  // in vectors
    const int rows_wanted = std::max(1, budget / b.vectors);
    const int fallback = std::min(rows_wanted, kMinBlockRows);
    b.rows = ue >= rows_wanted ? rows_wanted : (ue >= fallback ? fallback : 1);
    return b;
  }

  // Register blocking of an anchor (conv, matmul, linear). The node's Func N is computed in
  // blocks of 2 vectors x 4 rows (8 accumulator vectors: enough to cover a 4-cycle FMA
  // latency on 2 FMA pipes), and its accumulator is computed per block, so the accumulator is
  // a small stack array that LLVM keeps in registers while the reduction loops run inside:
  //
  //   for each block of N:                    matmul/linear: 2 column vectors x 4 rows
  //     acc[block] = init                     conv NHWC: 2 channel vectors x 8 pixels
  //                                           (1 x 16 where one vector holds the columns)
  //     for r (k, or ci/kw/kh):               conv NCHW: 1 pixel vector x 8 channels, or
  //                                           2 x 4, 2 x 2 where 8 does not divide C
  //                                           (smaller where the tensor is smaller)
  //       acc[block] += a(r) * b(r)   <- 8 vector FMAs, one broadcast, two vector loads
  //     N[block] = acc[block]
  //
  // No software prefetch: prefetching the next block's input rows (Func::prefetch at the
  // pixel-block loop, 1 or 2 blocks ahead) measured x0.97-x0.99 on cbr_pool, mixed and
  // perception; the input tile is in L2 and the hardware prefetchers follow its rows. The
  // plan's 7.3.4 prefetch distance is reported, not emitted.
  void block_anchor(const graph::Node& n, Func node_func, Func acc) {
    if (gpu_) return;
    std::vector<Var> a = node_func.args();
    std::vector<RVar> r = acc.rvars(0);
    const bool nchw = is_nchw_conv(n);
    const BlockShape bs = block_shape(n);
    const size_t vd = 0, ud = bs.ud;
    if (a.size() <= ud) return;
    const int vw = bs.lanes, vecs = bs.vectors, rows = bs.rows;
    if (!aligned_with_root(n.name)) {
      // Under a root of another rank or layout (a flatten, a transpose), a tile's region of
      // the anchor comes through divisions, modulos or permutations of the root's index, and
      // the tile rule cannot align it to the blocks: the block dims are computed whole, so no
      // block is ever cut short (ShiftInwards would move it before the region's start and
      // read before the input's: an explored attention plan did, at -48).
      const graph::Shape& shape = tensor_of(n.name).shape;
      node_func.bound(a[vd], 0, int(shape[shape.size() - 1 - vd]))
          .bound(a[ud], 0, int(shape[shape.size() - 1 - ud]));
    }
    const int width = vw * vecs;
    Var o1("bo1"), i1("bi1"), v1("bv1"), i2("bi2"), o2("bo2"), q1("bq1");
    node_func.split(a[vd], o1, i1, width).split(i1, v1, i2, vw).split(a[ud], o2, q1, rows);
    // The block (i2, v1, q1) innermost, then the block loops; NCHW's H lies between W and C.
    std::vector<VarOrRVar> block_order{i2, v1, q1, o1};
    for (size_t d = vd + 1; d < ud; ++d) block_order.push_back(a[d]);
    block_order.push_back(o2);
    node_func.reorder(block_order).vectorize(i2).unroll(v1).unroll(q1);
    acc.compute_at(node_func, o1).bound_extent(a[vd], width).bound_extent(a[ud], rows);
    Var p1("pa1"), q2("pq2"), p3("pa3"), q3("pq3");
    acc.split(a[vd], p1, q2, vw).vectorize(q2).unroll(p1).unroll(a[ud]);
    std::vector<VarOrRVar> order{q3, p3, a[ud]};
    if (n.op != "conv2d") {
      order.push_back(r[0]);  // k
    } else if (nchw) {
      order.insert(order.end(), {r[2], r[1], r[0]});  // kw, kh, ci
    } else {
      order.insert(order.end(), {r[0], r[2], r[1]});  // ci innermost: contiguous NHWC reads
    }
    acc.update().split(a[vd], p3, q3, vw).reorder(order).vectorize(q3).unroll(p3).unroll(a[ud]);
    if (nchw && ig_.graph().tensor(n.inputs[1]).shape.back() <= 7) {
      // The kernel-width loop is innermost and 1-7 long: unrolled, the block's FMAs are not
      // cut into short trips of loop overhead.
      acc.update().unroll(r[2]);
    }
    if (n.op == "conv2d" && !nchw) {
      // Weights [Cout, Cin, KH, KW] stored with Cout innermost: one contiguous vector load per
      // (ci, kh, kw) instead of a gather.
      Func weights = p_.lowered->tensors.at(n.inputs[1]);
      Func packed = weights.in(acc);
      std::vector<Var> wa = packed.args();  // kw, kh, ci, co
      packed.compute_root().reorder_storage(wa[3], wa[0], wa[1], wa[2]);
    }
  }

  // Schedules the helpers of a node computed within `at` (the group's tile, or on a GPU the
  // thread of its root).
  void schedule_helpers(const ops::LoweredNode& ln, const LoopLevel& at) {
    const graph::Node& n = ig_.node(index_.at(ln.node));
    for (size_t i = 0; i + 1 < ln.funcs.size(); ++i) {
      Func f = ln.funcs[i];
      const std::string& role = ln.roles[i];
      if (role == "padded") continue;  // inline: a select on the input's bounds
      if (role == "factor") {          // per channel: once on the CPU; inline in each GPU thread
        if (!gpu_) f.compute_root();
        continue;
      }
      const bool row_stat = graph::has_trait(n.op, graph::OpTrait::row_statistic);
      if (gpu_ && row_stat) {
        if (role == "exp") continue;  // inline: recomputed where the sum and output read it
        f.compute_root();
        Var fused = f.args()[0];
        for (size_t j = 1; j < f.args().size(); ++j) {
          Var g(f.name() + "_g" + std::to_string(j));
          f.fuse(fused, f.args()[j], g);
          fused = g;
        }
        f.gpu_tile(fused, Var(f.name() + "_b"), Var(f.name() + "_t"), 64,
                   TailStrategy::GuardWithIf);
        continue;
      }
      if (role == "acc" && !gpu_) {
        block_anchor(n, ln.output(), f);  // computed per register block of the node
        continue;
      }
      f.compute_at(at);
      if (!gpu_ && row_stat &&
          (role == "mean" || role == "var" || role == "sum" || role == "max") &&
          f.num_update_definitions() == 1 && reduces_innermost_axis(n)) {
        // A row statistic over the contiguous last axis: vectorise the reduction itself
        // (partial sums per lane, combined at the end) rather than across rows, whose
        // elements lie a whole row apart.
        f.update().atomic().vectorize(f.rvars(0).back(), vec_, TailStrategy::GuardWithIf);
      } else {
        vectorize_inner(f);
      }
    }
  }

  // Does the row statistic of `n` reduce over the tensor's last (contiguous) axis? Layer norm
  // always does (it normalises over x.shape[axis:]); softmax when its axis is the last.
  bool reduces_innermost_axis(const graph::Node& n) const {
    if (n.op == "layer_norm") return true;
    const graph::Shape& s = ig_.graph().tensor(n.inputs[0]).shape;
    return graph::normalize_axis(n, graph::attr_int(n, "axis", -1), s.size()) == int(s.size()) - 1;
  }

  // The tile rule of a group's root: a register-blocked anchor's blocks (4 rows of a matmul
  // or an NHWC conv, up to 8 channels of an NCHW conv) never straddle a tile, so tiles split
  // the block's row dim in multiples of the block, or an outer dim, or hold it whole.
  TileRule tile_rule(const fusion::FusedGroup& g, const std::string& root,
                     const graph::Shape& root_shape) const {
    TileRule rule;
    // Row statistics (softmax, layer norm) are vectorised across rows: a tile holds at least
    // a vector of rows, or most lanes would be masked off.
    if (!gpu_ && has_row_statistics(g)) rule.row_multiple = vec_;
    const size_t rank = root_shape.size();
    const std::set<std::string>& members = group_members_;
    for (const auto& name : g.nodes) {
      if (!is_blocked_anchor(name) || rank < 2) continue;
      // Anchors in another root's tiles, or not aligned with this root (which compute their
      // block dims whole, see block_anchor), put no constraint on these tiles; with only
      // such anchors, chunks of the root's dim 0 are safe.
      if (name != root && !reaches_any(name, members, {root})) continue;
      if (!aligned(name, root)) continue;
      rule.chunk_columns = false;
      const graph::Node& n = ig_.node(index_.at(name));
      const bool nchw = is_nchw_conv(n);
      if (nchw) {
        // Blocks of an NCHW conv lie along C: tiles hold all channels and split H (or N),
        // which also keeps a tile's input rows (all channels, F + halo rows) in cache.
        rule.whole.insert(2);
        continue;
      }
      const BlockShape bs = block_shape(n);
      size_t ud = bs.ud;
      int64_t block = bs.rows;
      if (ud >= rank || root_shape[rank - 1 - ud] < block) {  // no blocks: the dim is whole
        ud = std::min(ud + 1, rank - 1);
        block = 1;
      }
      if (ud > rule.min_dim) {
        rule.min_dim = ud;
        rule.multiple = block;
      } else if (ud == rule.min_dim) {
        rule.multiple = std::lcm(rule.multiple, block);
      }
    }
    return rule;
  }

  // The node computed at root on its own: an anchor through a wrapper, so that the anchor's
  // register blocks run inside the wrapper's tiles.
  Func own_root(const ops::LoweredNode& ln) const {
    Func root = is_blocked_anchor(ln.node) ? ln.output().in() : ln.output();
    root.compute_root();
    return root;
  }

  // Tiles `root` (which computes node ln's values), puts a blocked anchor and the node's
  // helpers in its tiles, and returns the tile level for the group's other members.
  //
  // `sibling`: a root of the same horizontal group, of the same shape, already tiled. This
  // root's "tiles" loop is fused into the sibling's (compute_with; loops match by name), so
  // both read their shared input tile while it is in cache; members of this root stay at its
  // own in_tile, where Halide bounds them by its tile.
  LoopLevel schedule_root(const ops::LoweredNode& ln, const fusion::FusedGroup& g, Func root,
                          const std::optional<Func>& sibling = std::nullopt) {
    const graph::Shape& shape = tensor_of(ln.node).shape;
    std::optional<LoopLevel> row;
    LoopLevel at =
        root_schedule(root, shape, g.intent.tile_fraction, tile_rule(g, ln.node, shape), &row);
    if (sibling) {
      root.compute_with(*sibling, Var("tiles"));
      row.reset();
    }
    root_node_ = ln.node;
    // Row statistics (softmax, layer norm) of a root with several outer dims: computed per
    // row, which is what fits in L1. Not with a register-blocked anchor, whose blocks span
    // several rows.
    if (row && has_row_statistics(g) && !has_blocked_anchor(g)) at = *row;
    if (is_blocked_anchor(ln.node)) ln.output().compute_at(at);
    schedule_helpers(ln, at);
    return at;
  }

  void schedule_group(const fusion::FusedGroup& g) {
    vec_ = g.intent.vector_lanes > 0 ? g.intent.vector_lanes : default_lanes(g);
    group_members_ = std::set<std::string>(g.nodes.begin(), g.nodes.end());
    const std::set<std::string>& members = group_members_;
    const std::set<std::string> stored(g.intent.stored.begin(), g.intent.stored.end());
    std::map<std::string, LoopLevel> level;  // root node -> its tile level
    std::vector<std::pair<std::string, Func>> horizontal_roots;  // roots owning a tile loop

    // Step 1: roots, one per stored node.
    for (const auto& name : g.nodes) {
      if (!stored.count(name)) continue;
      const ops::LoweredNode& ln = *lowered_.at(name);
      const graph::Tensor& t = tensor_of(name);
      Func root;
      auto out = output_of_.find(t.name);
      bool outside_consumers = false;
      for (size_t c : ig_.consumers(t.name))
        outside_consumers = outside_consumers || !members.count(ig_.node(c).name);
      if (out != output_of_.end() && !outside_consumers) {
        root = p_.outputs[out->second];  // the Output computes it directly
        rooted_outputs_.insert(out->second);
        if (!is_blocked_anchor(name)) ln.output().compute_inline();
      } else {
        root = own_root(ln);
      }
      // Siblings of a horizontal group share one loop nest where their shapes (and so their
      // tiles) agree and neither reads the other. CPU only: on a GPU each root is a kernel.
      // Not a diamond (relu -> max_pool and avg_pool in one group, relu computed once per
      // tile of the pools' fused loop): with compute_with at in_tile and the shared member
      // computed there, Halide 21 bounds what the second root reads by its whole extent once
      // the outputs have constant bounds (mixed: the conv computed 56 x 56 in each of 4
      // tiles), and without constant bounds the blocked conv ran 4x slower. Legality keeps
      // such a producer out of its window consumers' group; it is stored once instead.
      std::optional<Func> sibling;
      if (g.kind == fusion::GroupKind::horizontal && !gpu_) {
        for (const auto& [other, other_root] : horizontal_roots) {
          // compute_with needs the same loop nest: the same shape and the same tile rule.
          if (tensor_of(other).shape == t.shape &&
              tile_rule(g, other, t.shape) == tile_rule(g, name, t.shape) &&
              !reaches_any(other, members, {name}) && !reaches_any(name, members, {other})) {
            sibling = other_root;
            break;
          }
        }
      }
      level.emplace(name, schedule_root(ln, g, root, sibling));
      if (!sibling) horizontal_roots.emplace_back(name, root);
    }

    // Step 2: members, at the tile of the one root that reads them (or materialised when
    // several roots do).
    for (const auto& name : g.nodes) {
      if (stored.count(name)) continue;
      const ops::LoweredNode& ln = *lowered_.at(name);
      const bool inlined = std::find(g.intent.inlined.begin(), g.intent.inlined.end(), name) !=
                           g.intent.inlined.end();
      const std::vector<std::string> roots = roots_reading(name, members, stored);
      // On a GPU a member computed per thread of the root cannot feed the row-statistics
      // kernels (softmax, layer norm) that run before the root; in such groups those
      // members get their own kernel. Elementwise members still inline.
      const bool materialized =
          std::find(g.intent.materialized.begin(), g.intent.materialized.end(), name) !=
          g.intent.materialized.end();
      // A member computed per tile cannot feed a materialized member (computed once, before
      // the tiles): it is materialized too unless it inlines into it.
      const bool feeds_materialized = !inlined && reaches_any(name, members, g.intent.materialized);
      if (roots.size() != 1 || materialized || feeds_materialized ||
          (gpu_ && !inlined && has_row_statistics(g))) {
        schedule_root(ln, g, own_root(ln));
        continue;
      }
      const LoopLevel& at = level.at(roots[0]);
      root_node_ = roots[0];
      if (inlined) {
        ln.output().compute_inline();
      } else {
        ln.output().compute_at(at);
        if (!is_blocked_anchor(name)) vectorize_inner(ln.output());
      }
      schedule_helpers(ln, at);
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
  int default_lanes(const fusion::FusedGroup& g) const {
    if (gpu_) return natural_vec_;
    int vectors = 4;
    for (const auto& name : g.nodes) {
      const std::string& op = ig_.node(index_.at(name)).op;
      if (op == "conv2d") return natural_vec_;
      if (op == "matmul" || op == "linear") {
        vectors = accumulator_registers() >= 2 * kBlockVectors * kMinBlockRows ? 2 : 1;
      }
    }
    return vectors * natural_vec_;
  }

  // Vector registers an anchor's accumulators may take: half the target's register file.
  int accumulator_registers() const {
    return fusion::anchor_accumulator_registers(isa_.vector_registers);
  }

  bool is_nchw_conv(const graph::Node& n) const {
    return n.op == "conv2d" &&
           graph::conv2d_window(n, ig_.graph().tensor(n.inputs[0]), ig_.graph().tensor(n.inputs[1]))
                   .layout == graph::Layout::NCHW;
  }

  // Anchors whose accumulators are register-blocked (CPU targets).
  bool is_blocked_anchor(const std::string& name) const {
    const std::string& op = ig_.node(index_.at(name)).op;
    return !gpu_ && graph::has_trait(op, graph::OpTrait::anchor);
  }

  bool has_blocked_anchor(const fusion::FusedGroup& g) const {
    for (const auto& name : g.nodes) {
      if (is_blocked_anchor(name)) return true;
    }
    return false;
  }

  bool has_row_statistics(const fusion::FusedGroup& g) const {
    for (const auto& name : g.nodes) {
      const std::string& op = ig_.node(index_.at(name)).op;
      if (graph::has_trait(op, graph::OpTrait::row_statistic)) return true;
    }
    return false;
  }

  // Walks the group members downstream of `name`, each once; `visit(member)` says whether
  // to go on past it.
  template <typename Visit>
  void walk_downstream(const std::string& name, const std::set<std::string>& members,
                       Visit visit) const {
    std::vector<size_t> stack{index_.at(name)};
    std::set<size_t> seen;
    while (!stack.empty()) {
      const size_t u = stack.back();
      stack.pop_back();
      for (size_t s : ig_.succs(u)) {
        const std::string& sn = ig_.node(s).name;
        if (!members.count(sn) || !seen.insert(s).second) continue;
        if (visit(sn)) stack.push_back(s);
      }
    }
  }

  // Is an anchor's index space the root's: the root itself, or of the same rank with no
  // layout change (transpose, reshape ...) after the anchor inside the group? Elementwise
  // ops, windows and pools keep the dims' meaning.
  bool aligned(const std::string& anchor, const std::string& root) const {
    if (anchor == root) return true;
    if (tensor_of(anchor).shape.size() != tensor_of(root).shape.size()) return false;
    bool moved = false;
    walk_downstream(anchor, group_members_, [&](const std::string& m) {
      moved = moved || graph::has_trait(ig_.node(index_.at(m)).op, graph::OpTrait::moves_layout);
      return m != root;
    });
    return !moved;
  }
  bool aligned_with_root(const std::string& anchor) const {
    return aligned(anchor, root_node_);
  }

  // Does `name` (transitively, inside the group) feed one of `targets`?
  bool reaches_any(const std::string& name, const std::set<std::string>& members,
                   const std::vector<std::string>& targets) const {
    const std::set<std::string> want(targets.begin(), targets.end());
    bool found = false;
    walk_downstream(name, members, [&](const std::string& m) {
      found = found || want.count(m) != 0;
      return !found;
    });
    return found;
  }

  // Stored nodes of the group that (transitively, inside the group) read `name`.
  std::vector<std::string> roots_reading(const std::string& name,
                                         const std::set<std::string>& members,
                                         const std::set<std::string>& stored) const {
    std::vector<std::string> roots;
    walk_downstream(name, members, [&](const std::string& m) {
      if (!stored.count(m)) return true;
      if (std::find(roots.begin(), roots.end(), m) == roots.end()) roots.push_back(m);
      return false;  // a root's own readers are its business
    });
    return roots;
  }

  const Pipeline& p_;
  const fusion::FusionPlan& plan_;
  const Target& t_;
  const fusion::Isa isa_;
  graph::IndexedGraph ig_;
  bool gpu_;
  int vec_ = 8, natural_vec_ = 8, cores_ = 2;  // vec_: the group being scheduled's width
  std::string root_node_;  // the root whose tile the member being scheduled is in
  std::set<std::string> group_members_;  // the nodes of the group being scheduled
  std::map<std::string, const ops::LoweredNode*> lowered_;
  std::map<std::string, int> output_of_;
  std::map<std::string, size_t> index_;
  std::set<int> rooted_outputs_;
};

}  // namespace

void apply_plan(const Pipeline& p, const fusion::FusionPlan& plan, const Target& target,
                int cores) {
  Emitter(p, plan, target, cores).run();
}

fusion::Isa isa_of(const Target& t) {
  if (t.arch == Target::X86) {
    if (t.has_feature(Target::AVX512)) return fusion::isa_named("avx512");
    if (t.has_feature(Target::AVX2) && t.has_feature(Target::FMA)) return fusion::isa_named("avx2");
    return fusion::isa_named("sse4");
  }
  // Arm's NEON and SVE have 32 vector registers; other architectures are assumed to have 16.
  const int regs = t.arch == Target::ARM ? 32 : 16;
  return {t.arch == Target::ARM ? "neon" : "other",
          4 * std::max(1, t.natural_vector_size(Float(32))), regs};
}

fusion::HardwareProfile profile_for(const std::string& name, const Target& target) {
  if (name == "host" && !target.has_gpu_feature()) return fusion::host_profile(isa_of(target));
  return fusion::load_profile(name);
}

void bound_outputs(const Pipeline& p) {
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const graph::Shape& s = p.graph->tensor(p.graph->outputs()[i]).shape;
    Func f = p.outputs[i];
    std::vector<Var> args = f.args();
    for (size_t d = 0; d < args.size(); ++d) f.bound(args[d], 0, int(s[s.size() - 1 - d]));
  }
}

void set_output_estimates(const Pipeline& p) {
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const graph::Shape& s = p.graph->tensor(p.graph->outputs()[i]).shape;
    Func f = p.outputs[i];
    std::vector<Var> args = f.args();
    for (size_t d = 0; d < args.size(); ++d) f.set_estimate(args[d], 0, int(s[s.size() - 1 - d]));
  }
}

}  // namespace opfuse::schedules
