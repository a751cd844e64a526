#!/usr/bin/env bash
# Installs opfuse from BUILD into a fresh prefix, builds the outside project against it (ResNet-18
# from the project's ONNX writer, its dynamo export with external data), runs it, and compares
# ResNet-18's logits from both libraries with the fused JIT run, itself checked against the
# reference executor.
#   run.sh BUILD_DIR CMAKE HALIDE_DIR HALIDE_HELPERS_DIR WRITE_NETWORKS OPFUSE
set -euo pipefail
build=$1 cmake=$2 halide=$3 helpers=$4 write_networks=$5 opfuse=$6
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$write_networks" "$work/models" 224 resnet18 > /dev/null
model="$work/models/resnet18_dynamo.onnx"
"$cmake" --install "$build" --prefix "$work/prefix" >/dev/null
"$cmake" -S "$(dirname "$0")" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -Dopfuse_DIR="$work/prefix/lib/cmake/opfuse" -DHalide_DIR="$halide" -DHalideHelpers_DIR="$helpers" \
  -DRESNET18_ONNX="$model" >/dev/null
"$cmake" --build "$work/build" >/dev/null
"$work/build/consumer"
grep -q "int resnet18_host(struct halide_buffer_t \*_x_buffer, struct halide_buffer_t \*_logits_out_buffer);" \
  "$work/build/resnet18_host.h" || { echo "the entry point takes more than x and the logits"; exit 1; }
grep -q "int resnet18_file_host(struct halide_buffer_t\* _x_buffer, struct halide_buffer_t\* _logits_out_buffer);" \
  "$work/build/resnet18_file_host.h" || { echo "the weights file's entry point takes more than x and the logits"; exit 1; }
"$venv/bin/python" -c "import numpy as np; np.random.default_rng(3).uniform(-1, 1, 3*224*224).astype(np.float32).tofile('$work/x.bin')"
"$work/build/run_resnet18" resnet18 "$work/x.bin" "$work/y.bin"
# The weights file's library, moved away from its build folder: it finds its weights beside
# the program.
mkdir "$work/deployed"
cp "$work/build/run_resnet18" "$work/build/resnet18_file_host.weights" "$work/deployed/"
rm "$work/build/resnet18_file_host.weights"
"$work/deployed/run_resnet18" resnet18_file "$work/x.bin" "$work/y_file.bin"
"$opfuse" run "$model" --input "x=$work/x.bin" --outputs "$work/jit" --check | grep -q "reference: match"
"$venv/bin/python" - "$work/jit/logits.npy" "$work/y.bin" "$work/y_file.bin" <<'PY'
import sys
import numpy as np
want = np.load(sys.argv[1]).reshape(-1)
ok = True
for path in sys.argv[2:]:
    got = np.fromfile(path, dtype=np.float32)
    err = float(np.abs(got - want).max())
    good = got.shape == want.shape and bool(np.all(np.abs(got - want) <= 2e-4 + 1e-4 * np.abs(want)))
    print(f"{path.split('/')[-1]}: library vs fused JIT: max |error| {err:.2e}")
    ok = ok and good
sys.exit(0 if ok else 1)
PY
echo "$(du -h "$work/build/libresnet18_host.a" 2>/dev/null | cut -f1) library with the weights inside"
