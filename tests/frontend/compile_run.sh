#!/usr/bin/env bash
# opfuse compile / opfuse run on the transformer block exported at opset 13.
# Usage: compile_run.sh WRITE_ONNX_BLOCKS OPFUSE
set -euo pipefail
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$1" "$work/models" > /dev/null
model="$work/models/transformer_encoder_opset13.onnx"
"$2" compile "$model" --target host --out "$work/lib" > "$work/compile.log"
for f in transformer_encoder_opset13.a transformer_encoder_opset13.h \
         transformer_encoder_opset13.plan.json; do
  test -s "$work/lib/$f" || { echo "missing $f"; cat "$work/compile.log"; exit 1; }
done
grep -q "canonicalize: layer_norm_affine" "$work/lib/transformer_encoder_opset13.plan.json"
grep -q "canonicalize: gelu_erf" "$work/lib/transformer_encoder_opset13.plan.json"
grep -q "int transformer_encoder_opset13(" "$work/lib/transformer_encoder_opset13.h"
"$2" run "$model" --check --reps 3 --outputs "$work/out" | tee "$work/run.log"
grep -q "reference: match" "$work/run.log"
test -s "$work/out/y.npy"
# The per-group breakdown as JSON: the plan's groups, in order, each timed (every group's
# productions stamped, the output's copy with its producer's group) and predicted.
"$2" run "$model" --breakdown-json "$work/breakdown.json" > "$work/breakdown.log"
python3 - "$work/breakdown.json" "$work/lib/transformer_encoder_opset13.plan.json" <<'PY'
import json, sys
b, plan = (json.load(open(f)) for f in sys.argv[1:3])
groups = [g["nodes"] for g in plan["groups"]]
assert [g["nodes"] for g in b["groups"]] == groups, "breakdown groups differ from the plan's"
assert [g["group"] for g in b["groups"]] == list(range(len(groups)))
assert all(g["measured_s"] > 0 and g["predicted_s"] > 0 for g in b["groups"]), b["groups"]
assert b["runs"] >= 20
PY
# The unfused plan compiled beside the fused one and alternated (what `opfuse demo` times the
# networks with): both medians over 7 runs each, both kernel counts; not with --library.
"$2" plan "$model" --no-fusion --json "$work/unfused.json" > /dev/null
"$2" run "$model" --check --reps 7 --compare-plan "$work/unfused.json" > "$work/cmp.log"
grep -q "^time: median .* ms over 7 runs" "$work/cmp.log" || { cat "$work/cmp.log"; exit 1; }
grep -q "^time, --compare-plan: median .* ms over 7 runs" "$work/cmp.log" || { cat "$work/cmp.log"; exit 1; }
ops=$(sed -n 's/^plan: [0-9]* kernels for \([0-9]*\) ops$/\1/p' "$work/cmp.log")
grep -q "^compare plan: $ops kernels for $ops ops" "$work/cmp.log" || { cat "$work/cmp.log"; exit 1; }
grep -q "reference: match" "$work/cmp.log"
if "$2" run "$model" --reps 3 --compare-plan "$work/unfused.json" --library "$work/none.so" 2> "$work/err.log"; then exit 1; fi
grep -q "compare-plan compares two JIT plans" "$work/err.log"
# The output as an input (raw float32 rejected when the size is wrong, .npy accepted).
head -c 12 /dev/zero > "$work/bad.bin"
if "$2" run "$model" --input "x=$work/bad.bin" 2> "$work/err.log"; then exit 1; fi
grep -q "needs 2048" "$work/err.log"
# The host profile as the planner uses it, and a calibrated copy (bench/networks/calibrate.py
# writes such): the linears at a fifth of the host's own share of the peak are predicted
# slower, by the plan's own FLOPs by class. (A fifth of what this host measured, not a fixed
# share: a fresh profile measured on a busy machine gave the linears 0.38 of the peak, and a
# fixed 0.2 then predicted only 1.9x slower.)
"$2" calibrate --host --out "$work/host.json" > /dev/null
python3 - "$work/host.json" "$work/cal.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "opfuse.profile" and p["peak_flops_f32"] > 0
p["anchor_efficiency"] = {"linear": p.get("anchor_efficiency", {}).get("linear", 1.0) / 5}
json.dump(p, open(sys.argv[2], "w"))
PY
"$2" plan "$model" --json "$work/host-plan.json" --profile "$work/host.json" > /dev/null
"$2" plan "$model" --json "$work/cal-plan.json" --profile "$work/cal.json" > /dev/null
python3 - "$work/host-plan.json" "$work/cal-plan.json" <<'PY'
import json, sys
host, cal = (json.load(open(f))["groups"] for f in sys.argv[1:3])
by_nodes = {tuple(c["nodes"]): c for c in cal}
lin = [(h, by_nodes[tuple(h["nodes"])]) for h in host
       if h["estimate"]["flops_by_class"].get("linear", 0) > 0 and tuple(h["nodes"]) in by_nodes]
assert lin, "no group with a linear"
for h, c in lin:
    assert c["estimate"]["t_compute_s"] > 2 * h["estimate"]["t_compute_s"], (h, c)
PY
echo "1 passed, 0 failed"
