#!/usr/bin/env bash
# The corpus networks (tests/frontend/networks.h: ResNet-18, MobileNetV2, EfficientNet-B0 and
# ViT-Tiny/16 at 224x224, a BERT-shaped encoder and a GPT-2 block from token ids, as the TorchScript exporter writes them at opset 17 and as the dynamo
# exporter does at opset 20 with external data): each imported, planned, run fused (`opfuse run`, the JIT) and compared
# with opfuse's reference executor and with ONNX Runtime; ResNet-18's and the GPT-2 block's
# dynamo exports also compiled ahead of time (`opfuse compile`) and their libraries run. Skipped, and said so, without ONNX Runtime.
# Where the CUDA toolkit was found (PTXAS given), ResNet-18 and the GPT-2 block are also
# compiled for host-cuda and their PTX assembled for sm_90 (the H200).
# Usage: networks.sh WRITE_NETWORKS OPFUSE SOURCE_DIR [PTXAS]
set -euo pipefail
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
"$venv/bin/python" -c "import onnxruntime" 2>/dev/null || {
  echo "SKIPPED: ONNX Runtime is not installed (OPFUSE_WITH_PEERS=1 tools/setup.sh)"
  exit 77
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$1" "$work/models" > /dev/null
models=("$work"/models/*.onnx)
"$venv/bin/python" "$3/bench/onnx/compare_ort.py" --opfuse "$2" --reps 3 --check \
  --out "$work/networks.json" "${models[@]}"
# Ahead of time, each library run through runtime::Model and checked against the reference:
# ResNet-18 (47 MB of weights) embeds them, the GPT-2 block (186 MB, beyond `opfuse compile`'s
# 128 MiB line) loads them from its weights file.
for m in resnet18_dynamo gpt2_block_dynamo; do
  "$2" compile "$work/models/$m.onnx" --target host --shared --out "$work/lib" > "$work/compile.log" ||
    { cat "$work/compile.log"; exit 1; }
  "$2" run "$work/models/$m.onnx" --library "$work/lib/$m.so" --check > "$work/run.log" ||
    { cat "$work/run.log"; exit 1; }
  grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
done
grep -q "int resnet18_dynamo(struct halide_buffer_t \*_x_buffer, struct halide_buffer_t \*_logits_out_buffer);" \
  "$work/lib/resnet18_dynamo.h"
test ! -e "$work/lib/resnet18_dynamo.weights"
test -s "$work/lib/gpt2_block_dynamo.weights"
# From token ids: the kernel takes them as an int64 buffer.
grep -q "int gpt2_block_dynamo(struct halide_buffer_t\* _input_ids_buffer" "$work/lib/gpt2_block_dynamo.h"
# Halide's type check: int64 is code 0 | 64 bits << 8 | 1 lane << 16 = 81920.
grep -q 'Input buffer input_ids", input_ids.type, (uint32)81920' "$work/lib/gpt2_block_dynamo.stmt"
passed=$(( ${#models[@]} + 2 ))
if [ -n "${4:-}" ]; then
  for m in resnet18_dynamo gpt2_block_dynamo; do
    "$2" compile "$work/models/$m.onnx" --target host-cuda --out "$work/cuda" > "$work/cuda.log" 2>&1 ||
      { cat "$work/cuda.log"; exit 1; }
    "$4" -arch=sm_90 "$work/cuda/$m.device_code" -o "$work/cuda/$m.cubin"
    passed=$(( passed + 1 ))
  done
else
  echo "note: no ptxas (CUDA toolkit) configured: the host-cuda builds were not assembled"
fi
echo "$passed passed, 0 failed"
