#!/usr/bin/env bash
# Whole networks (the corpus of tests/frontend/networks.h: ResNet-18, ResNet-50 at batch 1 and
# 4, MobileNetV2, EfficientNet-B0, ViT-Tiny/16, a BERT-shaped encoder, a GPT-2 block; both
# exporters' styles,
# or any .onnx files given): opfuse fused and unfused (AOT libraries), ONNX Runtime (every
# graph optimisation, 2 threads) and OpenVINO (CPU plugin, latency hint, f32, 2 threads;
# installed into the venv on first use), each timed once a round, in turn, ROUNDS rounds
# (medians), outputs cross-checked.
# Needs ONNX Runtime in the project venv: OPFUSE_WITH_PEERS=1 tools/setup.sh.
# Usage: bench/networks/run.sh [BUILD_DIR] [OUT_DIR] [ROUNDS] [MODEL.onnx ...]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$here/build}"
out="${2:-$here/bench-networks}"
rounds="${3:-3}"
shift $(( $# < 3 ? $# : 3 ))
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
"$venv/bin/python" -c "import onnxruntime" 2>/dev/null || {
  echo "ONNX Runtime is not installed: run OPFUSE_WITH_PEERS=1 tools/setup.sh" >&2
  exit 77
}
"$venv/bin/python" -c "import openvino" 2>/dev/null || {
  echo "installing OpenVINO into $venv (the benchmark's second peer)" >&2
  "$venv/bin/pip" install -q openvino
}
mkdir -p "$out"
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  "$build/tests/frontend/write_networks" "$out/models" > /dev/null
  models=("$out"/models/*.onnx)
fi
"$venv/bin/python" "$here/bench/onnx/compare_ort.py" --opfuse "$build/tools/opfuse" --reps 20 \
  --aot --unfused --rounds "$rounds" --openvino --out "$out/networks.json" "${models[@]}"
# Per network, where the time goes: each fused group timed beside its
# prediction and its ops run alone, and whether fusing it paid.
"$venv/bin/python" "$here/bench/networks/breakdown.py" --opfuse "$build/tools/opfuse" \
  --rounds "$rounds" --out "$out/breakdown.json" "${models[@]}"
# The cost model fitted to these timings (each anchor class's share of the peak, a_cache):
# a calibrated profile, and the breakdown again with the plans and predictions it gives.
"$venv/bin/python" "$here/bench/networks/calibrate.py" --opfuse "$build/tools/opfuse" \
  --breakdown "$out/breakdown.json" --out "$out/calibrated-profile.json" "${models[@]}"
"$venv/bin/python" "$here/bench/networks/breakdown.py" --opfuse "$build/tools/opfuse" \
  --rounds "$rounds" --profile "$out/calibrated-profile.json" \
  --out "$out/breakdown-calibrated.json" "${models[@]}"
