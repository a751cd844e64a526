#include "fusion/hardware/host.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "fusion/hardware/calibrate.h"

namespace opfuse::fusion {
namespace fs = std::filesystem;

namespace {

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

int online_cores() { return int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

fs::path cache_dir() {
  if (const char* d = std::getenv("OPFUSE_PROFILE_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "opfuse/profiles";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache/opfuse/profiles";
  return fs::temp_directory_path() / "opfuse-profiles";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An exclusive lock on a file beside the cache entry while one process measures: concurrent
// generators (a parallel build) wait for the first one's measurement instead of measuring at
// the same time on the same cores.
struct FileLock {
  int fd = -1;
  explicit FileLock(const fs::path& p) {
    fd = ::open(p.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd >= 0) ::flock(fd, LOCK_EX);
  }
  ~FileLock() {
    if (fd >= 0) ::close(fd);  // closing releases the lock
  }
};

// Measures the host for code of `isa`; for an ISA the CPU cannot run, the widest it can,
// with the FMA peak scaled by the vector width (a guess, and named so).
HardwareProfile measure(const Isa& isa, bool quick) {
  const Isa run = host_runs(isa) ? isa : host_isa();
  CalibrationOptions o;
  o.seconds_per_measurement = 0.1;
  o.quick = quick;
  o.isa = run;
  HardwareProfile base = builtin_profile("epyc-avx512-2c");  // launch overhead, NUMA: as built in
  HardwareProfile p = calibrate(base, o);
  p.vector_bytes = isa.vector_bytes;
  p.vector_registers = isa.vector_registers;
  if (run.name != isa.name) {
    p.peak_flops_f32 *= double(isa.vector_bytes) / run.vector_bytes;
    p.peak_flops_f16 = p.peak_flops_f32;
    p.name += "-scaled-to-" + isa.name;
  }
  return p;
}

// Replaces the cache entry whole (a reader never sees half a file); the caller holds the lock.
std::error_code write_cache(const fs::path& path, const HardwareProfile& p) {
  std::error_code ec;
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << profile_to_json(p);
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return std::make_error_code(std::errc::io_error);
    }
  }
  fs::rename(tmp, path, ec);
  return ec;
}

}  // namespace

void store_host_profile(const Isa& isa, const HardwareProfile& p) {
  const fs::path path = host_profile_cache_path(isa);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  FileLock lock(path.string() + ".lock");
  ec = write_cache(path, p);
  if (ec)
    throw std::runtime_error("cannot write the host profile " + path.string() + ": " +
                             ec.message());
}

std::vector<Isa> host_fma_isas() {
  std::vector<Isa> out;
  for (const char* name : {"avx512", "avx2"}) {
    if (host_runs(isa_named(name))) out.push_back(isa_named(name));
  }
  return out;
}

Isa host_isa() {
  const std::vector<Isa> fma = host_fma_isas();
  return fma.empty() ? isa_named("sse4") : fma.front();
}

bool host_runs(const Isa& isa) {
  if (isa.name == "avx512") return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (isa.name == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return true;
}

std::string host_cpu_model() {
  std::string m = cpuinfo_field("model name");
  if (m.empty()) m = "unknown-cpu";
  const std::string family = cpuinfo_field("cpu family"), model = cpuinfo_field("model\t");
  if (!family.empty()) m += " family " + family;
  if (!model.empty()) m += " model " + model;
  return m;
}

std::string host_profile_cache_path(const Isa& isa) {
  std::string key = host_cpu_model() + "-" + isa.name + "-" + std::to_string(online_cores()) + "c";
  for (char& c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  return (cache_dir() / (key + ".json")).string();
}

HardwareProfile host_profile(const Isa& isa, bool quick) {
  const fs::path path = host_profile_cache_path(isa);
  auto cached = [&]() -> std::optional<HardwareProfile> {
    if (!fs::exists(path)) return std::nullopt;
    try {
      HardwareProfile p = profile_from_json(read_file(path), path.string());
      if (p.vector_bytes == isa.vector_bytes && p.cores == online_cores()) return p;
    } catch (const std::exception&) {
      // A damaged or partial cache entry is measured again.
    }
    return std::nullopt;
  };
  if (auto p = cached()) {
    // Said once a process: plans for the host then take every anchor at the FMA peak.
    // (An ISA this CPU cannot run has no shares to measure: its profile is a scaled guess.)
    static std::once_flag said;
    if (p->anchor_efficiency.empty() && host_runs(isa) && isa.name != "sse4") {
      std::call_once(said, [&] {
        std::fprintf(stderr,
                     "opfuse: the host profile %s has no anchor shares of the peak; "
                     "`opfuse calibrate-anchors` measures them\n",
                     path.c_str());
      });
    }
    return *p;
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  FileLock lock(path.string() + ".lock");
  if (auto p = cached()) return *p;  // measured by another process while this one waited
  HardwareProfile p = measure(isa, quick);
  ec = write_cache(path, p);
  std::fprintf(stderr,
               "opfuse: measured this machine (%s, %s, %d cores): FMA peak %.0f GFLOP/s, DRAM "
               "%.1f GB/s%s%s\n",
               host_cpu_model().c_str(), isa.name.c_str(), p.cores, p.peak_flops_f32 / 1e9,
               p.main_memory().bandwidth_Bps / 1e9, ec ? "; not cached: " : "; cached in ",
               ec ? ec.message().c_str() : path.c_str());
  return p;
}

}  // namespace opfuse::fusion
