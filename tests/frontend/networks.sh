#!/usr/bin/env bash
# The corpus networks (tests/frontend/networks.h: ResNet-18, MobileNetV2, EfficientNet-B0 and
# ViT-Tiny/16 at 224x224, ResNet-50 at 64x64, a BERT-shaped encoder and a GPT-2 block from token ids, as the
# TorchScript exporter writes them at opset 17 and as the dynamo exporter does at opset 20 with
# external data): each imported, planned, run fused through the JIT (`opfuse run`) and through
# its ahead-of-time library (`opfuse compile --shared`), and compared with opfuse's reference
# executor and with ONNX Runtime. Skipped, and said so, without ONNX Runtime.
# Where the CUDA toolkit was found (PTXAS given), the dynamo exports but ViT's are also
# compiled for host-cuda and their PTX assembled for sm_90 (the H200). Each network exported
# with a symbolic batch, and the transformers with a symbolic sequence, compiled once as a
# dynamic library and run at several sizes.
# The work comes in four stages, each a ctest test of its own so that they run side by side:
#   cnn           ResNet-18, MobileNetV2, EfficientNet-B0 (and ResNet-50 at 64x64): import,
#                 fused run, reference, ORT
#   transformers  ViT-Tiny/16, the BERT-shaped encoder, the GPT-2 block: the same
#   aot           the ahead-of-time libraries of all twelve, MobileNetV2's with its weights in a file
#                 and as arguments, its host-opencl library on PoCL (in a process without
#                 libHalide), and the host-cuda PTX where PTXAS is given
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
# Each corpus network NAME... written (224x224 images, or --image N; both exporters) to
# $work/models (224) or $work/models_N and run fused against the reference executor and ONNX
# Runtime: through the JIT, or with --aot through its library (`opfuse compile --shared`).
compare_corpus() {
  local aot=() image=224
  while true; do
    case "$1" in
      --aot) aot=(--aot); shift ;;
      --image) image=$2; shift 2 ;;
      *) break ;;
    esac
  done
  local dir="$work/models"
  [ "$image" = 224 ] || dir="$work/models_$image"
  for n in "$@"; do "$WRITE" "$dir" "$image" "$n" > /dev/null; done
  local models=("$dir"/*.onnx)
  "$venv/bin/python" "$SRC/bench/onnx/compare_ort.py" --opfuse "$OPFUSE" "${aot[@]}" --reps 3 --check \
    --out "$work/networks.json" "${models[@]}"
  passed=$(( passed + ${#models[@]} ))
}

aot() {
  # Every corpus network in both exporters' styles compiled ahead of time (`opfuse compile
  # --shared`, the default weights: embedded up to 128 MiB, else a weights file), run through
  # its library, and checked against the reference executor and ONNX Runtime.
  compare_corpus --aot resnet18 mobilenet_v2 efficientnet_b0 vit_tiny bert_encoder gpt2_block
  # The libraries' interfaces: ResNet-18 (47 MB of weights) embeds them; the BERT-shaped
  # encoder (144 MB) and the GPT-2 block (186 MB), beyond the 128 MiB line, load them from a
  # weights file and pass them to the kernel as arguments.
  for m in resnet18_dynamo bert_encoder_dynamo gpt2_block_dynamo; do
    "$OPFUSE" compile "$work/models/$m.onnx" --target host --out "$work/lib" > "$work/compile.log" ||
      { cat "$work/compile.log"; exit 1; }
  done
  grep -q "int resnet18_dynamo(struct halide_buffer_t \*_x_buffer, struct halide_buffer_t \*_logits_out_buffer);" \
    "$work/lib/resnet18_dynamo.h"
  test ! -e "$work/lib/resnet18_dynamo.weights"
  test -s "$work/lib/gpt2_block_dynamo.weights"
  test -s "$work/lib/bert_encoder_dynamo.weights"
  # From token ids: the kernel takes them as an int64 buffer.
  grep -q "int gpt2_block_dynamo(struct halide_buffer_t\* _input_ids_buffer" "$work/lib/gpt2_block_dynamo.h"
  # Halide's type check: int64 is code 0 | 64 bits << 8 | 1 lane << 16 = 81920.
  grep -q 'Input buffer input_ids", input_ids.type, (uint32)81920' "$work/lib/gpt2_block_dynamo.stmt"
  # MobileNetV2 with its weights in a file: its classifier's [1280, 1000] stored in 16 panels of
  # 64 columns, the last zero-padded (graph::linear_weight_panel), which the library maps and
  # reads as its kernels do; and with its weights as arguments, row-major, where the last block
  # of columns must not read past the 1000th. Each compared with the reference executor.
  for w in file args; do
    "$OPFUSE" compile "$work/models/mobilenet_v2_dynamo.onnx" --target host --weights "$w" --shared \
      --out "$work/$w" > "$work/$w.log" 2>&1 || { cat "$work/$w.log"; exit 1; }
    "$OPFUSE" check-library "$work/models/mobilenet_v2_dynamo.onnx" \
      "$work/$w/mobilenet_v2_dynamo.so" > "$work/${w}_run.log" 2>&1 || { cat "$work/${w}_run.log"; exit 1; }
    grep -q "reference: match" "$work/${w}_run.log" || { cat "$work/${w}_run.log"; exit 1; }
    passed=$(( passed + 1 ))
  done
  test -s "$work/file/mobilenet_v2_dynamo.weights"
  # A whole network on PoCL: the dynamo MobileNetV2 built for host-opencl (GPU-style
  # schedules), run by a process without libHalide (PoCL's LLVM must not meet libHalide's)
  # and compared with the reference executor.
  "$OPFUSE" compile "$work/models/mobilenet_v2_dynamo.onnx" --target host-opencl --shared \
    --out "$work/ocl" > "$work/ocl.log" 2>&1 || { cat "$work/ocl.log"; exit 1; }
  POCL_CACHE_DIR="$work/pocl-cache" "$OPFUSE" check-library "$work/models/mobilenet_v2_dynamo.onnx" \
    "$work/ocl/mobilenet_v2_dynamo.so" > "$work/ocl_run.log" 2>&1 || { cat "$work/ocl_run.log"; exit 1; }
  grep -q "reference: match" "$work/ocl_run.log" || { cat "$work/ocl_run.log"; exit 1; }
  passed=$(( passed + 1 ))
  if [ -n "${1:-}" ]; then
    # ViT-Tiny's host-cuda build is left out: it takes 16 minutes (README, Limits), beyond this
    # suite's budget.
    for m in resnet18_dynamo mobilenet_v2_dynamo efficientnet_b0_dynamo bert_encoder_dynamo gpt2_block_dynamo; do
      "$OPFUSE" compile "$work/models/$m.onnx" --target host-cuda --out "$work/cuda" > "$work/cuda.log" 2>&1 ||
        { cat "$work/cuda.log"; exit 1; }
      "$1" -arch=sm_90 "$work/cuda/$m.device_code" -o "$work/cuda/$m.cubin"
      passed=$(( passed + 1 ))
    done
  else
    echo "note: no ptxas (CUDA toolkit) configured: the host-cuda builds were not assembled"
  fi
}

# Random inputs for every input of MODEL, its symbolic dimensions at SIZES ("batch=3" or
# "batch=3,seq=77"; token ids in [0, 1000), masks 0 or 1), saved as DIR/NAME.npy, and ONNX
# Runtime's outputs on them as DIR/ort_NAME.npy.
ort_inputs() {
  "$venv/bin/python" - "$1" "$2" "$3" <<'PY'
import sys, os, numpy as np, onnxruntime as ort
model, out = sys.argv[1], sys.argv[2]
sizes = {k: int(v) for k, v in (kv.split("=") for kv in sys.argv[3].split(","))}
os.makedirs(out, exist_ok=True)
o = ort.SessionOptions(); o.intra_op_num_threads = 2
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(3)
feeds = {}
for i in s.get_inputs():
    shape = [sizes[d] if isinstance(d, str) else d for d in i.shape]
    if "int64" in i.type:
        feeds[i.name] = rng.integers(0, 2 if "mask" in i.name else 1000, shape).astype(np.int64)
    else:
        feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    np.save(f"{out}/{i.name}.npy", feeds[i.name])
for o, v in zip(s.get_outputs(), s.run(None, feeds)):
    np.save(f"{out}/ort_{o.name}.npy", v)
PY
}

# MODEL run by LIBRARY on ort_inputs' files in DIR: the size taken from them (SYMBOL = N in the
# log), checked against the reference and against ONNX Runtime's outputs.
run_vs_ort() {
  local model=$1 lib=$2 dir=$3 expect=$4 ins=()
  for f in "$dir"/*.npy; do
    n=$(basename "$f" .npy)
    case "$n" in ort_*) ;; *) ins+=(--input "$n=$f") ;; esac
  done
  "$OPFUSE" run "$model" "${ins[@]}" --library "$lib" --check --outputs "$dir/out" > "$work/run.log" ||
    { cat "$work/run.log"; exit 1; }
  grep -q "^$expect (input" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
  "$venv/bin/python" - "$dir" <<'PY'
import sys, glob, os, numpy as np
d = sys.argv[1]
for want in glob.glob(f"{d}/ort_*.npy"):
    got = np.load(f"{d}/out/{os.path.basename(want)[4:]}")
    w = np.load(want)
    assert got.shape == w.shape, (got.shape, w.shape)
    err = np.abs(got - w).max() / max(1.0, np.abs(w).max())
    assert err < 1e-3, f"{want}: max error {err} relative to ONNX Runtime"
PY
}

dynamic() {
  # A dynamic batch: every corpus network exported with a symbolic batch (the images at
  # 64x64), each compiled once for batch = 1..16 (the CNNs with functions at 1 and 2, the
  # transformers at 1, 2 and 4, the default); run against the reference at 1 and 8, and at 3
  # from .npy inputs (the batch taken from the files) against the reference and ONNX Runtime
  # on the same export; a call at 17 refused.
  for n in resnet18 mobilenet_v2 efficientnet_b0 vit_tiny bert_encoder gpt2_block; do
    "$WRITE" --dynamic-batch "$work/dyn" 64 "$n" > /dev/null
    m=${n}_dynamo_dynbatch
    buckets=()
    case "$n" in resnet18|mobilenet_v2|efficientnet_b0) buckets=(--buckets 1,2) ;; esac
    "$OPFUSE" compile "$work/dyn/$m.onnx" --dim batch=1..16 "${buckets[@]}" --shared --out "$work/dynlib" > "$work/compile.log" ||
      { cat "$work/compile.log"; exit 1; }
    for b in 1 8; do
      "$OPFUSE" run "$work/dyn/$m.onnx" --dim batch=$b --library "$work/dynlib/$m.so" --check > "$work/run.log" ||
        { cat "$work/run.log"; exit 1; }
      grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
    done
    ort_inputs "$work/dyn/$m.onnx" "$work/dynin_$m" batch=3
    run_vs_ort "$work/dyn/$m.onnx" "$work/dynlib/$m.so" "$work/dynin_$m" "batch = 3"
    if "$OPFUSE" run "$work/dyn/$m.onnx" --dim batch=17 --library "$work/dynlib/$m.so" > "$work/run.log" 2>&1; then
      echo "batch 17 was not refused"; exit 1
    fi
    grep -q "batch = 17, outside the sizes the library was compiled for, 1..16" "$work/run.log" ||
      { cat "$work/run.log"; exit 1; }
    passed=$(( passed + 1 ))
  done
  # A dynamic sequence length (not separable: attention mixes positions): the GPT-2 block and
  # the BERT-shaped encoder exported with symbolic batch and sequence, compiled for the
  # sequence lengths 32, 77 and 128, a function each; GPT-2 in one library with its batch
  # too (1..4, from functions at 1 and 2), BERT at batch 2. Each run against the reference at
  # two sizes, against ONNX Runtime at a third; a length not listed refused.
  for n in gpt2_block bert_encoder; do
    "$WRITE" --dynamic-batch --dynamic-seq "$work/seq" 64 "$n" > /dev/null
    m=${n}_dynamo_dynbatch_dynseq
    case "$n" in
      gpt2_block) batch=(--dim batch=1..4 --buckets 1,2) at=(1 4 3) ;;
      *) batch=(--dim batch=2) at=(2 2 2) ;;
    esac
    "$OPFUSE" compile "$work/seq/$m.onnx" "${batch[@]}" --dim seq=32,77,128 --shared --out "$work/seqlib" > "$work/compile.log" ||
      { cat "$work/compile.log"; exit 1; }
    for k in 0 1; do
      s=$([ $k = 0 ] && echo 32 || echo 128)
      "$OPFUSE" run "$work/seq/$m.onnx" --dim batch=${at[$k]} --dim seq=$s --library "$work/seqlib/$m.so" --check > "$work/run.log" ||
        { cat "$work/run.log"; exit 1; }
      grep -q "reference: match" "$work/run.log" || { cat "$work/run.log"; exit 1; }
    done
    ort_inputs "$work/seq/$m.onnx" "$work/seqin_$m" batch=${at[2]},seq=77
    run_vs_ort "$work/seq/$m.onnx" "$work/seqlib/$m.so" "$work/seqin_$m" "seq = 77"
    if "$OPFUSE" run "$work/seq/$m.onnx" --dim batch=${at[2]} --dim seq=50 --library "$work/seqlib/$m.so" > "$work/run.log" 2>&1; then
      echo "seq 50 was not refused"; exit 1
    fi
    grep -q "seq = 50, not one of the sizes the library was compiled for: 32, 77, 128" "$work/run.log" ||
      { cat "$work/run.log"; exit 1; }
    passed=$(( passed + 3 ))
  done
}

WRITE=$1 OPFUSE=$2 SRC=$3
case "$stage" in
  cnn)
    compare_corpus resnet18 mobilenet_v2 efficientnet_b0
    # ResNet-50's bottlenecks (1x1 convs of 256-2048 channels, the stride in the 3x3) at 64x64
    # images: its JIT compile, not its size, is this test's cost (about 15 s a style).
    compare_corpus --image 64 resnet50
    # The writer: one exporter's style on request (tools/run.sh writes the dynamo ones), and a
    # network it does not know refused with the names it does.
    "$WRITE" --style dynamo "$work/style" 64 resnet18 > /dev/null
    test -s "$work/style/resnet18_dynamo.onnx.data" && test ! -e "$work/style/resnet18_torchscript.onnx"
    if "$WRITE" "$work/style" 64 resnet51 > "$work/write.log" 2>&1; then echo "resnet51 was written"; exit 1; fi
    grep -q "no network 'resnet51' (resnet18, resnet50," "$work/write.log" || { cat "$work/write.log"; exit 1; }
    ;;
  transformers) compare_corpus vit_tiny bert_encoder gpt2_block ;;
  aot) aot "${4:-}" ;;
  dynamic) dynamic ;;
  *) echo "unknown stage '$stage' (cnn, transformers, aot, dynamic)"; exit 2 ;;
esac
echo "$passed passed, 0 failed"
