#!/usr/bin/env python3
"""opfuse on the networks PyTorch exported (tests/frontend/export_torch_networks.py), judged
against PyTorch's own outputs.

    python3 torch_networks.py --opfuse build/tools/opfuse DIR [--only NAME,..] [--check]
                              [--reps N] [--out results.json]

For each network and exporter in DIR/manifest.json: `opfuse run MODEL --input ...` (the fused
plan, JIT), its outputs compared with PyTorch's eager outputs. A network matches when every
element is within 2e-4 + 1e-4 |torch| of PyTorch's, the absolute part times the output's
largest magnitude where it passes 1 (bench/onnx/tolerance.py: the graph tolerance, for float32
paths that differ in summation order). With --check opfuse's reference executor must agree too.
Prints a table (imported and right, max |error|, the first line of any error) and writes it as
JSON. Exit 1 if any export that PyTorch wrote fails to import, run or match.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
from tolerance import within  # noqa: E402


def run_one(opfuse, folder, model, entry, reps, check, timeout):
    args = [opfuse, "run", os.path.join(folder, model)]
    for name, f in entry["inputs"].items():
        args += ["--input", f"{name}={os.path.join(folder, f)}"]
    if reps:
        args += ["--reps", str(reps)]
    if check:
        args += ["--check"]
    with tempfile.TemporaryDirectory() as work:
        try:
            run = subprocess.run(args + ["--outputs", work], capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "error": f"no answer in {timeout} s"}
        if run.returncode != 0:
            lines = [l for l in (run.stderr + run.stdout).splitlines() if l.strip()]
            return {"status": "error", "error": lines[-1] if lines else f"exit {run.returncode}"}
        row = {"status": "ok", "max_abs_error": 0.0, "max_abs_torch": 0.0}
        if check and "reference: match" not in run.stdout:
            row["status"] = "reference mismatch"
        m = re.search(r"time: median ([0-9.e+-]+) ms", run.stdout)
        if m:
            row["opfuse_ms"] = float(m.group(1))
        for name, f in entry["outputs"].items():
            want = np.load(os.path.join(folder, f))
            path = os.path.join(work, name + ".npy")
            if not os.path.exists(path):
                return {"status": "error", "error": f"no output '{name}' written"}
            got = np.load(path).reshape(want.shape)
            diff = np.abs(got.astype(np.float64) - want)
            row["max_abs_error"] = max(row["max_abs_error"], float(diff.max()))
            row["max_abs_torch"] = max(row["max_abs_torch"], float(np.abs(want).max()))
            if not within(got, want):
                row["status"] = "mismatch"
        return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out", default="")
    ap.add_argument("dir")
    a = ap.parse_args()
    manifest = json.load(open(os.path.join(a.dir, "manifest.json")))
    only = [n for n in a.only.split(",") if n]
    rows, bad = [], 0
    print(f"PyTorch {manifest['torch']}")
    print(f"{'network':20} {'exporter':12} {'result':10} {'max|err|':>9} {'max|torch|':>10} "
          f"{'ms':>8}  error")
    for name, entry in manifest["networks"].items():
        if only and name not in only:
            continue
        for exporter, e in entry["exports"].items():
            if "error" in e:
                row = {"status": "export failed", "error": e["error"].splitlines()[0]}
            else:
                row = run_one(a.opfuse, a.dir, e["model"], entry, a.reps, a.check, a.timeout)
                bad += row["status"] != "ok"
            row.update(network=name, exporter=exporter)
            rows.append(row)
            err = f"{row['max_abs_error']:.1e}" if "max_abs_error" in row else "-"
            ref = f"{row['max_abs_torch']:.2f}" if "max_abs_torch" in row else "-"
            ms = f"{row['opfuse_ms']:.2f}" if "opfuse_ms" in row else "-"
            print(f"{name:20} {exporter:12} {row['status']:10} {err:>9} {ref:>10} {ms:>8}  "
                  f"{row.get('error', '')[:300]}", flush=True)
    ok = sum(r["status"] == "ok" for r in rows)
    print(f"{ok} of {len(rows)} exports imported, ran and matched PyTorch")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"torch": manifest["torch"], "results": rows}, f, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
