#!/usr/bin/env python3
"""The five blocks of tests/frontend/blocks.cpp as PyTorch modules, exported by
torch.onnx.export at opsets 13 and 17 (the TorchScript exporter, which decomposes LayerNorm
before opset 17, GELU into Erf, SiLU into Sigmoid and Mul, and folds BatchNorm into Conv in
eval mode).

    python3 export_torch_blocks.py OUT_DIR [SCALE]

Writes OUT_DIR/<block>_torch_opset{13,17}.onnx, and OUT_DIR/torch_eager.json: each module's
eager time (no_grad, 2 threads, median of 200 calls after warm-up) under both file names, for
bench/onnx's PyTorch column. Exit status 77 (a skip for ctest) when PyTorch or its ONNX
exporter's dependencies are missing.
"""
import json
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import onnx  # noqa: F401  (the exporter needs it)
except ImportError as e:
    print(f"skipped: {e.name} is not installed (OPFUSE_WITH_TORCH=1 tools/setup.sh)")
    sys.exit(77)


class DepthwiseSeparable(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.pw = nn.Conv2d(16, 32, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)

    def forward(self, x):
        return F.relu6(self.bn2(self.pw(F.relu6(self.bn1(self.dw(x))))))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return F.relu(self.c2(F.relu(self.c1(x))) + x)


class TransformerEncoder(nn.Module):
    def __init__(self, d=32, f=64):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, f), nn.Linear(f, d)
        self.scale = d ** 0.5

    def forward(self, x):
        h = self.ln1(x)
        s = self.q(h) @ self.k(h).transpose(1, 2) / self.scale
        x1 = x + self.proj(torch.softmax(s, dim=-1) @ self.v(h))
        x2 = x1 + self.fc2(F.gelu(self.fc1(self.ln2(x1))))
        return x2.reshape(x2.shape[0], -1)


class DetectionHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(16, 16, 3, padding=1)
        self.box = nn.Conv2d(16, 12, 1)
        self.cls = nn.Conv2d(16, 6, 1)

    def forward(self, x):
        f = F.relu(self.stem(x))
        boxes = torch.flatten(self.box(f).permute(0, 2, 3, 1), 1)
        return boxes, torch.sigmoid(self.cls(f))


class SwiGLU(nn.Module):
    def __init__(self, d=32, f=48):
        super().__init__()
        self.gate, self.up = nn.Linear(d, f), nn.Linear(d, f)
        self.down = nn.Linear(f, d)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def blocks(s):
    return {
        "depthwise_separable": (DepthwiseSeparable(), (1, 16, 12 * s, 12 * s)),
        "residual": (Residual(), (1, 8, 10 * s, 10 * s)),
        "transformer_encoder": (TransformerEncoder(), (1, 16 * s, 32)),
        "detection_head": (DetectionHead(), (1, 16, 8 * s, 8 * s)),
        "swiglu_mlp": (SwiGLU(), (1, 8 * s, 32)),
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    eager = {}
    for name, (module, shape) in blocks(scale).items():
        module.eval()
        # BatchNorm statistics away from the identity, so that folding them matters.
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        x = torch.rand(shape)
        for opset in (13, 17):
            path = os.path.join(out, f"{name}_torch_opset{opset}.onnx")
            torch.onnx.export(module, (x,), path, opset_version=opset, dynamo=False,
                              input_names=["x"], do_constant_folding=True)
            print(f"wrote {path}")
        with torch.no_grad():
            for _ in range(10):
                module(x)
            times = []
            for _ in range(200):
                t0 = time.perf_counter()
                module(x)
                times.append(time.perf_counter() - t0)
        for opset in (13, 17):
            eager[f"{name}_torch_opset{opset}.onnx"] = statistics.median(times)
    with open(os.path.join(out, "torch_eager.json"), "w") as f:
        json.dump({"torch": torch.__version__, "threads": 2, "eager_s": eager}, f, indent=1)


if __name__ == "__main__":
    main()
