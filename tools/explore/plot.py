"""Plots of an exploration folder: predicted vs measured time, and the Pareto front.

Usage: python3 plot.py OUT_DIR   (reads candidates.csv and pareto.json, writes two PNGs)
"""
import csv
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out):
    rows = [r for r in csv.DictReader(open(f"{out}/candidates.csv")) if r["ok"] == "1"]
    if not rows:
        return
    meas = [float(r["p50_ms"]) for r in rows]
    pred = [float(r["predicted_ms"]) for r in rows]
    cal = [float(r["calibrated_ms"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(meas, pred, s=14, label="roofline model")
    ax.scatter(meas, cal, s=14, marker="x", label="calibrated (7.4.1)")
    lo, hi = min(meas + pred + cal), max(meas + pred + cal)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured p50 (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title("predicted vs measured, every candidate")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/predicted_vs_measured.png", dpi=110)

    front = json.load(open(f"{out}/pareto.json"))
    mem = [float(r["peak_heap_mib"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(meas, mem, s=14, c="grey", label="candidates")
    fx = [f["p50_s"] * 1e3 for f in front]
    fy = [f["peak_heap_bytes"] / 2**20 for f in front]
    order = sorted(range(len(fx)), key=lambda i: fx[i])
    ax.step([fx[i] for i in order], [fy[i] for i in order], where="post", c="C3")
    ax.scatter(fx, fy, c="C3", s=30, label="Pareto front (7.4.2)")
    for r in rows:
        if r["origin"] in ("planner", "unfused"):
            ax.annotate(r["origin"], (float(r["p50_ms"]), float(r["peak_heap_mib"])))
    ax.ticklabel_format(useOffset=False, style="plain")
    ax.set_xlabel("measured p50 (ms)")
    ax.set_ylabel("peak heap of intermediates (MiB)")
    ax.set_title("latency vs memory")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/pareto.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
