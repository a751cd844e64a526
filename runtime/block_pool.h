// The caching allocator behind every Halide intermediate opfuse's kernels allocate, AOT
// (pool_allocator.h installs it into a library's Halide runtime) and JIT (schedules/jit.cpp):
// one pool, one policy.
//
// Freed blocks are kept and handed out again, as every framework's caching allocator does, so
// a kernel that stores intermediates is not charged for the page faults of fresh large
// allocations on each call (malloc unmaps a freed mapped block and trims the heap's top).
//
// Which block: the most recently freed one that holds the request and is at most kSlack times
// its size. The most recently freed memory is the likeliest still in cache; a kernel that
// writes its output into a block untouched since long ago fetches each line from DRAM before
// it overwrites it. Exact sizes alone made the fused plans pay for that: a fused plan stores
// fewer intermediates, so fewer of them share a size with the block just freed.
// EfficientNet-B0's first squeeze-excite scale (1.2 MB written) took 52 us in its fused plan
// and 16 us unfused, where the depthwise conv's freed output of the same size took it; served
// by the most recent block up to twice its size, 22 us (JIT, Zen 4, medians of 3 alternated
// breakdowns).
#pragma once

#include <cstddef>

namespace opfuse::runtime {

// A block of at least `bytes`, aligned to 128 bytes (Halide's vector loads of whole cache
// lines on x86); nullptr when the system has no memory.
void* pool_allocate(size_t bytes);
// Returns a block from pool_allocate to the pool; gives back the bytes it was asked for.
size_t pool_release(void* block);
// Frees every idle block (a JIT plan destroyed: the sizes it asked for will not come again).
void pool_trim();
// Bytes held in idle blocks (for tests and reports).
size_t pooled_bytes();

}  // namespace opfuse::runtime
