// opfuse-calibrate-anchors (`opfuse calibrate-anchors`): measures each anchor class's share of
// the FMA peak and a_cache on this machine (tools/anchor_calibration.h), for every ISA the CPU
// runs, and keeps them in the host profile's cache, so that every plan for the host uses them.
// tools/setup.sh runs it once a machine, before the build, as it measures the roofline; run
// it again (--force) to measure again. Through Halide's JIT: its own process, like opfuse-run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "fusion/graph/json_io.h"
#include "fusion/hardware/host.h"
#include "tools/anchor_calibration.h"

namespace {

using namespace opfuse;

// The JIT target that runs code of `isa` on this CPU.
const char* jit_target(const std::string& isa) {
  return isa == "avx2" ? "x86-64-linux-sse41-avx-f16c-fma-avx2" : "host";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "measure each anchor class's share of the FMA peak on this machine, into the host profile"};
  double seconds = 1.0;
  bool force = false, dry_run = false;
  std::string only, graph_out;
  app.add_option("--seconds", seconds, "time the layers over this many seconds of runs (medians)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--force", force, "measure again where the cached profile has the shares already");
  app.add_flag("--dry-run", dry_run, "print the measurement, leave the cache alone");
  app.add_option("--isa", only, "only this ISA")->check(CLI::IsMember({"avx512", "avx2"}));
  app.add_option("--write-graph", graph_out,
                 "write the calibration layers as a graph file, and the residual joins beside it "
                 "(F with _joins before its extension; then `opfuse run` them), and stop");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!graph_out.empty()) {
      // The joins beside it: F's name with "_joins" before its extension.
      const std::filesystem::path layers(graph_out);
      const std::filesystem::path joins =
          layers.parent_path() / (layers.stem().string() + "_joins" + layers.extension().string());
      graph::save_graph_json(tools::calibration_graph(), layers.string());
      graph::save_graph_json(tools::join_calibration_graph(), joins.string());
      std::printf("wrote the calibration layers to %s and the residual joins to %s\n",
                  layers.c_str(), joins.c_str());
      return 0;
    }
    if (!only.empty() && !fusion::host_runs(fusion::isa_named(only))) {
      throw std::runtime_error("this CPU does not run " + only + " code: nothing to measure");
    }
    // A user's HL_JIT_TARGET would time another ISA's code than the profile's.
    if (const char* t = std::getenv("HL_JIT_TARGET"); t && *t) {
      std::printf("(HL_JIT_TARGET=%s set aside: each ISA is timed with its own target)\n", t);
    }
    for (const fusion::Isa& isa : fusion::host_fma_isas()) {
      if (!only.empty() && only != isa.name) continue;
      const char* name = isa.name.c_str();
      fusion::HardwareProfile base = fusion::host_profile(isa);
      const std::string path = fusion::host_profile_cache_path(isa);
      if (!base.anchor_efficiency.empty() && !force && !dry_run) {
        std::printf("host profile %s: anchor shares cached already (%s; --force measures again)\n",
                    name, path.c_str());
        continue;
      }
      // Measured against the plain roofline, whatever the cache held.
      base.anchor_efficiency.clear();
      base.alpha_cache = base.alpha_conflict = 0;
      setenv("HL_JIT_TARGET", jit_target(name), 1);
      std::printf("host profile %s: timing the calibration layers (%s, FMA peak %.0f GFLOP/s)\n",
                  name, fusion::host_cpu_model().c_str(), base.peak_flops_f32 / 1e9);
      const auto samples = tools::time_calibration_graph(base, seconds);
      fusion::HardwareProfile fitted = tools::fit_anchor_efficiency(base, samples);
      const std::string suffix = "-anchors";
      if (fitted.name.size() < suffix.size() ||
          fitted.name.compare(fitted.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        fitted.name += suffix;
      }
      // The share each layer shows, as the fit takes it ("-": none, see layer_share).
      std::printf("  %-22s %-15s %11s %11s %7s\n", "layer", "class", "measured us", "roofline us",
                  "share");
      double fastest = 0;  // the largest share shown: above 1, the peak was measured low
      for (const auto& s : samples) {
        const double share = tools::layer_share(s, base.peak_flops_f32);
        fastest = std::max(fastest, share);
        std::printf(
            "  %-22s %-15s %11.1f %11.1f %7s\n", s.layer.c_str(),
            s.anchor_class.empty() ? "-" : s.anchor_class.c_str(), s.measured_s * 1e6,
            s.predicted_s * 1e6,
            share > 0 ? (std::to_string(int(std::lround(share * 100))) + "%").c_str() : "-");
      }
      if (fastest > 1.05) {
        std::printf(
            "  warning: a layer ran at %.0f%% of the profile's FMA peak, so the peak was measured "
            "low (another process, or the VM's other core taken): delete %s and measure "
            "again on a quiet machine\n",
            fastest * 100, path.c_str());
      }
      std::printf("  fitted: a_cache %.2f;", fitted.alpha_cache);
      for (const auto& [cls, eta] : fitted.anchor_efficiency) {
        std::printf(" %s %.2f", cls.c_str(), eta);
      }
      std::printf("\n");
      if (dry_run) continue;
      fusion::store_host_profile(isa, fitted);
      std::printf("  written to %s\n", path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opfuse-calibrate-anchors: %s\n", e.what());
    return 1;
  }
  return 0;
}
