#!/usr/bin/env bash
# ResNet-18 (the dynamo export, weights in external data) compiled by `opfuse compile` into one
# library that carries its weights, called from a user's program with the image alone
# (run_resnet18.cpp), and its logits compared with the fused JIT run, itself checked against
# the reference executor.
# Usage: network_consumer.sh WRITE_NETWORKS OPFUSE CXX HALIDE_INCLUDE SOURCE_DIR
set -euo pipefail
venv="${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$1" "$work/models" 224 resnet18 > /dev/null
model="$work/models/resnet18_dynamo.onnx"
"$2" compile "$model" --target host --out "$work/lib" > "$work/compile.log"
grep -q "int resnet18_dynamo(struct halide_buffer_t \*_x_buffer, struct halide_buffer_t \*_logits_out_buffer);" \
  "$work/lib/resnet18_dynamo.h" || { echo "the entry point takes more than x and the logits"; exit 1; }
"$3" -O2 -std=c++17 -I "$work/lib" -I "$4" "$5/tests/frontend/run_resnet18.cpp" \
  "$work/lib/resnet18_dynamo.a" -lpthread -ldl -o "$work/run"
"$venv/bin/python" -c "import numpy as np; np.random.default_rng(3).uniform(-1, 1, 3*224*224).astype(np.float32).tofile('$work/x.bin')"
"$work/run" "$work/x.bin" "$work/y.bin"
"$2" run "$model" --input "x=$work/x.bin" --outputs "$work/jit" --check | grep -q "reference: match"
"$venv/bin/python" - "$work/y.bin" "$work/jit/logits.npy" <<'PY'
import sys
import numpy as np
got = np.fromfile(sys.argv[1], dtype=np.float32)
want = np.load(sys.argv[2]).reshape(-1)
err = float(np.abs(got - want).max())
ok = bool(np.all(np.abs(got - want) <= 2e-4 + 1e-4 * np.abs(want)))
print(f"library vs fused JIT: max |error| {err:.2e}")
sys.exit(0 if ok else 1)
PY
echo "$(du -h "$work/lib/resnet18_dynamo.a" | cut -f1) library (weights inside); 1 passed, 0 failed"
