"""The demo's roofline plot: every kernel of results.json placed on this run's roofline.

Usage: python3 roofline_plot.py REPORT_DIR   (reads results.json, writes roofline.png)
x: operational intensity I = FLOPs / compulsory bytes; y: achieved GFLOP/s; the roofs are
P = min(P_peak, I * B) (7.3.1) for the DRAM and the last-level-cache bandwidth measured in the
same run.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out):
    d = json.load(open(f"{out}/results.json"))
    peak = d["peak_flops"] / 1e9
    fig, ax = plt.subplots(figsize=(8, 6))
    xs = [2 ** (i / 4) for i in range(-24, 48)]
    for bw, label, style in ((d["dram_bandwidth_Bps"], "DRAM", "k-"),
                             (d["llc_bandwidth_Bps"], "LLC", "k--")):
        ax.plot(xs, [min(peak, x * bw / 1e9) for x in xs], style, lw=1,
                label=f"roof: {label} {bw / 1e9:.0f} GB/s, peak {peak:.0f} GFLOP/s")
    markers = {"fused": "o", "unfused": "s", "Mullapudi2016": "^", "Adams2019": "v",
               "Li2018": "<", "oneDNN": "*", "OpenBLAS": "P"}
    for strategy, marker in markers.items():
        rows = [r for r in d["results"] if r["strategy"] == strategy and r["bytes"] > 0]
        if not rows:
            continue
        ax.scatter([r["flops"] / r["bytes"] for r in rows], [r["gflops"] for r in rows],
                   marker=marker, s=40, label=strategy)
        if strategy == "fused":
            for r in rows:
                ax.annotate(r["model"], (r["flops"] / r["bytes"], r["gflops"]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (FLOP / compulsory byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title("zoo kernels on this machine's measured roofline")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(f"{out}/roofline.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
