// The schedule stage: FusionPlan x target facts -> one GroupSchedule record per group.
//
// A record says everything the emitter (schedules/emitter.h) does to a group, so that what
// `opfuse plan --json` shows is what is emitted, and exploration can vary any of it:
//
//   roots      each stored node (and each member that needs its own loop nest), with its
//              tiling: the dim split into parallel tiles and by how much, the dims a tile
//              holds whole, the vector width, the tile count (GPU: blocks and threads)
//   members    each node's placement (inline, at a root's tile, per row of it, its own
//              root) with the reason, and an anchor's register block (lanes x vectors x rows)
//   prefetch   the 7.3.4 distance and whether it is emitted
//
// One pure function of the group, the graph's shapes and the target's facts; no Halide.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusion/graph/graph.h"
#include "fusion/hardware/profile.h"
#include "fusion/planner/plan.h"

namespace opfuse::schedules {

using fusion::FusedGroup;
using fusion::FusionPlan;
using fusion::HardwareProfile;

// What the record stage knows of the target: read from the Halide target by the emitter's
// caller (schedules::target_facts), or stated by a test.
struct TargetFacts {
  bool gpu = false;
  int lanes = 8;              // natural f32 vector width (CPU)
  int vector_registers = 16;  // architectural vector registers (CPU)
  int cores = 2;              // CPU threads the parallel tiles are sized for
  // One core's L1 data cache (CPU): from the profile, or the host's for the JIT; unknown, the
  // smallest of x86 CPUs in use.
  int l1_bytes = 32 * 1024;
  int gpu_max_threads = 0;    // threads per block the GPU allows (0: unknown)
};

// The facts of the target a hardware profile describes (its vector width, registers, cores;
// a GPU's threads per block). The generator reads them from the Halide target instead
// (schedules::target_facts), which agree for the profile it plans with.
TargetFacts facts_of(const HardwareProfile& hw);

// The split factor at most `factor` (in multiples of `multiple`) whose tiles end soonest on
// `cores` threads: with `other_tiles` tiles per piece of the split dim, the slowest core runs
// ceil(tiles / cores) tiles of F, plus `per_tile` for each (a tile of rows reads, or
// computes, a halo row or more). Of equals, the largest (fewest tiles). MobileNetV2's 56 rows
// in tiles of 8 made 7 tiles, 4 on one core and 3 on the other (32 rows' time for 28); 192
// channels in chunks of 64 made 3 (128 channels' time for 96).
int64_t balanced_tile_factor(int64_t extent, int64_t factor, int64_t multiple,
                             int64_t other_tiles, int64_t per_tile, int cores);

// Where a member's values live in its group's loop nest.
enum class Placement {
  inlined,       // compute_inline: recomputed where it is read, never stored
  at_tile,       // computed per tile of `root`, into a tile-sized buffer
  per_row,       // computed per row of `root`'s tile (row statistics: what fits in L1)
  root,          // a stored node: its own tiled loop nest, written to memory
  materialized,  // its own tiled loop nest inside the group (read by several roots, or whole)
};
const char* to_string(Placement p);
std::optional<Placement> placement_named(const std::string& s);

// Halide dims are innermost first: dim 0 is the tensor's last axis, the vectorised one.
struct Tiling {
  enum class Kind {
    chunks,         // a 1-D root: chunks of dim 0
    column_chunks,  // too few rows for the cores: chunks of dim 0, each holding all rows
    rows,           // boxes: dims below split_dim whole, split_dim in pieces, dims above
                    // one point per tile (or whole, see whole_dims)
    gpu,            // one kernel: all dims fused, blocks of gpu_threads threads
  };
  Kind kind = Kind::rows;
  int split_dim = 0;
  int64_t factor = 1;           // points of split_dim per tile (rows: the last tile shifts in)
  std::vector<int> whole_dims;  // dims above split_dim that every tile holds whole
  int vector_lanes = 1;         // dim 0's vector width, at most its extent
  int64_t tiles = 1;            // parallel tiles (GPU: blocks)
  int gpu_threads = 0;
};
const char* to_string(Tiling::Kind k);

// What the tiles of a root must respect (Halide dims).
struct TileRule {
  int min_dim = 1;            // tiles split this dim or an outer one: the dims inside it are whole
  int64_t multiple = 1;       // a split of min_dim itself takes a multiple of this many
  int64_t row_multiple = 1;   // points of the dims above 0 a tile holds: a multiple of this
  std::set<int> whole;        // dims outside the split one that tiles still hold whole
  bool chunk_columns = true;  // with too few rows for the cores, tiles may split dim 0
  // Tiles are chunks of dim 0 (output channels) in multiples of this, each holding all rows:
  // the group's convs read more weights than input (see tile_rule). 0: not so.
  int64_t channel_chunks = 0;
  // The same for an anchor whose columns the root splits into heads above its rows ([H, S, D]
  // of [S, H * D]): each tile one point of every dim above the rows, all the rows, where that
  // makes 2 tiles a core (tile()).
  bool head_chunks = false;
  bool operator==(const TileRule& o) const {
    return min_dim == o.min_dim && multiple == o.multiple && row_multiple == o.row_multiple &&
           whole == o.whole && chunk_columns == o.chunk_columns &&
           channel_chunks == o.channel_chunks && head_chunks == o.head_chunks;
  }
};

// The register block of a CPU anchor: `vectors` vectors of `lanes` along dim 0 (output
// channels, columns; W for an NCHW conv) x `rows` along dim `row_dim` (pixels, rows; C for
// an NCHW conv). `whole_dims`: the anchor is computed under a root of another index space
// (a flatten, a transpose), so its block dims are computed whole.
struct RegisterBlock {
  int row_dim = 1;
  int lanes = 1, vectors = 1, rows = 1;
  bool whole_dims = false;
  // The reduction loops, innermost first, as indices of the anchor's reduction variables
  // (conv: ci, kh, kw; matmul, linear: k).
  std::vector<int> reduction_order;
  bool unroll_kernel_width = false;  // an NCHW conv's 1-7 long kw loop, innermost: unrolled
  bool pack_weights = false;         // an NHWC conv's weights Cout innermost, a linear's in panels
  // The channel-block loop outside the pixel-block loops (an NHWC conv): each block's slice of
  // the weights is read for every pixel of the tile while it is in cache, not once per pixel
  // block (see RegisterBlock's choice in group_schedule.cpp).
  bool channel_blocks_outside = false;
  // Input channels (a linear layer's K) per pass over the tile's pixel (row) blocks, where a
  // block's input passes half of L1; 0: all in one pass. Only with channel_blocks_outside and
  // blocks aligned with their root (not whole_dims). The accumulators of a channel block then
  // live in a tile-sized buffer, loaded and stored once per chunk, and each pass reads a
  // weight slice and an input slice that stay in L1 (see reduction_chunk() in
  // group_schedule.cpp).
  int reduction_chunk = 0;
  // The anchor has no loops of its own: its root's loops inside a tile are the blocks (the
  // root is the anchor, or an elementwise epilogue of the anchor's shape), the accumulators
  // live per block and the root stores its values straight from them. Otherwise the anchor
  // is computed over the tile into a tile-sized buffer that the root then reads: a store and
  // a load per output, which a depthwise or narrow 1x1 conv (9-16 FMAs per output) feels.
  bool in_root_loops = false;
  // A conv2d_winograd: its block is one of the 16 GEMMs' (`rows` 2x2 output tiles along W x
  // `vectors` of output channels, over the input channels), and the tiles of its root hold
  // whole rows of W and split H in pairs (whole 2x2 tiles).
  bool winograd = false;
  // Its input transform computed once, before the tiles (in parallel rows of 2x2 tiles), where
  // the tiles are chunks of output channels (a weight-bound conv, see weight_bound_anchor):
  // computed in each such tile, it would be computed once per chunk.
  bool winograd_input_whole = false;
  int accumulators(int natural_lanes) const {
    return vectors * rows * std::max(1, lanes / std::max(1, natural_lanes));
  }
};

struct NodeSchedule {
  std::string node;
  Placement placement = Placement::inlined;
  std::string root;  // at_tile / per_row: the root whose tile holds it; root kinds: itself
  std::string reason;
  // A CPU anchor: its loops are register blocks (`block`, where its rank has the block's
  // dims), and as a root it is computed in the tiles of a wrapper.
  bool register_blocked = false;
  std::optional<RegisterBlock> block;
  // A row statistic over the contiguous last axis: its reduction is vectorised along the row
  // (partial sums per lane) rather than across rows.
  bool vectorize_row_reduction = false;
  // On a GPU, a row statistic's reductions are their own kernels (gpu_row_threads each).
  bool row_kernels = false;
  // Root kinds only.
  int output = -1;                // the pipeline output that computes it directly, or -1
  std::vector<int64_t> extents;   // Halide order
  TileRule rule;
  Tiling tiling;
  std::string compute_with;       // a horizontal sibling root whose tile loop it shares
  bool members_per_row = false;   // its row statistics are computed per row of its tiles
  // A pool over H and W with fewer tiles than cores (its output one point per channel): its
  // sum is split along the outermost reduced axis in slices of `reduction_slice_rows` points,
  // summed in parallel (Halide's rfactor), then added; 0: one reduction in each tile.
  int reduction_slices = 0;
  int64_t reduction_slice_rows = 0;
};

struct PrefetchRecord {
  int distance = 1;  // 7.3.4: d = ceil(L_mem / t_iter), vector-loop iterations ahead
  bool emitted = false;
  std::string why;
};

struct GroupSchedule {
  int group = 0;
  std::string anchor;            // the node whose loop nest the group shares
  int vector_lanes = 8;          // the group's CPU f32 width (inner loops of its members)
  std::vector<NodeSchedule> nodes;  // roots in the order they are tiled, then the others
  int gpu_row_threads = 64;      // GPU: threads of a row-statistics kernel
  PrefetchRecord prefetch;

  const NodeSchedule* find(const std::string& node) const;
};

// The outputs that no group's root computes (a stored node other groups also read): each is
// a copy of the stored node, tiled on its own.
struct OutputCopy {
  int output = 0;
  std::vector<int64_t> extents;
  Tiling tiling;
};

struct PipelineSchedule {
  TargetFacts target;
  std::vector<GroupSchedule> groups;  // the plan's order
  std::vector<OutputCopy> output_copies;
};

// The record of every group. Requests in a group's ScheduleRequest (a user's plan, explore)
// override the stage's choices; an illegal one throws std::invalid_argument naming the group,
// the node and why.
PipelineSchedule schedule_plan(const graph::Graph& g, const FusionPlan& plan,
                               const TargetFacts& target);

// The plan JSON with each group's record under "record", and the requests that reproduce it
// under "schedule" (read back by user_groups_from_plan_json, it gives the same records).
std::string plan_to_json(const FusionPlan& p, const PipelineSchedule& s);
// One line per record for the explained table.
std::string schedule_to_table(const PipelineSchedule& s);
// The params whose values a build knows (weights inside the library, or the JIT's buffers)
// and that an anchor's block reads Cout-innermost (RegisterBlock::pack_weights): stored so
// once, when the build makes their buffers, they need no repack on every call.
std::set<std::string> weights_to_pack(const graph::Graph& g, const PipelineSchedule& s);
// What a weights file stores packed: every NHWC convolution's weights (Cout innermost) and
// every linear layer's whose columns come in panels (graph::linear_weight_panel). Decided
// from the graph alone, not the records, so that every function reading one file (a dynamic
// batch's sizes) expects the same layout; a block that does not pack reads them strided.
std::set<std::string> file_packed_weights(const graph::Graph& g);
// Node -> its placement in a few words ("at_tile of relu_3", "root: 8 tiles"), for the DOT.
std::map<std::string, std::string> schedule_notes(const PipelineSchedule& s);

}  // namespace opfuse::schedules
