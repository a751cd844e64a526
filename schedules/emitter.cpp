#include "schedules/emitter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "fusion/graph/op_schema.h"
#include "fusion/hardware/host.h"

namespace opfuse::schedules {

using namespace Halide;

namespace {

using schedules::NodeSchedule;
using schedules::Placement;
using schedules::Tiling;

// Applies the records of schedules::schedule_plan to the lowered Funcs, group by group, with no
// state between groups and no choice of its own: every split, placement, block and width
// comes from a record.
class Applier {
 public:
  Applier(const Pipeline& p, const schedules::PipelineSchedule& s)
      : p_(p), s_(s), gpu_(s.target.gpu) {
    for (const auto& ln : p.lowered->nodes) lowered_[ln.node] = &ln;
    for (const auto& n : p.graph->nodes()) node_[n.name] = &n;
  }

  void run() {
    for (const schedules::GroupSchedule& g : s_.groups) apply_group(g);
    for (const schedules::OutputCopy& c : s_.output_copies) {
      apply_tiling(p_.outputs[size_t(c.output)], c.tiling, false);
    }
  }

 private:
  static bool in_root_loops(const NodeSchedule& n) { return n.block && n.block->in_root_loops; }

  void apply_group(const schedules::GroupSchedule& g) {
    std::map<std::string, LoopLevel> level;  // root node -> where its tile's members go
    std::set<std::string> block_roots;  // roots whose loops are an anchor's register blocks
    for (const NodeSchedule& n : g.nodes) {
      if (in_root_loops(n)) block_roots.insert(n.root);
    }
    for (const NodeSchedule& n : g.nodes) {
      if (n.placement != Placement::root && n.placement != Placement::materialized) continue;
      const ops::LoweredNode& ln = *lowered_.at(n.node);
      Func root;
      if (n.output >= 0) {
        root = p_.outputs[size_t(n.output)];  // the Output computes it directly
        if (!n.register_blocked || in_root_loops(n)) ln.output().compute_inline();
      } else if (in_root_loops(n)) {
        root = ln.output();  // its own loops are the blocks
        root.compute_root();
      } else {
        // An anchor through a wrapper, so that its register blocks run in the wrapper's tiles.
        root = n.register_blocked ? ln.output().in() : ln.output();
        root.compute_root();
      }
      // Blocks vectorise the root's dim 0 themselves (block_anchor).
      LoopLevel at = apply_tiling(root, n.tiling, n.members_per_row, !block_roots.count(n.node));
      if (!n.compute_with.empty()) {
        root.compute_with(root_loops_.at(n.compute_with).func, Var("tiles"));
      }
      if (n.register_blocked && !in_root_loops(n)) ln.output().compute_at(at);
      level.emplace(n.node, at);
      root_loops_.insert_or_assign(n.node, RootLoops{root, n.tiling});
      apply_helpers(ln, n, at, g);
    }
    for (const NodeSchedule& n : g.nodes) {
      if (n.placement == Placement::root || n.placement == Placement::materialized) continue;
      const ops::LoweredNode& ln = *lowered_.at(n.node);
      const LoopLevel& at = level.at(n.root);
      if (n.placement == Placement::inlined || in_root_loops(n)) {
        ln.output().compute_inline();
      } else {
        ln.output().compute_at(at);
        if (!n.register_blocked) vectorize_inner(ln.output(), g.vector_lanes);
      }
      apply_helpers(ln, n, at, g);
    }
  }

  // Tiles root `r` as its record says; returns the loop level of its members: "in_tile"
  // (CPU), a row of the tile (`per_row`), or a GPU thread.
  //
  //   rows:  for tiles (parallel): for in_tile (1 trip): [members] for ... split_dim's
  //          inner part, dims below, dim 0 vectorised
  LoopLevel apply_tiling(Func r, const Tiling& t, bool per_row, bool vectorize = true) {
    std::vector<Var> args = r.args();
    const int k = int(args.size());
    if (t.kind == Tiling::Kind::gpu) {
      Var fused = args[0];
      for (int i = 1; i < k; ++i) {
        Var f(r.name() + "_f" + std::to_string(i));
        r.fuse(fused, args[i], f);
        fused = f;
      }
      Var bx(r.name() + "_bx"), tx(r.name() + "_tx");
      r.gpu_tile(fused, bx, tx, t.gpu_threads, TailStrategy::GuardWithIf);
      return LoopLevel(r, tx);
    }
    const int v = t.vector_lanes;
    // Loop names are the same in every root: compute_with matches a sibling's loops by name.
    Var to("tile"), ti("ti");
    if (t.kind == Tiling::Kind::chunks) {
      r.split(args[0], to, ti, int(t.factor), TailStrategy::GuardWithIf);
      if (v > 1) r.vectorize(ti, v, TailStrategy::GuardWithIf);
      return tile_level(r, to);
    }
    if (t.kind == Tiling::Kind::column_chunks) {
      r.split(args[0], to, ti, int(t.factor), TailStrategy::GuardWithIf);
      std::vector<VarOrRVar> order{ti};
      order.insert(order.end(), args.begin() + 1, args.end());
      order.push_back(to);
      r.reorder(order);
      if (v > 1 && vectorize) r.vectorize(ti, v, TailStrategy::GuardWithIf);
      return tile_level(r, to);
    }
    const int j = t.split_dim;
    auto whole = [&](int d) {
      return std::find(t.whole_dims.begin(), t.whole_dims.end(), d) != t.whole_dims.end();
    };
    // ShiftInwards: every tile has F rows (the last one overlaps its neighbour), so a
    // register-blocked anchor inside never sees fewer rows than its block.
    r.split(args[j], to, ti, int(t.factor), TailStrategy::ShiftInwards);
    std::vector<VarOrRVar> order(args.begin(), args.begin() + j);
    order.push_back(ti);
    for (int d = j + 1; d < k; ++d) {
      if (whole(d)) order.push_back(args[d]);
    }
    order.push_back(to);
    Var par = to;
    for (int d = j + 1; d < k; ++d) {
      if (!whole(d)) order.push_back(args[d]);
    }
    r.reorder(order);
    for (int d = j + 1; d < k; ++d) {
      if (whole(d)) continue;
      Var f("tile_p" + std::to_string(d));
      r.fuse(par, args[d], f);
      par = f;
    }
    if (v > 1 && vectorize) r.vectorize(args[0], v, TailStrategy::GuardWithIf);
    LoopLevel tiles = tile_level(r, par);
    if (per_row) return LoopLevel(r, j == 1 ? ti : args[1]);
    return tiles;
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

  void vectorize_inner(Func f, int lanes) {
    if (gpu_ || f.args().empty()) return;
    f.vectorize(f.args()[0], lanes, TailStrategy::GuardWithIf);
    for (int u = 0; u < f.num_update_definitions(); ++u) {
      f.update(u).vectorize(f.args()[0], lanes, TailStrategy::GuardWithIf);
    }
  }

  // Register blocking of an anchor (conv, matmul, linear). The node's Func N is computed in
  // blocks of vectors x rows, and its accumulator is computed per block, so the accumulator
  // is a small stack array that LLVM keeps in registers while the reduction loops run inside:
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
  // With RegisterBlock::in_root_loops the blocks are the root's loops inside its tile, and
  // the root (the anchor, or its inlined epilogue) stores each block from its accumulators.
  void block_anchor(const graph::Node& n, const NodeSchedule& ns, Func node_func, Func acc,
                    const schedules::RegisterBlock& b) {
    std::vector<Var> a = node_func.args();  // the anchor's and its accumulator's
    std::vector<RVar> r = acc.rvars(0);
    const size_t vd = 0, ud = size_t(b.row_dim);
    Func loops = node_func;  // whose loops are the blocks
    std::vector<Var> la = a;
    Var channels = a[vd], pixels = a[ud];
    // Its dims above the pixel blocks that a tile holds (the channel-block loop goes outside
    // them).
    std::vector<VarOrRVar> above;
    if (b.in_root_loops) {
      const RootLoops& root = root_loops_.at(ns.root);
      const Tiling& t = root.tiling;
      loops = root.func;
      la = loops.args();
      // apply_tiling's names: "ti" is the part of the split dim inside a tile.
      const bool rows_split = t.kind == Tiling::Kind::rows && t.split_dim == int(ud);
      channels = t.kind == Tiling::Kind::column_chunks ? Var("ti") : la[vd];
      pixels = rows_split ? Var("ti") : la[ud];
      for (size_t d = ud + 1; d < la.size(); ++d) {
        if (t.kind == Tiling::Kind::column_chunks || int(d) < t.split_dim) {
          above.push_back(la[d]);
        } else if (int(d) == t.split_dim) {
          above.push_back(Var("ti"));
        } else if (std::count(t.whole_dims.begin(), t.whole_dims.end(), int(d))) {
          above.push_back(la[d]);
        }
      }
    } else {
      // The anchor's own loops over the tile: all but the outermost.
      for (size_t d = ud + 1; d + 1 < a.size(); ++d) above.push_back(a[d]);
      if (b.whole_dims) {
        const graph::Shape& shape = p_.graph->tensor(n.outputs[0]).shape;
        node_func.bound(a[vd], 0, int(shape[shape.size() - 1 - vd]))
            .bound(a[ud], 0, int(shape[shape.size() - 1 - ud]));
      }
    }
    const int vw = b.lanes, width = b.lanes * b.vectors, rows = b.rows;
    Var o1("bo1"), i1("bi1"), v1("bv1"), i2("bi2"), o2("bo2"), q1("bq1");
    // Blocks over a linear's padded panels (graph::padded_weight_panel), where the build
    // stores them so, start at multiples of their width, so each vector lies within a panel;
    // the last one computes into the padding and stores only its columns. Moved back onto the
    // columns before (ShiftInwards), its vectors would straddle two panels and gather:
    // MobileNetV2's classifier alone (1000 columns, JIT) ran 116 us so, 30-33 us guarded,
    // 36 us reading row-major. Weights passed as arguments (row-major, N columns) have no
    // padding to compute into: their last block moves back.
    const bool guard_columns = n.op == "linear" && p_.packed_weights.count(n.inputs[1]) &&
                               graph::padded_weight_panel(p_.graph->tensor(n.inputs[1]).shape);
    loops
        .split(channels, o1, i1, width,
               guard_columns ? TailStrategy::GuardWithIf : TailStrategy::Auto)
        .split(i1, v1, i2, vw)
        .split(pixels, o2, q1, rows);
    // The block (i2, v1, q1) innermost, then the block loops; NCHW's H lies between W and C.
    // With the channel blocks outside (NHWC), the pixel blocks of the whole tile (W blocks,
    // then H) run inside each channel block; the accumulator lives in the innermost.
    std::vector<VarOrRVar> block_order{i2, v1, q1};
    if (b.channel_blocks_outside) {
      block_order.push_back(o2);
      block_order.insert(block_order.end(), above.begin(), above.end());
      block_order.push_back(o1);
    } else {
      block_order.push_back(o1);
      for (size_t d = vd + 1; d < ud; ++d) block_order.push_back(la[d]);
      block_order.push_back(o2);
    }
    loops.reorder(block_order).vectorize(i2).unroll(v1).unroll(q1);
    if (b.in_root_loops) {
      // Halide partitions the outermost loop whose values reach the padding; through the
      // shifted-inwards tile start that is the parallel tile loop, and the first and last
      // tiles then ran whole with a bounds check on every load (ResNet-18's 56x56 3x3 convs
      // 7% slower, its strided conv 18%). Partitioned inside the tile, as in the anchor's own
      // loops, only the tile's border rows and blocks are checked.
      loops.partition(Var("tiles"), Partition::Never).partition(Var("in_tile"), Partition::Never);
    }
    Var p1("pa1"), q2("pq2"), p3("pa3"), q3("pq3");
    if (b.reduction_chunk > 0) {  // only with channel blocks outside and aligned blocks
      // A channel block's accumulators over the whole tile, its pixel blocks inside each
      // chunk of input channels (RegisterBlock::reduction_chunk). Within a pixel block the
      // addresses are loop invariant and LLVM keeps the block in registers, as below.
      acc.compute_at(node_func, o1).bound_extent(a[vd], width);
      acc.split(a[vd], p1, q2, vw).vectorize(q2).unroll(p1);
      Var po("bpo"), pi("bpi");
      RVar co("rco"), ci("rci");
      std::vector<VarOrRVar> order{q3, p3, pi};
      for (int i : b.reduction_order) order.push_back(i == 0 ? ci : r[size_t(i)]);
      order.push_back(po);
      for (size_t d = ud + 1; d < a.size(); ++d) order.push_back(a[d]);
      order.push_back(co);
      // RoundUp: the last pixel block may run past the tile into the accumulator's rounded-up
      // allocation, reading the padded input, which is defined everywhere.
      acc.update()
          .split(a[vd], p3, q3, vw)
          .split(a[ud], po, pi, rows, TailStrategy::RoundUp)
          .split(r[0], co, ci, b.reduction_chunk, TailStrategy::GuardWithIf)
          .reorder(order)
          .vectorize(q3)
          .unroll(p3)
          .unroll(pi);
    } else {
      acc.compute_at(loops, b.channel_blocks_outside ? o2 : o1)
          .bound_extent(a[vd], width)
          .bound_extent(a[ud], rows);
      acc.split(a[vd], p1, q2, vw).vectorize(q2).unroll(p1).unroll(a[ud]);
      std::vector<VarOrRVar> order{q3, p3, a[ud]};
      for (int i : b.reduction_order) order.push_back(r[size_t(i)]);
      acc.update().split(a[vd], p3, q3, vw).reorder(order).vectorize(q3).unroll(p3).unroll(a[ud]);
    }
    if (b.unroll_kernel_width) acc.update().unroll(r[2]);
    if (b.pack_weights && n.op == "conv2d" && !p_.packed_weights.count(n.inputs[1])) {
      // (A linear's weights unknown to the build stay row-major: their rows are already
      // contiguous, and a repack on every call costs a pass over all of them.)
      Func weights = p_.lowered->tensors.at(n.inputs[1]);
      Func packed = weights.in(acc);
      std::vector<Var> wa = packed.args();  // kw, kh, ci, co
      // Once per call, over all cores, writing in storage order: single-threaded in its
      // loops' order it took 6.7 ms of a 512-channel 3x3 convolution's 10.7 (2 Zen 4 cores).
      packed.compute_root()
          .reorder_storage(wa[3], wa[0], wa[1], wa[2])
          .reorder(wa[3], wa[0], wa[1], wa[2])
          .parallel(wa[2]);
    }
  }

  // A pool's sum over H and W (NodeSchedule::reduction_slices): its RDom runs over the reduced
  // axes outermost first (h, w). The outermost in parallel slices of `rows`, each summed with
  // the inner reduced axes inside (NHWC: contiguous reads), then the slices added; the
  // partial sums are computed at the same tile as the sum.
  void slice_reduction(Func sum, int rows, const LoopLevel& at, int lanes) {
    const std::vector<RVar> r = sum.rvars(0);
    RVar ho("rho"), hi("rhi");
    Var slice("slice");
    Func part = sum.update().split(r[0], ho, hi, rows).rfactor(ho, slice);
    const Var c = part.args()[0];
    std::vector<VarOrRVar> order{c};
    for (size_t i = r.size() - 1; i >= 1; --i) order.push_back(r[i]);
    order.push_back(hi);
    order.push_back(slice);
    part.compute_at(at).vectorize(c, lanes, TailStrategy::GuardWithIf);
    part.update().reorder(order).parallel(slice).vectorize(c, lanes, TailStrategy::GuardWithIf);
    vectorize_inner(sum, lanes);
  }

  // A conv2d_winograd (ops' lowering names its Funcs) computed at tile `at`, which holds whole
  // rows of W and H in pairs (its tile rule): per tile, the input transform of the tile's 4x4
  // patches, then for each of the 16 (k, m) the GEMM over input channels in register blocks
  // of `rows` 2x2 tiles along W x `vectors` of output channels, then each output tile's
  // transform, stored as the node's 2x2 outputs:
  //
  //   for tile:                                  (parallel: the root's tiles)
  //     V[c, k, m, tx, ty] = B^T d B              (c vectorised, k and m unrolled)
  //     for m, k, co block, ty, tx block:
  //       acc[block] = 0; for ci: acc += u[co, ci, k, m] * V[ci, k, m, tx, ty]
  //       M[block] = acc
  //     for ty, tx: out[.., 2 tx + b, 2 ty + a] = A^T M A (+ bias)
  void winograd_blocks(const ops::LoweredNode& ln, const schedules::RegisterBlock& b,
                       const LoopLevel& at) {
    std::map<std::string, Func> f;
    for (size_t i = 0; i + 1 < ln.funcs.size(); ++i) f[ln.roles[i]] = ln.funcs[i];
    Func out = ln.output(), y = f.at("winograd_output"), ma = f.at("winograd_output_rows");
    Func gemm = f.at("winograd_gemm"), acc = f.at("acc"), v = f.at("winograd_input");
    Func rows = f.at("winograd_input_rows");
    const int vw = b.lanes, width = b.lanes * b.vectors;
    // Every tile's region starts at an even pixel: x / 2 and x % 2 of the output's loops are
    // then the tile loop and its unrolled 2.
    std::vector<Var> o = out.args();  // c, w, h, n
    Var xo("wxo"), xi("wxi"), yo("wyo"), yi("wyi");
    out.align_bounds(o[1], 2).align_bounds(o[2], 2);
    out.split(o[2], yo, yi, 2).split(o[1], xo, xi, 2).reorder(o[0], xi, yi, xo, yo);
    out.vectorize(o[0], vw, TailStrategy::GuardWithIf).unroll(xi).unroll(yi);
    // Vars of the transforms and GEMMs: (co, k|b, m|a, tx, ty, n).
    std::vector<Var> t = y.args();
    y.compute_at(out, xo).bound(t[1], 0, 2).bound(t[2], 0, 2).unroll(t[1]).unroll(t[2]);
    y.vectorize(t[0], vw, TailStrategy::GuardWithIf);
    t = ma.args();
    ma.compute_at(out, xo).bound(t[1], 0, 2).bound(t[2], 0, 4).unroll(t[1]).unroll(t[2]);
    ma.vectorize(t[0], vw, TailStrategy::GuardWithIf);
    // The GEMMs over the tile, a block of `rows` tiles x `width` channels at a time.
    t = gemm.args();
    Var coo("wco"), coi("wci"), cv("wcv"), txo("wtxo"), txi("wtxi");
    gemm.compute_at(at).bound(t[1], 0, 4).bound(t[2], 0, 4);
    gemm.split(t[0], coo, coi, width, TailStrategy::ShiftInwards)
        .split(coi, cv, coi, vw)
        .split(t[3], txo, txi, b.rows, TailStrategy::ShiftInwards)
        .reorder(coi, cv, txi, txo, t[4], t[5], coo, t[1], t[2])
        .vectorize(coi)
        .unroll(cv)
        .unroll(txi);
    t = acc.args();
    Var p1("wp1"), q1("wq1");
    acc.compute_at(gemm, txo).bound_extent(t[0], width).bound_extent(t[3], b.rows);
    acc.split(t[0], p1, q1, vw).vectorize(q1).unroll(p1).unroll(t[3]);
    acc.update()
        .split(t[0], p1, q1, vw)
        .reorder(q1, p1, t[3], acc.rvars(0)[0])
        .vectorize(q1)
        .unroll(p1)
        .unroll(t[3]);
    // The input transform of the tile, channels innermost: the GEMMs' broadcasts read it
    // contiguously along ci. Stored with (k, m) outermost, so that one GEMM's rows (tiles) lie
    // Cin floats apart, not 16 Cin (4-16 KB at 64-256 channels: every row of a block in the
    // same L1 sets). ResNet-18 through the JIT, 2 Intel AVX-512 cores: 14.39 -> 13.26 ms.
    t = v.args();
    v.bound(t[1], 0, 4).bound(t[2], 0, 4).unroll(t[1]).unroll(t[2]);
    v.vectorize(t[0], vw, TailStrategy::GuardWithIf);
    v.reorder_storage(t[0], t[3], t[4], t[5], t[1], t[2]);
    if (b.winograd_input_whole) {
      Var rows_of_tiles("wty");
      v.compute_root().fuse(t[4], t[5], rows_of_tiles).parallel(rows_of_tiles);
    } else {
      v.compute_at(at);
    }
    t = rows.args();
    rows.compute_at(v, t[3]).bound(t[1], 0, 4).unroll(t[1]).unroll(t[2]);
    rows.vectorize(t[0], vw, TailStrategy::GuardWithIf);
  }

  // Schedules the helpers of a node computed within `at` (the group's tile, or on a GPU the
  // thread of its root).
  void apply_helpers(const ops::LoweredNode& ln, const NodeSchedule& ns, const LoopLevel& at,
                     const schedules::GroupSchedule& g) {
    const graph::Node& n = *node_.at(ln.node);
    if (ns.block && ns.block->winograd) {
      winograd_blocks(ln, *ns.block, at);
      return;
    }
    for (size_t i = 0; i + 1 < ln.funcs.size(); ++i) {
      Func f = ln.funcs[i];
      const std::string& role = ln.roles[i];
      if (role == "padded") continue;  // inline: a select on the input's bounds
      if (role == "factor") {          // per channel: once on the CPU; inline in each GPU thread
        if (!gpu_) f.compute_root();
        continue;
      }
      if (ns.row_kernels) {
        if (role == "exp") continue;  // inline: recomputed where the sum and output read it
        f.compute_root();
        // One thread per row, for the initial value and for the reduction over the row (its
        // update, a loop in each thread; unscheduled, it ran on the host).
        auto one_thread_per_row = [&](Stage s) {
          Var fused = f.args()[0];
          for (size_t j = 1; j < f.args().size(); ++j) {
            Var h(f.name() + "_g" + std::to_string(j));
            s.fuse(fused, f.args()[j], h);
            fused = h;
          }
          s.gpu_tile(fused, Var(f.name() + "_b"), Var(f.name() + "_t"), g.gpu_row_threads,
                     TailStrategy::GuardWithIf);
        };
        one_thread_per_row(f);
        for (int u = 0; u < f.num_update_definitions(); ++u) one_thread_per_row(f.update(u));
        continue;
      }
      if (role == "parts") {  // a concat's parts, an update each (ops' lowering)
        f.compute_at(at);
        if (gpu_) continue;
        for (int u = 0; u < f.num_update_definitions(); ++u) {
          f.update(u).vectorize(f.rvars(u)[0], g.vector_lanes, TailStrategy::GuardWithIf);
        }
        continue;
      }
      if (role == "acc" && ns.register_blocked) {
        // Computed per register block of the node.
        if (ns.block) block_anchor(n, ns, ln.output(), f, *ns.block);
        continue;
      }
      f.compute_at(at);
      if (ns.reduction_slices > 0 && role == "sum") {
        slice_reduction(f, int(ns.reduction_slice_rows), at, g.vector_lanes);
        continue;
      }
      if (ns.vectorize_row_reduction &&
          (role == "mean" || role == "var" || role == "sum" || role == "max") &&
          f.num_update_definitions() == 1) {
        // A row statistic over the contiguous last axis: vectorise the reduction itself
        // (partial sums per lane, combined at the end) rather than across rows, whose
        // elements lie a whole row apart.
        f.update().atomic().vectorize(f.rvars(0).back(), g.vector_lanes,
                                      TailStrategy::GuardWithIf);
      } else {
        vectorize_inner(f, g.vector_lanes);
      }
    }
  }

  // Each root's Func and tiling: for siblings that share its tile loop, and anchors whose
  // blocks are its loops.
  struct RootLoops {
    Func func;
    Tiling tiling;
  };
  std::map<std::string, RootLoops> root_loops_;
  const Pipeline& p_;
  const schedules::PipelineSchedule& s_;
  const bool gpu_;
  std::map<std::string, const ops::LoweredNode*> lowered_;
  std::map<std::string, const graph::Node*> node_;
};

}  // namespace

schedules::TargetFacts target_facts(const Target& t, const fusion::HardwareProfile& hw, int cores) {
  schedules::TargetFacts f;
  f.gpu = t.has_gpu_feature();
  f.lanes = std::max(1, t.natural_vector_size(Float(32)));
  f.vector_registers = isa_of(t).vector_registers;
  f.cores = std::max(1, cores);
  f.gpu_max_threads = f.gpu ? hw.max_threads_per_block : 0;
  f.l1_bytes = schedules::facts_of(hw).l1_bytes;
  return f;
}

void apply_schedule(const Pipeline& p, const schedules::PipelineSchedule& s) {
  Applier(p, s).run();
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
