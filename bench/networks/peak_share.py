"""Each anchor group's share of this machine's measured FMA peak (ResNet-50's 3x3 and 1x1 convs).

For each model: the planner's plan (`opfuse plan --json`: each group's FLOPs by anchor class),
each group's time in the network (`opfuse run --breakdown-json`, ROUNDS runs, medians), and
the FMA peak the host profile measured (`opfuse calibrate --host`). A group's attained rate is
its FLOPs over its time; its share is that rate over the peak. Per anchor class
(`conv_spatial`: 3x3, 7x7, strided; `conv_pointwise`: 1x1 of more than one pixel;
`conv_depthwise`; `linear`, `gemv`, `matmul`), the groups at >= --goal of the peak, and the
class's FLOPs over its time.
A group counts under the class of most of its FLOPs; groups without an anchor are left out.

Usage: python peak_share.py --opfuse build/tools/opfuse [--rounds 3] [--goal 0.6] [--out F]
                            MODEL.onnx...
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from calibrate import host_profile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--goal", type=float, default=0.6, help="share of the peak counted as met")
    ap.add_argument("--out", help="the per-group rows as JSON")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    report = []
    with tempfile.TemporaryDirectory() as work:
        profile = host_profile(a.opfuse, work)
        peak = profile["peak_flops_f32"]
        print(f"FMA peak {peak / 1e9:.0f} GFLOP/s ({profile['name']}); goal: "
              f">= {a.goal:.0%} of it")
        for model in a.models:
            plan_path = os.path.join(work, "plan.json")
            subprocess.run([a.opfuse, "plan", model, "--json", plan_path], check=True,
                           capture_output=True)
            with open(plan_path) as f:
                plan = json.load(f)
            runs = []
            for _ in range(a.rounds):
                out = os.path.join(work, "breakdown.json")
                subprocess.run([a.opfuse, "run", model, "--plan", plan_path,
                                "--breakdown-json", out], check=True, capture_output=True)
                with open(out) as f:
                    runs.append(json.load(f)["groups"])
            rows = []
            for i, g in enumerate(plan["groups"]):
                if [r[i]["nodes"] for r in runs] != [g["nodes"]] * len(runs):
                    raise SystemExit(f"{model}: group {i} timed is not the plan's")
                by_class = {c: f for c, f in g["estimate"]["flops_by_class"].items() if c}
                if not by_class:
                    continue
                cls = max(by_class, key=by_class.get)
                measured = statistics.median(r[i]["measured_s"] for r in runs)
                # The ops' own FLOPs, not a window's halo computed twice under compute_at.
                flops = sum(g["estimate"]["flops_by_class"].values())
                rows.append({"group": g["id"], "class": cls, "nodes": g["nodes"],
                             "flops": flops, "measured_s": measured,
                             "share": flops / measured / peak if measured > 0 else 0.0})
            name = os.path.basename(model)
            print(f"\n{name}:")
            print(f"  {'class':15} {'groups':>6} {'>= goal':>7} {'GFLOP':>8} {'ms':>8} "
                  f"{'GFLOP/s':>8} {'share':>6}  (min share, group)")
            for cls in sorted({r["class"] for r in rows}):
                mine = [r for r in rows if r["class"] == cls]
                f = sum(r["flops"] for r in mine)
                t = sum(r["measured_s"] for r in mine)
                low = min(mine, key=lambda r: r["share"])
                met = sum(r["share"] >= a.goal for r in mine)
                print(f"  {cls:15} {len(mine):6} {met:7} {f / 1e9:8.3f} {t * 1e3:8.3f} "
                      f"{f / t / 1e9:8.0f} {f / t / peak:6.0%}  ({low['share']:.0%}, "
                      f"{low['nodes'][0]})")
            report.append({"model": name, "peak_flops": peak, "rows": rows})
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"goal": a.goal, "results": report}, f, indent=1)


if __name__ == "__main__":
    main()
