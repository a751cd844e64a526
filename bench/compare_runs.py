#!/usr/bin/env python3
"""Ratio of two benchmark runs: bench/compare_runs.py OLD.json NEW.json

Reads any results file the project writes: the demo's results.json, bench_gpu's and
torch_zoo.py's JSON ({"results": [{model, strategy, median_s, ...}]}), bench/onnx's
onnx_blocks.json, or Google Benchmark's --benchmark_out JSON (bench_zoo, bench_ew_chain).
Rows are matched by (model, strategy[, size]); the ratio is old time / new time, so > 1 means
the new run is faster. Runs on a shared machine are noisy: compare ratios within one run
before reading much into a ratio across runs."""
import json
import sys

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def rows(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    if isinstance(data, dict) and "benchmarks" in data:  # Google Benchmark
        for b in data["benchmarks"]:
            if b.get("run_type", "iteration") != "iteration" or "real_time" not in b:
                continue
            parts = b["name"].split("/")
            key = (parts[0], parts[1] if len(parts) > 1 else "")
            out[key] = b["real_time"] * UNIT.get(b.get("time_unit", "ns"), 1e-9)
        return out
    results = data["results"] if isinstance(data, dict) else data
    for r in results:
        if "opfuse_s" in r:  # bench/onnx: opfuse and ONNX Runtime in one row
            out[(r["model"], "opfuse")] = r["opfuse_s"]
            out[(r["model"], "onnxruntime")] = r["onnxruntime_s"]
            if "pytorch_eager_s" in r:
                out[(r["model"], "pytorch_eager")] = r["pytorch_eager_s"]
        elif r.get("median_s"):
            key = (r["model"], r["strategy"]) + ((r["size"],) if "size" in r else ())
            out[key] = r["median_s"]
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = rows(sys.argv[1]), rows(sys.argv[2])
    common = [k for k in old if k in new]
    if not common:
        sys.exit("compare_runs: the two files have no (model, strategy) in common")
    print(f"{'model':<34} {'strategy':<16} {'old us':>10} {'new us':>10} {'old/new':>8}")
    for k in sorted(common):
        print(f"{k[0]:<34} {'/'.join(k[1:]):<16} {old[k] * 1e6:>10.2f} {new[k] * 1e6:>10.2f}"
              f" {old[k] / new[k]:>8.3f}")
    for k in sorted(set(old) ^ set(new)):
        print(f"{k[0]:<34} {'/'.join(k[1:]):<16} only in {'old' if k in old else 'new'}")


if __name__ == "__main__":
    main()
