"""Fits the cost model to this machine from timed groups: a calibrated hardware profile.

The plain roofline predicts each anchor at the FMA peak and each group's traffic at the
bandwidth of the cache level that holds it. opfuse's schedules attain a share of the peak that
depends on the anchor's shape class (a depthwise conv is load-bound, a 3x3 conv near the peak),
and a network's tensors between groups come back slower than a cache-sized benchmark streams
them. This fits both from `breakdown.py`'s measurements (each group timed in the network):

    T = (max(sum_c F_c / (P * eta_c), T_memory) + T_overhead) * (1 + a_cache if memory-bound)

eta_c per anchor class (the cost model's anchor_class; FLOPs of other ops stay at P) and a_cache
(7.4.1), chosen to put the most groups within 1.5x of their measured time, then the smallest
sum of |log(predicted / measured)|. It writes the host profile with them (use it with
`--profile FILE`) and prints how many groups each model predicts within 1.5x: the host's,
the calibrated one on the networks it was fitted on, and the calibrated one fitted without
each network in turn (leave one out: how well it predicts a network it has not seen).

Usage: python calibrate.py --opfuse build/tools/opfuse --breakdown OUT/breakdown.json
                           --out OUT/calibrated-profile.json MODEL.onnx...
(the models breakdown.py timed, in the same order)
"""
import argparse
import json
import math
import os
import subprocess
import tempfile

ETAS = [round(0.05 * k, 2) for k in range(1, 21)]
ALPHAS = [0.25 * k for k in range(0, 21)]


def host_profile(opfuse, work):
    """The host's hardware profile as opfuse measured it (`opfuse calibrate --host`)."""
    path = os.path.join(work, "host.json")
    subprocess.run([opfuse, "calibrate", "--host", "--out", path], check=True,
                   capture_output=True)
    with open(path) as f:
        return json.load(f)


def predict(g, peak, eta, alpha):
    tc = sum(f * g["recompute"] / (peak * eta.get(c, 1.0)) for c, f in g["flops"].items())
    t = max(tc, g["tm"]) + g["to"]
    return t * (1 + alpha) if g["tm"] > tc else t


def score(groups, peak, eta, alpha):
    within, err = 0, 0.0
    for g in groups:
        r = predict(g, peak, eta, alpha) / g["measured"]
        within += 1 / 1.5 <= r <= 1.5
        err += abs(math.log(r))
    return within, -err


def fit(groups, peak):
    """Coordinate search over a_cache and each class's eta, from the plain roofline."""
    classes = sorted({c for g in groups for c in g["flops"] if c})
    eta, alpha = {c: 1.0 for c in classes}, 0.0
    best = score(groups, peak, eta, alpha)
    for _ in range(4):
        for a in ALPHAS:
            s = score(groups, peak, eta, a)
            if s > best:
                best, alpha = s, a
        for c in classes:
            for e in ETAS:
                s = score(groups, peak, {**eta, c: e}, alpha)
                if s > best:
                    best, eta = s, {**eta, c: e}
    return eta, alpha, best[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opfuse", required=True)
    ap.add_argument("--breakdown", required=True, help="breakdown.py's JSON")
    ap.add_argument("--out", required=True, help="the calibrated profile to write")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        profile = host_profile(a.opfuse, work)
        with open(a.breakdown) as f:
            timed = {r["model"]: r for r in json.load(f)["results"]}
        groups = []
        for model in a.models:
            name = os.path.basename(model)
            if name not in timed:
                raise SystemExit(f"{name}: not in {a.breakdown}")
            plan_path = os.path.join(work, "plan.json")
            subprocess.run([a.opfuse, "plan", model, "--json", plan_path], check=True,
                           capture_output=True)
            with open(plan_path) as f:
                plan = json.load(f)
            rows = timed[name]["rows"]
            if [g["nodes"] for g in plan["groups"]] != [r["nodes"] for r in rows]:
                raise SystemExit(f"{name}: the breakdown was timed on another plan; time it "
                                 "again with this opfuse and the host profile")
            for g, r in zip(plan["groups"], rows):
                e = g["estimate"]
                if r["measured_s"] <= 0:
                    continue
                groups.append({"model": name, "measured": r["measured_s"],
                               "flops": e["flops_by_class"], "recompute": e["recompute_factor"],
                               "tm": e["t_memory_s"], "to": e["t_overhead_s"],
                               "host_predicted": e["t_total_s"]})
    peak = profile["peak_flops_f32"]
    eta, alpha, within = fit(groups, peak)
    host_within = sum(1 / 1.5 <= g["host_predicted"] / g["measured"] <= 1.5 for g in groups)
    print(f"{len(groups)} groups of {len(a.models)} networks, timed on this machine "
          f"({profile['name']}, FMA peak {peak / 1e9:.0f} GFLOP/s)")
    print("  fitted: a_cache %.2f; eta %s" % (alpha, ", ".join(f"{c} {e:.2f}"
                                                                for c, e in eta.items())))
    print(f"  predicted within 1.5x: host profile {host_within}/{len(groups)}, calibrated "
          f"{within}/{len(groups)} (fitted on these groups)")
    held_out = 0
    for model in sorted({g["model"] for g in groups}):
        rest = [g for g in groups if g["model"] != model]
        mine = [g for g in groups if g["model"] == model]
        e, al, _ = fit(rest, peak) if rest else (eta, alpha, 0)
        k = score(mine, peak, e, al)[0]
        held_out += k
        print(f"    {model}: {k}/{len(mine)} within 1.5x, fitted without it")
    print(f"  leave one network out: {held_out}/{len(groups)} within 1.5x")
    profile["name"] = profile["name"] + "-calibrated"
    profile["alpha_cache"] = alpha
    # Classes these networks lack keep the host's measured shares.
    profile["anchor_efficiency"] = {**profile.get("anchor_efficiency", {}), **eta}
    with open(a.out, "w") as f:
        json.dump(profile, f, indent=2)
    print(f"wrote {a.out}: plan with --profile {a.out}")


if __name__ == "__main__":
    main()
