#include "tools/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace opfuse::tools {

graph::HostTensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    throw std::runtime_error(path + ": not a .npy file");
  }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t h = 0;
    in.read(reinterpret_cast<char*>(&h), 2);
    header_len = h;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw std::runtime_error(path + ": truncated header");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'")) ||
      (m[1] != "<f4" && m[1] != "<i8" && m[1] != "<i4")) {
    throw std::runtime_error(path + ": dtype must be float32 ('<f4'), int64 ('<i8') or int32 "
                             "('<i4'), header: " + header);
  }
  const std::string descr = m[1];
  if (std::regex_search(header, m, std::regex("'fortran_order':\\s*True"))) {
    throw std::runtime_error(path + ": Fortran order is not supported; save it C-contiguous");
  }
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)"))) {
    throw std::runtime_error(path + ": no shape in the header");
  }
  graph::Shape shape;
  std::stringstream dims(m[1].str());
  for (std::string d; std::getline(dims, d, ',');) {
    if (d.find_first_not_of(" ") != std::string::npos) shape.push_back(std::stoll(d));
  }
  graph::HostTensor t(shape);
  auto short_file = [&] {
    return std::runtime_error(path + ": holds fewer than the " + std::to_string(t.size()) +
                              " values its shape says");
  };
  if (descr == "<f4") {
    if (!in.read(reinterpret_cast<char*>(t.data.data()), std::streamsize(t.size() * 4)))
      throw short_file();
    return t;
  }
  // Integers (token ids, masks) are held as exact f32 values: |v| <= 2^24.
  const size_t width = descr == "<i8" ? 8 : 4;
  std::vector<char> raw(t.size() * width);
  if (!in.read(raw.data(), std::streamsize(raw.size()))) throw short_file();
  for (size_t i = 0; i < t.size(); ++i) {
    int64_t v = 0;
    if (width == 8) {
      std::memcpy(&v, &raw[i * 8], 8);
    } else {
      int32_t w = 0;
      std::memcpy(&w, &raw[i * 4], 4);
      v = w;
    }
    if (v > graph::kMaxExactInteger || v < -graph::kMaxExactInteger) {
      throw std::runtime_error(path + ": value " + std::to_string(v) + " at " + std::to_string(i) +
                               " is beyond the +-2^24 opfuse holds exactly");
    }
    t.data[i] = float(v);
  }
  return t;
}

void write_npy(const std::string& path, const graph::HostTensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    shape +=
        std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  }
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot write");
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.size() * 4));
}

}  // namespace opfuse::tools
