// The weights file of a compiled model too large to carry its weights inside the object
// (`opfuse compile --weights file`): written by the graph generator, read and checked by the
// library itself (this header is compiled into each such library's entry point, so it uses
// nothing but the C++ standard library).
//
// Layout, little-endian, every offset from the start of the file:
//   Header   magic "OPFUSEWT", version, tensor count, model hash, data offset and size,
//            checksum of the data
//   Entry    per tensor, in the generated function's argument order: name, dtype, rank, dims,
//            offset (64-byte aligned, so kernels read aligned rows), size in bytes
//   data     the tensors, row-major or packed as the kernels read them (NHWC convolutions'
//            weights Cout-innermost or blocked, linear layers' in panels of columns)
// The library maps the file read-only and points its weight buffers into the mapping, so the
// weights are neither copied nor held twice.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace opfuse::weights {

constexpr char kMagic[8] = {'O', 'P', 'F', 'U', 'S', 'E', 'W', 'T'};
// 2: kCoutBlocked, Entry::block; 3: Entry::chunk; 4: panels; 5: a padded last panel
constexpr uint32_t kVersion = 5;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxName = 231;  // an Entry of 320 bytes
constexpr uint64_t kAlign = 64;
// How a tensor's elements lie: row-major, or a convolution's [Cout, Cin, KH, KW] as the NHWC
// kernels read it, stored so at build time (ops::pack_weights): Cout fastest, then KW,
// KH, Cin; or in blocks of `block` output channels, each in chunks of `chunk` input channels,
// [Cout / block, Cin / chunk, KH, KW, chunk, block]; or a linear layer's [K, N] in panels of
// `block` columns, [ceil(N / block), K, block], the last panel's columns past N zero.
constexpr uint8_t kRowMajor = 0, kCoutInnermost = 1, kCoutBlocked = 2, kColumnPanels = 3;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t count;
  uint64_t model_hash;   // which compiled model the file belongs to
  uint64_t data_offset;  // the first tensor's offset
  uint64_t data_bytes;   // from data_offset to the end of the last tensor
  uint64_t checksum;     // checksum() of those bytes
};

struct Entry {
  char name[kMaxName + 1];  // NUL-terminated
  uint8_t dtype;            // halide_type_code_t
  uint8_t bits;
  uint8_t rank;
  uint8_t layout;           // kRowMajor, kCoutInnermost, kCoutBlocked or kColumnPanels
  uint8_t block;            // kCoutBlocked: output channels a block; kColumnPanels: columns
  uint8_t chunk;            // kCoutBlocked: input channels a chunk; else 0
  uint8_t reserved[2];
  int64_t dims[kMaxRank];   // row-major: the logical shape, whatever the layout
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(Header) == 48 && sizeof(Entry) == 320, "the file layout is fixed");

// A 64-bit checksum of a byte range: four independent multiply-xor lanes over 8-byte words
// (several GB/s, so checking a few hundred MB at load costs milliseconds, not seconds), then a
// final mix. Not cryptographic: it catches truncation, bit rot and a wrong file.
inline uint64_t checksum(const void* data, uint64_t n, uint64_t seed = 0) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull,
                   seed ^ 0xA4093822299F31D0ull, seed ^ 0x082EFA98EC4E6C89ull};
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * kMul;
      h[l] ^= h[l] >> 29;
    }
  }
  uint64_t tail = 0;
  for (uint64_t k = 0; i + k < n; ++k) tail |= uint64_t(p[i + k]) << (8 * (k % 8));
  uint64_t out = n * kMul;
  for (uint64_t l : h) out = (out ^ l) * kMul, out ^= out >> 31;
  out = (out ^ tail) * kMul;
  return out ^ (out >> 33);
}

// What a library expects of one tensor.
struct Expected {
  const char* name;
  uint8_t dtype, bits, rank;
  int64_t dims[kMaxRank];
  uint8_t layout;
  uint8_t block;
  uint8_t chunk;
};

inline uint64_t element_bytes(const Expected& e) { return e.bits / 8; }
// The panels a kColumnPanels tensor [K, N] takes: ceil(N / block), the last one padded.
inline int64_t column_panels(const Expected& e) { return (e.dims[1] + e.block - 1) / e.block; }
// The bytes a tensor takes in the file: a column panel's padding included.
inline uint64_t tensor_bytes(const Expected& e) {
  uint64_t n = element_bytes(e);
  for (uint8_t d = 0; d < e.rank; ++d) {
    const bool padded = e.layout == kColumnPanels && e.block > 0 && d == 1;
    n *= padded ? uint64_t(column_panels(e) * e.block) : uint64_t(e.dims[d]);
  }
  return n;
}

// Checks a whole file held in memory against what the library expects; on success fills
// `offsets` (count of them) and returns "", otherwise says what is wrong, naming the file and
// the tensor.
inline std::string validate(const unsigned char* file, uint64_t size, const std::string& path,
                            uint64_t model_hash, const Expected* expected, uint32_t count,
                            uint64_t* offsets) {
  const std::string where = "weights file " + path + ": ";
  Header h;
  if (size < sizeof(Header)) {
    return where + "only " + std::to_string(size) + " bytes, not even a header (truncated?)";
  }
  std::memcpy(&h, file, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    return where + "not an opfuse weights file (no OPFUSEWT magic)";
  }
  if (h.version != kVersion) {
    return where + "format version " + std::to_string(h.version) + ", this library reads " +
           std::to_string(kVersion);
  }
  auto hex = [](uint64_t v) {
    char b[19];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return std::string(b);
  };
  if (h.model_hash != model_hash) {
    return where + "belongs to another model (hash " + hex(h.model_hash) +
           "; this library was compiled with " + hex(model_hash) + ")";
  }
  if (h.count != count) {
    return where + std::to_string(h.count) + " tensors, the model has " + std::to_string(count);
  }
  const uint64_t table_end = sizeof(Header) + uint64_t(count) * sizeof(Entry);
  if (size < table_end) {
    return where + std::to_string(size) + " bytes, shorter than its tensor table (" +
           std::to_string(table_end) + " bytes): truncated";
  }
  // Overflow-safe: offsets and sizes come from the file.
  if (h.data_offset < table_end) {
    return where + "its data starts at byte " + std::to_string(h.data_offset) +
           ", inside its tensor table: corrupted";
  }
  if (h.data_offset > size || h.data_bytes > size - h.data_offset) {
    return where + std::to_string(size) + " bytes, but its header counts " +
           std::to_string(h.data_bytes) + " bytes of data from byte " +
           std::to_string(h.data_offset) + ": truncated";
  }
  const uint64_t data_end = h.data_offset + h.data_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e;
    std::memcpy(&e, file + sizeof(Header) + i * sizeof(Entry), sizeof e);
    const Expected& x = expected[i];
    e.name[kMaxName] = '\0';
    const std::string tensor = "tensor " + std::to_string(i) + " ('" + x.name + "')";
    if (std::strcmp(e.name, x.name) != 0) {
      return where + tensor + " is named '" + e.name + "' in the file";
    }
    bool same = e.dtype == x.dtype && e.bits == x.bits && e.rank == x.rank &&
                e.layout == x.layout && e.block == x.block && e.chunk == x.chunk;
    for (uint8_t d = 0; same && d < x.rank && d < kMaxRank; ++d) same = e.dims[d] == x.dims[d];
    if (!same || e.bytes != tensor_bytes(x)) {
      return where + tensor + " has another dtype, shape or layout in the file than the model's";
    }
    if (e.offset % kAlign != 0 || e.offset < h.data_offset || e.offset > data_end ||
        e.bytes > data_end - e.offset) {
      return where + tensor + " lies outside the file's data section (offset " +
             std::to_string(e.offset) + ")";
    }
    offsets[i] = e.offset;
  }
  if (checksum(file + h.data_offset, h.data_bytes) != h.checksum) {
    return where + "the data's checksum does not match its header: the file is corrupted";
  }
  return "";
}

}  // namespace opfuse::weights
