#!/usr/bin/env bash
# The zoo on an H200 (or any CUDA GPU), in one command that ends within 8 minutes:
#   bench/gpu/run.sh OUT_DIR [BENCH_GPU_BINARY]
# 1. bench_gpu (built on the build machine with the CUDA toolkit; nothing is compiled here):
#    CPU-size CUDA kernels checked against the reference executor, then GPU-size kernels,
#    fused vs unfused vs Anderson2021, resident on the device -> OUT_DIR/opfuse_gpu.json
# 2. PyTorch eager and torch.compile on the same GPU-size graphs, where PyTorch with CUDA is
#    installed -> OUT_DIR/torch_gpu.json
# Compare two runs with bench/compare_runs.py. What travels to the GPU machine: this tree and
# build/bench/bench_gpu (about 6 MB; the CUDA kernels' PTX is inside it).
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$here/bench-gpu}"
bin="${2:-$here/build/bench/bench_gpu}"
mkdir -p "$out"
status=0
if [[ -x "$bin" ]]; then
  timeout 300 "$bin" --models "$here/models" --out "$out/opfuse_gpu.json" --seconds 1 \
    2>&1 | tee "$out/opfuse_gpu.txt"
  status=${PIPESTATUS[0]}
else
  echo "bench/gpu: $bin not found (build it where the CUDA toolkit is: ninja -C build bench/bench_gpu)" >&2
  status=1
fi
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  timeout 150 python3 "$here/bench/torch_zoo.py" --models "$here/models/gpu" --device cuda \
    --seconds 0.5 --out "$out/torch_gpu.json" 2>&1 | tee "$out/torch_gpu.txt"
else
  echo "bench/gpu: PyTorch with CUDA not found: its eager and torch.compile columns are skipped"
fi
exit "$status"
