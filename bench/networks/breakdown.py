"""Where a network's time goes, per fused group, and whether fusing each group paid.

For each model: `opfuse run MODEL --breakdown-json` on the planner's plan (fused) and on the
unfused plan (`opfuse plan --no-fusion`: every op its own kernel), alternated ROUNDS times
(each group's productions timed in every run, medians over about a second of runs; medians
over the rounds). Per fused group: its measured time, the cost model's prediction, and the
sum of its ops' times when each runs alone; fusing paid where the group took less than its
ops alone ("=" when the two are within 2%). Also counted: the groups whose prediction is
within 1.5x of the measurement. And the ceiling of fusing epilogues: the unfused plan's
time over its anchors' kernels alone (what is left if every other kernel were free).

The stamps sit outside the groups' loops (two per root Func a run), so the timed totals are
the plain ones; each round also times both plans without them (`opfuse run --reps`), and
the network's line shows both. Time outside any group (allocations, the pipeline's start)
is "other".

Usage: python breakdown.py --opfuse build/tools/opfuse --out breakdown.json [--rounds 3] MODEL.onnx...
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile


def breakdown(opfuse, model, work, plan=None, profile=None):
    out = os.path.join(work, "breakdown.json")
    args = [opfuse, "run", model, "--breakdown-json", out] + (["--plan", plan] if plan else [])
    args += ["--profile", profile] if profile else []
    subprocess.run(args, capture_output=True, text=True, check=True)
    with open(out) as f:
        return json.load(f)


def plain_time(opfuse, model, plan=None, reps=20, profile=None):
    """The plan's median time through the JIT, without the stamps."""
    args = [opfuse, "run", model, "--reps", str(reps)] + (["--plan", plan] if plan else [])
    args += ["--profile", profile] if profile else []
    log = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"time: median ([0-9.e+-]+) ms", log).group(1)) * 1e-3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", help="plan (and predict) with this hardware profile, e.g. "
                    "calibrate.py's; default: the host's")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    report = []
    for model in a.models:
        with tempfile.TemporaryDirectory() as work:
            unf_plan = os.path.join(work, "unfused.plan.json")
            subprocess.run([a.opfuse, "plan", model, "--no-fusion", "--json", unf_plan] +
                           (["--profile", a.profile] if a.profile else []),
                           capture_output=True, check=True)
            with open(unf_plan) as f:  # the anchors: ops with an anchor class (cost model)
                anchor_ops = {g["nodes"][0] for g in json.load(f)["groups"]
                              if any(c for c in g["estimate"].get("flops_by_class", {}))}
            fused, unfused, plain = [], [], {"fused": [], "unfused": []}
            for _ in range(a.rounds):
                fused.append(breakdown(a.opfuse, model, work, profile=a.profile))
                unfused.append(breakdown(a.opfuse, model, work, unf_plan, a.profile))
                plain["fused"].append(plain_time(a.opfuse, model, profile=a.profile))
                plain["unfused"].append(plain_time(a.opfuse, model, unf_plan, profile=a.profile))
        plain = {k: statistics.median(v) for k, v in plain.items()}
        # Medians over the rounds: a fused group by its index, an op alone by its name.
        groups = fused[0]["groups"]
        alone = {}
        for r in unfused:
            for g in r["groups"]:
                alone.setdefault(g["nodes"][0], []).append(g["measured_s"])
        alone = {k: statistics.median(v) for k, v in alone.items()}
        rows, paid, decided, within = [], 0, 0, 0
        for i, g in enumerate(groups):
            measured = statistics.median(r["groups"][i]["measured_s"] for r in fused)
            ops_alone = sum(alone.get(n, 0.0) for n in g["nodes"])
            ratio = measured / g["predicted_s"] if g["predicted_s"] > 0 else None
            row = {"group": g["group"], "kind": g["kind"], "nodes": g["nodes"],
                   "measured_s": measured, "predicted_s": g["predicted_s"],
                   "ops_alone_s": ops_alone,
                   "each_alone_s": {n: alone.get(n, 0.0) for n in g["nodes"]}}
            if len(g["nodes"]) > 1 and abs(measured - ops_alone) > 0.02 * ops_alone:
                row["fusing_paid"] = measured < ops_alone
                paid += row["fusing_paid"]
                decided += 1
            within += ratio is not None and 1 / 1.5 <= ratio <= 1.5
            rows.append(row)
        # The most fusing ops after their anchors can save: every kernel of the unfused plan
        # that is not an anchor (conv, matmul, linear: its flops have an anchor class) gone, its
        # work free. Fusing anchors into anchors (with recomputed halos) could save more.
        anchors = statistics.median(sum(g["measured_s"] for g in r["groups"]
                                        if g["nodes"][0] in anchor_ops) for r in unfused)
        fused_groups = sum(len(g["nodes"]) > 1 for g in groups)
        total = {k: statistics.median(sum(g["measured_s"] for g in r["groups"]) +
                                      r.get("other_s", 0.0) for r in runs)
                 for k, runs in (("fused", fused), ("unfused", unfused))}
        other = statistics.median(r.get("other_s", 0.0) for r in fused)
        name = os.path.basename(model)
        print(f"\n{name}: timed fused {total['fused'] * 1e3:.3f} ms a run (other "
              f"{other * 1e3:.3f}), unfused {total['unfused'] * 1e3:.3f} ms "
              f"(unfused/fused {total['unfused'] / total['fused']:.2f}); without the stamps "
              f"fused {plain['fused'] * 1e3:.3f} ms, unfused {plain['unfused'] * 1e3:.3f} ms "
              f"(unfused/fused {plain['unfused'] / plain['fused']:.2f})")
        print(f"  unfused, the anchors' kernels take {anchors * 1e3:.3f} ms, the other "
              f"{(total['unfused'] - anchors) * 1e3:.3f} ms (allocations and the pipeline's start "
              f"included): fusing epilogues reaches at most unfused/fused "
              f"{total['unfused'] / anchors:.2f}")
        print(f"  fusing paid in {paid} of the {decided} fused groups 2% or more from their ops "
              f"alone ({fused_groups} fused groups in all); predicted within 1.5x for {within} of "
              f"{len(groups)} groups")
        print(f"  {'grp':>4} {'kind':11} {'measured us':>12} {'predicted us':>12} "
              f"{'meas/pred':>9} {'ops alone us':>12} {'paid':>5}  nodes")
        for row in rows:
            nodes = row["nodes"][0] + (f" .. {row['nodes'][-1]} ({len(row['nodes'])} ops)"
                                       if len(row["nodes"]) > 1 else "")
            ratio = row["measured_s"] / row["predicted_s"] if row["predicted_s"] > 0 else 0.0
            verdict = ({True: "yes", False: "NO"}.get(row.get("fusing_paid"), "=")
                       if len(row["nodes"]) > 1 else "-")
            print(f"  {row['group']:>4} {row['kind']:11} {row['measured_s'] * 1e6:12.1f} "
                  f"{row['predicted_s'] * 1e6:12.1f} {ratio:9.2f} {row['ops_alone_s'] * 1e6:12.1f} "
                  f"{verdict:>5}  {nodes}")
        report.append({"model": name, "rounds": a.rounds, "fused_s": total["fused"],
                       "unfused_s": total["unfused"], "other_s": other,
                       "unstamped_fused_s": plain["fused"],
                       "unstamped_unfused_s": plain["unfused"],
                       "unfused_anchors_s": anchors,
                       "fused_groups": fused_groups, "fused_groups_decided": decided,
                       "fusing_paid": paid,
                       "groups": len(groups), "predicted_within_1_5x": within, "rows": rows})
    with open(a.out, "w") as f:
        json.dump({"timing": "each group's productions stamped (opfuse run --breakdown-json)",
                   "profile": a.profile or "host", "results": report},
                  f, indent=1)


if __name__ == "__main__":
    main()
