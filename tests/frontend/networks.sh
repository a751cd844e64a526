#!/usr/bin/env bash
# The corpus networks (tests/frontend/networks.h: ResNet-18, MobileNetV2, EfficientNet-B0 and
# ViT-Tiny/16 at 224x224, a BERT-shaped encoder and a GPT-2 block from token ids, as the TorchScript exporter writes them at opset 17 and as the dynamo
# exporter does at opset 20 with external data): each imported, planned, run fused (`opfuse run`, the JIT) and compared
# with opfuse's reference executor and with ONNX Runtime; ResNet-18's and the GPT-2 block's
# dynamo exports also compiled ahead of time (`opfuse compile`) and their libraries run. Skipped, and said so, without ONNX Runtime.
# Where the CUDA toolkit was found (PTXAS given), ResNet-18 and the GPT-2 block are also
# compiled for host-cuda and their PTX assembled for sm_90 (the H200).
# The work comes in four stages, each a ctest test of its own so that they run side by side:
#   cnn           ResNet-18, MobileNetV2, EfficientNet-B0: import, fused run, reference, ORT
#   transformers  ViT-Tiny/16, the BERT-shaped encoder, the GPT-2 block: the same
#   aot           the ahead-of-time libraries, MobileNetV2's host-opencl library on PoCL (in
#                 a process without libHalide), and the host-cuda PTX where PTXAS is given
#   dynamic       the dynamic-batch and dynamic-sequence libraries
# Usage: networks.sh STAGE WRITE_NETWORKS OPFUSE SOURCE_DIR [PTXAS]
set -euo pipefail
stage=$1
shift
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
"$venv/bin/python" -c "import onnxruntime" 2>/dev/null || {
  echo "SKIPPED: ONNX Runtime is not installed (OPFUSE_WITH_PEERS=1 tools/setup.sh)"
  exit 77
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
passed=0
# Each corpus network NAME... written (224x224 images; both exporters) to $work/models and run
# fused through the JIT against the reference executor and ONNX Runtime.
compare_corpus() {
  for n in "$@"; do "$WRITE" "$work/models" 224 "$n" > /dev/null; done
  local models=("$work"/models/*.onnx)
  "$venv/bin/python" "$SRC/bench/onnx/compare_ort.py" --opfuse "$OPFUSE" --reps 3 --check \
    --out "$work/networks.json" "${models[@]}"
  passed=$(( passed + ${#models[@]} ))
}

aot() {
  "$WRITE" "$work/models" 224 resnet18 > /dev/null
  "$WRITE" "$work/models" 224 gpt2_block > /dev/null
  # Ahead of time, each library run through runtime::Model and checked against the reference:
  # ResNet-18 (47 MB of weights) embeds them, the GPT-2 block (186 MB, beyond `opfuse compile`'s
  # 128 MiB line) loads them from its weights file.
  for m in resnet18_dynamo gpt2_block_dynamo; do
    "$OPFUSE" compile "$work/models/$m.onnx" --target host --shared --out "$work/lib" > "$work/compile.log" ||
      { cat "$work/compile.log"; exit 1; }
    "$OPFUSE" run "$work/models/$m.onnx" --library "$work/lib/$m.so" --check > "$work/run.log" ||
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
  passed=$(( passed + 2 ))
  # A whole network on PoCL: the dynamo MobileNetV2 built for host-opencl (GPU-style
  # schedules), run by a process without libHalide (PoCL's LLVM must not meet libHalide's)
  # and compared with the reference executor.
  "$WRITE" "$work/models" 224 mobilenet_v2 > /dev/null
  "$OPFUSE" compile "$work/models/mobilenet_v2_dynamo.onnx" --target host-opencl --shared \
    --out "$work/ocl" > "$work/ocl.log" 2>&1 || { cat "$work/ocl.log"; exit 1; }
  POCL_CACHE_DIR="$work/pocl-cache" "$OPFUSE" check-library "$work/models/mobilenet_v2_dynamo.onnx" \
    "$work/ocl/mobilenet_v2_dynamo.so" > "$work/ocl_run.log" 2>&1 || { cat "$work/ocl_run.log"; exit 1; }
  grep -q "reference: match" "$work/ocl_run.log" || { cat "$work/ocl_run.log"; exit 1; }
  passed=$(( passed + 1 ))
  if [ -n "${1:-}" ]; then
    for m in resnet18_dynamo gpt2_block_dynamo; do
      "$OPFUSE" compile "$work/models/$m.onnx" --target host-cuda --out "$work/cuda" > "$work/cuda.log" 2>&1 ||
        { cat "$work/cuda.log"; exit 1; }
      "$1" -arch=sm_90 "$work/cuda/$m.device_code" -o "$work/cuda/$m.cubin"
      passed=$(( passed + 1 ))
    done
  else
    echo "note: no ptxas (CUDA toolkit) configured: the host-cuda builds were not assembled"
  fi
}

dynamic() {
  # A dynamic batch: ResNet-18 (64x64 images; functions at 1 and 2) and the GPT-2 block (at 1, 2
  # and 4, the default) exported with a symbolic batch, each compiled once for batch = 1..16; run
  # against the reference, ResNet-18 at 1 and 8, both at 3 from .npy inputs (the batch taken
  # from the files) and also against ONNX Runtime on the same export; a call at 17 refused.
  "$WRITE" --dynamic-batch "$work/dyn" 64 resnet18 > /dev/null
  "$WRITE" --dynamic-batch "$work/dyn" 64 gpt2_block > /dev/null
  for m in resnet18_dynamo_dynbatch gpt2_block_dynamo_dynbatch; do
    buckets=()
    [ "$m" = resnet18_dynamo_dynbatch ] && buckets=(--buckets 1,2)
    "$OPFUSE" compile "$work/dyn/$m.onnx" --dim batch=1..16 "${buckets[@]}" --shared --out "$work/dynlib" > "$work/compile.log" ||
      { cat "$work/compile.log"; exit 1; }
    sizes=()
    [ "$m" = resnet18_dynamo_dynbatch ] && sizes=(1 8)
    for b in "${sizes[@]}"; do
      "$OPFUSE" run "$work/dyn/$m.onnx" --dim batch=$b --library "$work/dynlib/$m.so" --check > "$work/run.log" ||
        { cat "$work/run.log"; exit 1; }
      grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
    done
    "$venv/bin/python" - "$work/dyn/$m.onnx" "$work/dynin_$m" <<'PY'
import sys, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
import os; os.makedirs(out, exist_ok=True)
o = ort.SessionOptions(); o.intra_op_num_threads = 2
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(3)
feeds = {}
for i in s.get_inputs():
    shape = [3 if isinstance(d, str) else d for d in i.shape]
    feeds[i.name] = (rng.integers(0, 1000, shape).astype(np.int64) if "int64" in i.type
                     else rng.uniform(-1, 1, shape).astype(np.float32))
    np.save(f"{out}/{i.name}.npy", feeds[i.name])
for o, v in zip(s.get_outputs(), s.run(None, feeds)):
    np.save(f"{out}/ort_{o.name}.npy", v)
PY
    ins=()
    for f in "$work/dynin_$m"/*.npy; do
      n=$(basename "$f" .npy)
      case "$n" in ort_*) ;; *) ins+=(--input "$n=$f") ;; esac
    done
    "$OPFUSE" run "$work/dyn/$m.onnx" "${ins[@]}" --library "$work/dynlib/$m.so" --check --outputs "$work/dynout_$m" > "$work/run.log" ||
      { cat "$work/run.log"; exit 1; }
    grep -q "^batch = 3 (input" "$work/run.log" || { cat "$work/run.log"; exit 1; }
    grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
    "$venv/bin/python" - "$work/dynin_$m" "$work/dynout_$m" <<'PY'
import sys, glob, os, numpy as np
ins, outs = sys.argv[1], sys.argv[2]
for want in glob.glob(f"{ins}/ort_*.npy"):
    got = np.load(f"{outs}/{os.path.basename(want)[4:]}")
    w = np.load(want)
    assert got.shape == w.shape, (got.shape, w.shape)
    err = np.abs(got - w).max() / max(1.0, np.abs(w).max())
    assert err < 1e-3, f"{want}: max error {err} relative to ONNX Runtime"
PY
    if "$OPFUSE" run "$work/dyn/$m.onnx" --dim batch=17 --library "$work/dynlib/$m.so" > "$work/run.log" 2>&1; then
      echo "batch 17 was not refused"; exit 1
    fi
    grep -q "batch = 17, outside the sizes the library was compiled for, 1..16" "$work/run.log" ||
      { cat "$work/run.log"; exit 1; }
  done
  # A dynamic sequence length (not separable: attention mixes positions): the GPT-2 block exported
  # with symbolic batch and sequence, compiled at batch 2 for the sequence lengths 32, 77 and
  # 128, a function each; each run against the reference, 77 against ONNX Runtime, 50 refused.
  "$WRITE" --dynamic-batch --dynamic-seq "$work/seq" 64 gpt2_block > /dev/null
  m=gpt2_block_dynamo_dynbatch_dynseq
  "$OPFUSE" compile "$work/seq/$m.onnx" --dim batch=2 --dim seq=32,77,128 --shared --out "$work/seqlib" > "$work/compile.log" ||
    { cat "$work/compile.log"; exit 1; }
  for s in 32 128; do
    "$OPFUSE" run "$work/seq/$m.onnx" --dim batch=2 --dim seq=$s --library "$work/seqlib/$m.so" --check > "$work/run.log" ||
      { cat "$work/run.log"; exit 1; }
    grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  done
  "$venv/bin/python" - "$work/seq/$m.onnx" "$work/seqin" <<'PY'
import sys, os, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
o = ort.SessionOptions(); o.intra_op_num_threads = 2
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
ids = np.random.default_rng(4).integers(0, 50257, (2, 77)).astype(np.int64)
np.save(f"{out}/input_ids.npy", ids)
np.save(f"{out}/ort.npy", s.run(None, {"input_ids": ids})[0])
PY
  "$OPFUSE" run "$work/seq/$m.onnx" --input "input_ids=$work/seqin/input_ids.npy" --library "$work/seqlib/$m.so" \
    --check --outputs "$work/seqout" > "$work/run.log" || { cat "$work/run.log"; exit 1; }
  grep -q "^seq = 77 (input" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  "$venv/bin/python" -c "
import sys, glob, numpy as np
w = np.load('$work/seqin/ort.npy'); g = np.load(glob.glob('$work/seqout/*.npy')[0])
assert g.shape == w.shape, (g.shape, w.shape)
e = np.abs(g - w).max() / max(1.0, np.abs(w).max()); assert e < 1e-3, e"
  if "$OPFUSE" run "$work/seq/$m.onnx" --dim batch=2 --dim seq=50 --library "$work/seqlib/$m.so" > "$work/run.log" 2>&1; then
    echo "seq 50 was not refused"; exit 1
  fi
  grep -q "seq = 50, not one of the sizes the library was compiled for: 32, 77, 128" "$work/run.log" ||
    { cat "$work/run.log"; exit 1; }
  passed=$(( passed + 3 ))
}

WRITE=$1 OPFUSE=$2 SRC=$3
case "$stage" in
  cnn) compare_corpus resnet18 mobilenet_v2 efficientnet_b0 ;;
  transformers) compare_corpus vit_tiny bert_encoder gpt2_block ;;
  aot) aot "${4:-}" ;;
  dynamic) dynamic ;;
  *) echo "unknown stage '$stage' (cnn, transformers, aot, dynamic)"; exit 2 ;;
esac
echo "$passed passed, 0 failed"
