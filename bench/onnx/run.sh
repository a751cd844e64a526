#!/usr/bin/env bash
# The five exported blocks (opsets 13 and 17; written by tests/frontend, and by PyTorch where
# the venv has it) at benchmark size: opfuse fused vs ONNX Runtime.
# Needs ONNX Runtime in the project venv: OPFUSE_WITH_PEERS=1 tools/setup.sh.
# Usage: bench/onnx/run.sh [BUILD_DIR] [OUT_DIR] [SCALE]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$here/build}"
out="${2:-$here/bench-onnx}"
scale="${3:-8}"
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
"$venv/bin/python" -c "import onnxruntime" 2>/dev/null || {
  echo "ONNX Runtime is not installed: run OPFUSE_WITH_PEERS=1 tools/setup.sh" >&2
  exit 77
}
mkdir -p "$out"
"$build/tests/frontend/write_onnx_blocks" "$out/models" "$scale" > /dev/null
# The same blocks exported by PyTorch itself, where the venv has it (OPFUSE_WITH_TORCH=1).
"$venv/bin/python" "$here/tests/frontend/export_torch_blocks.py" "$out/models" "$scale" \
  > /dev/null 2>&1 || echo "(PyTorch not in the venv: its exports are not compared)"
"$venv/bin/python" "$here/bench/onnx/compare_ort.py" --opfuse "$build/tools/opfuse" \
  --torch-eager "$out/models/torch_eager.json" --out "$out/onnx_blocks.json" "$out"/models/*.onnx
