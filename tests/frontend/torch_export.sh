#!/usr/bin/env bash
# The five blocks exported by PyTorch itself (torch.onnx.export, opsets 13 and 17): each
# imports, canonicalises (the plan's log names the rewrites), compiles for host, and matches
# ONNX Runtime within the graph tolerance. Then two whole torchvision networks (ResNet-18,
# MobileNetV3-Large: HardSwish, HardSigmoid) through both exporters (TorchScript at opset 17,
# dynamo at opset 20 with external data), run and compared with PyTorch's own outputs; the
# other networks (bench/networks/torch_networks.py) take too long for the suite. Exit 77 (skipped, and said so) without PyTorch or
# ONNX Runtime in the Python given (the project venv: OPFUSE_WITH_TORCH=1 OPFUSE_WITH_PEERS=1).
# Usage: torch_export.sh PYTHON|venv OPFUSE [SCALE]   (venv: the project venv's python)
set -uo pipefail
python="$1" opfuse="$2" scale="${3:-1}"
if [ "$python" = venv ]; then
  python="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}/bin/python"
fi
here="$(cd "$(dirname "$0")" && pwd)"
"$python" -c "import onnxruntime, numpy" 2>/dev/null || {
  echo "skipped: ONNX Runtime is not installed (OPFUSE_WITH_PEERS=1 tools/setup.sh)"
  exit 77
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" "$here/export_torch_blocks.py" "$work/models" "$scale" > "$work/export.log" 2>&1
rc=$?
if [ "$rc" = 77 ]; then cat "$work/export.log"; exit 77; fi
[ "$rc" = 0 ] || { cat "$work/export.log"; exit 1; }
set -e
n=0
for model in "$work"/models/*.onnx; do
  name="$(basename "$model" .onnx)"
  "$opfuse" compile "$model" --target host --out "$work/lib" > "$work/$name.log"
  test -s "$work/lib/$name.a" || { echo "$name: no library"; cat "$work/$name.log"; exit 1; }
  n=$((n + 1))
done
[ "$n" = 10 ] || { echo "expected 10 exported models, got $n"; exit 1; }
# The decomposed forms PyTorch writes are recognised.
grep -q "canonicalize: layer_norm_affine" "$work/lib/transformer_encoder_torch_opset13.plan.json"
grep -q "canonicalize: gelu_erf" "$work/lib/transformer_encoder_torch_opset17.plan.json"
grep -q "canonicalize: silu" "$work/lib/swiglu_mlp_torch_opset13.plan.json"
grep -q "canonicalize: relu6" "$work/lib/depthwise_separable_torch_opset17.plan.json"
# Outputs against ONNX Runtime (exit 1 on a mismatch).
"$python" "$here/../../bench/onnx/compare_ort.py" --opfuse "$opfuse" --reps 3 \
  --out "$work/ort.json" "$work"/models/*.onnx
"$python" "$here/export_torch_networks.py" "$work/networks" --only resnet18,mobilenet_v3_large \
  > "$work/networks.log" 2>&1 || { cat "$work/networks.log"; exit 1; }
"$python" "$here/../../bench/networks/torch_networks.py" --opfuse "$opfuse" --check \
  "$work/networks"
n=$((n + 4))
echo "$n passed, 0 failed"
