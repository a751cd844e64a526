#!/usr/bin/env python3
"""The zoo in PyTorch, eager and torch.compile: the peer a user would run instead.

    python3 bench/torch_zoo.py --models models/cpu --device cpu --out torch_cpu.json
    python3 bench/torch_zoo.py --models models/gpu --device cuda --out torch_gpu.json

Each graph file (opfuse.graph JSON) is interpreted op by op with torch functions, in the
graph's own layouts (NHWC tensors go through channels-last convolutions), params drawn
uniformly from their "init" ranges. Timed like the demo (warm-up, then calls until the time
budget, median), with a device sync per call on CUDA. Writes {"results": [{model, strategy
("pytorch_eager" | "torch_compile"), size, median_s, p99_s}]}, the format
bench/compare_runs.py and the demo's results share. A model whose torch.compile fails is
reported with its error, not timed.
"""
import argparse
import glob
import json
import os
import time

import torch
import torch.nn.functional as F


def channel_axis(layout, rank):
    return rank - 1 if layout == "NHWC" else 1


def to_nchw(x, layout):
    return x.permute(0, 3, 1, 2) if layout == "NHWC" else x


def from_nchw(y, layout):
    return y.permute(0, 2, 3, 1) if layout == "NHWC" else y


def per_channel(v, x, axis):
    shape = [1] * x.dim()
    shape[axis] = -1
    return v.reshape(shape)


class Model:
    """One graph, its params as tensors on `device`, and forward() in torch ops."""

    def __init__(self, graph, device):
        self.g = graph
        gen = torch.Generator().manual_seed(3)
        self.params = {}
        for p in graph["params"]:
            lo, hi = p.get("init", [-0.1, 0.1])
            t = torch.rand(p["shape"], generator=gen) * (hi - lo) + lo
            self.params[p["name"]] = t.to(device)
        self.inputs = [torch.rand(i["shape"], generator=gen).to(device) for i in graph["inputs"]]
        last_use = {}
        for k, n in enumerate(graph["nodes"]):
            for a in n["inputs"]:
                last_use[a] = k
        keep = set(graph["outputs"]) | set(self.params) | {i["name"] for i in graph["inputs"]}
        self.dead_after = [[] for _ in graph["nodes"]]
        for a, k in last_use.items():
            if a not in keep:
                self.dead_after[k].append(a)
        # Layout of every tensor: inputs declare it; an op's output keeps its first input's.
        self.layout = {i["name"]: i.get("layout", "none") for i in graph["inputs"]}
        for n in graph["nodes"]:
            self.layout[n["name"]] = self.layout.get(n["inputs"][0], "none")

    def forward(self, *inputs):
        env = dict(self.params)
        for i, x in zip(self.g["inputs"], inputs):
            env[i["name"]] = x
        for k, n in enumerate(self.g["nodes"]):
            env[n["name"]] = self.op(n, [env[a] for a in n["inputs"]])
            # Intermediates die after their last reader, as in a module's forward: kept to
            # the end, each call would fault in fresh pages for all of them.
            for a in self.dead_after[k]:
                del env[a]
        return [env[o] for o in self.g["outputs"]]

    def op(self, n, a):
        op, at = n["op"], n.get("attrs", {})
        layout = self.layout[n["inputs"][0]]
        x = a[0]
        binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
        if op in binary:
            return binary[op](x, a[1])
        unary = {"relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}
        if op in unary:
            return unary[op](x)
        if op == "leaky_relu":
            return F.leaky_relu(x, at.get("alpha", 0.01))
        if op == "gelu":
            return F.gelu(x, approximate=at.get("approximate", "none"))
        if op == "bias_add":
            return x + per_channel(a[1], x, at.get("axis", -1) % x.dim())
        if op == "batch_norm":
            c = channel_axis(layout, x.dim())
            gamma, beta, mean, var = (per_channel(v, x, c) for v in a[1:5])
            return (x - mean) * gamma * torch.rsqrt(var + at.get("epsilon", 1e-5)) + beta
        if op == "conv2d":
            pads = at.get("pads", [0, 0, 0, 0])
            y = F.conv2d(to_nchw(x, layout), a[1], a[2] if len(a) > 2 else None,
                         stride=at.get("strides", [1, 1]), padding=(pads[0], pads[1]),
                         dilation=at.get("dilations", [1, 1]), groups=at.get("groups", 1))
            return from_nchw(y, layout)
        if op in ("max_pool", "avg_pool"):
            pads = at.get("pads", [0, 0, 0, 0])
            pool = F.max_pool2d if op == "max_pool" else F.avg_pool2d
            k = at["kernel"]
            y = pool(to_nchw(x, layout), k, stride=at.get("strides", k), padding=(pads[0], pads[1]))
            return from_nchw(y, layout)
        if op == "global_avg_pool":
            dims = (1, 2) if layout == "NHWC" else (2, 3)
            return x.mean(dim=dims, keepdim=True)
        if op == "linear":
            y = x @ a[1]
            return y + a[2] if len(a) > 2 else y
        if op == "matmul":
            return x @ a[1]
        if op == "transpose":
            return x.permute(*at["perm"])
        if op == "reshape":
            return x.reshape(at["shape"])
        if op == "softmax":
            return F.softmax(x, dim=at.get("axis", -1))
        if op == "layer_norm":
            axis = at.get("axis", -1) % x.dim()
            return F.layer_norm(x, x.shape[axis:], a[1] if len(a) > 1 else None,
                                a[2] if len(a) > 2 else None, at.get("epsilon", 1e-5))
        raise NotImplementedError(f"node {n['name']}: op '{op}' has no torch mapping here")


def time_calls(fn, args, device, budget_s):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        for _ in range(3):
            fn(*args)
        sync()
        t, start = [], time.perf_counter()
        while len(t) < 5 or (time.perf_counter() - start < budget_s and len(t) < 2000):
            t0 = time.perf_counter()
            fn(*args)
            sync()
            t.append(time.perf_counter() - t0)
    t.sort()
    return t[len(t) // 2], t[min(len(t) - 1, int(len(t) * 0.99))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="models/cpu", help="folder of graph JSON files")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--seconds", type=float, default=1.0, help="timing budget per model")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--model", help="only this model (its graph file's name)")
    ap.add_argument("--out", default="torch_zoo.json")
    o = ap.parse_args()
    if o.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_zoo: --device cuda, but PyTorch sees no CUDA device")
    size = os.path.basename(os.path.normpath(o.models))
    results = []
    paths = sorted(glob.glob(os.path.join(o.models, "*.json")))
    if o.model:
        paths = [p for p in paths if os.path.basename(p) == o.model + ".json"]
    for path in paths:
        with open(path) as f:
            graph = json.load(f)
        m = Model(graph, o.device)
        strategies = [("pytorch_eager", m.forward)]
        if not o.no_compile:
            strategies.append(("torch_compile", torch.compile(m.forward)))
        for name, fn in strategies:
            row = {"model": graph["name"], "strategy": name, "size": size, "target": o.device}
            try:
                med, p99 = time_calls(fn, m.inputs, o.device, o.seconds)
                row.update(median_s=med, p99_s=p99)
                print(f"{graph['name']:<14} {name:<14} {med * 1e6:12.1f} us", flush=True)
            except Exception as e:  # a compile failure is a result, not a crash
                row["error"] = f"{type(e).__name__}: {e}"[:500]
                print(f"{graph['name']:<14} {name:<14} failed: {row['error'][:120]}", flush=True)
            results.append(row)
    with open(o.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": o.device, "results": results}, f,
                  indent=1)
    print(f"wrote {o.out}")


if __name__ == "__main__":
    main()
