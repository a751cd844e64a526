// Writes the corpus networks (tests/frontend/networks.h) as ONNX files in both exporters'
// styles: DIR/<network>_<torchscript|dynamo>.onnx (+ .onnx.data for dynamo).
// Usage: write_networks [--dynamic-batch] [--dynamic-seq] [--style S] DIR [IMAGE [NETWORK]]
// (IMAGE: input height and width, default 224; NETWORK: only that one; --dynamic-batch:
// exported with a symbolic batch, DIR/<network>_<style>_dynbatch.onnx; --dynamic-seq: the token
// models with a symbolic sequence length too, ..._dynseq.onnx; --style torchscript|dynamo:
// only that exporter's)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/frontend/networks.h"

int main(int argc, char** argv) {
  bool dynamic = false, dynamic_seq = false;
  std::string style;
  while (argc >= 2 && std::string(argv[1]).rfind("--", 0) == 0) {
    const std::string flag = argv[1];
    if (flag == "--dynamic-batch") {
      dynamic = true;
    } else if (flag == "--dynamic-seq") {
      dynamic_seq = true;
    } else if (flag == "--style" && argc >= 3 &&
               (std::string(argv[2]) == "torchscript" || std::string(argv[2]) == "dynamo")) {
      style = argv[2];
      --argc;
      ++argv;
    } else {
      std::fprintf(stderr,
                   "unknown flag %s (--dynamic-batch, --dynamic-seq, --style torchscript|dynamo)\n",
                   flag.c_str());
      return 1;
    }
    --argc;
    ++argv;
  }
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr,
                 "usage: %s [--dynamic-batch] [--dynamic-seq] [--style torchscript|dynamo] DIR "
                 "[IMAGE [NETWORK]]\n",
                 argv[0]);
    return 1;
  }
  const int64_t image = argc >= 3 ? std::atoll(argv[2]) : 224;
  const std::string only = argc == 4 ? argv[3] : "";
  if (image < 32 || image > 1024) {
    std::fprintf(stderr, "IMAGE must be 32..1024\n");
    return 1;
  }
  const auto& names = opfuse::testing::network_names();
  if (!only.empty() && std::find(names.begin(), names.end(), only) == names.end()) {
    std::fprintf(stderr, "no network '%s' (%s)\n", only.c_str(),
                 opfuse::testing::network_list().c_str());
    return 1;
  }
  std::filesystem::create_directories(argv[1]);
  using opfuse::testing::ExportStyle;
  for (const auto& n : names) {
    if (!only.empty() && n != only) continue;
    for (ExportStyle s : {ExportStyle::torchscript, ExportStyle::dynamo}) {
      if (!style.empty() && style != opfuse::testing::style_name(s)) continue;
      std::printf("%s\n", opfuse::testing::write_network(n, s, argv[1], image, dynamic, dynamic_seq).c_str());
    }
  }
  return 0;
}
