#!/usr/bin/env python3
"""Standard networks from torchvision, timm and transformers (random weights: nothing is
downloaded), exported by both of PyTorch's ONNX exporters, with the inputs and PyTorch's own
outputs, so that opfuse can be judged against the framework that wrote the model.

    python3 export_torch_networks.py OUT_DIR [--only NAME,NAME] [--exporters torchscript,dynamo]

For each network NAME, writes
    OUT_DIR/NAME_torchscript.onnx     torch.onnx.export(dynamo=False, opset 17), weights inside
    OUT_DIR/NAME_dynamo.onnx(.data)   torch.onnx.export(dynamo=True, opset 20), every weight in
                                      NAME_dynamo.onnx.data, as the exporter saves large models
    OUT_DIR/NAME.in.INPUT.npy         the inputs (images in [0, 1), token ids, masks)
    OUT_DIR/NAME.out.OUTPUT.npy       PyTorch's eager outputs for them (eval, no_grad)
and OUT_DIR/manifest.json: per network its source, inputs, outputs and what each export did
(an exporter that failed is recorded with its error, not hidden). Exit 77 without PyTorch.
"""
import argparse
import json
import os
import sys
import traceback

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import onnx  # noqa: F401  (both exporters need it)
except ImportError as e:
    print(f"skipped: {e.name} is not installed (OPFUSE_WITH_TORCH=1 tools/setup.sh)")
    sys.exit(77)


class HiddenStates(nn.Module):
    """A transformers model returning its last hidden state as a plain tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args, return_dict=False)[0]


def vision(name, make, size=224, batch=1):
    def build():
        return make(), {"x": torch.rand(batch, 3, size, size)}, ["logits"]
    return name, build


def tv(fn):
    import torchvision
    return getattr(torchvision.models, fn)(weights=None)


def timm_model(fn):
    import timm
    return timm.create_model(fn, pretrained=False)


def bert():
    from transformers import BertConfig, BertModel
    # BERT-base's shape (hidden 768, 12 heads, FFN 3072, vocab 30522), all 12 layers.
    model = BertModel(BertConfig(attn_implementation="eager"), add_pooling_layer=False)
    seq = 128
    ids = torch.randint(0, 30522, (1, seq), dtype=torch.int64)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, seq - 16:] = 0  # padding at the end, as a batch of unequal sentences has
    return HiddenStates(model), {"input_ids": ids, "attention_mask": mask}, ["last_hidden_state"]


def roberta():
    from transformers import RobertaConfig, RobertaModel
    # RoBERTa-base (12 layers, hidden 768): its position ids are computed from the token ids
    # (positions counted over the non-padding tokens), integer arithmetic in the graph.
    model = RobertaModel(RobertaConfig(attn_implementation="eager"), add_pooling_layer=False)
    seq = 128
    ids = torch.randint(3, 50265, (1, seq), dtype=torch.int64)
    ids[0, seq - 16:] = 1  # padding (RoBERTa's pad id) at the end
    mask = (ids != 1).to(torch.int64)
    return HiddenStates(model), {"input_ids": ids, "attention_mask": mask}, ["last_hidden_state"]


def gpt2():
    from transformers import GPT2Config, GPT2Model
    # GPT-2 small (124M): 12 blocks, hidden 768, vocab 50257; causal mask inside.
    model = GPT2Model(GPT2Config(attn_implementation="eager"))
    ids = torch.randint(0, 50257, (1, 64), dtype=torch.int64)
    return HiddenStates(model), {"input_ids": ids}, ["last_hidden_state"]


NETWORKS = dict([
    vision("resnet18", lambda: tv("resnet18")),
    vision("resnet50", lambda: tv("resnet50")),
    # At batch 4 its activations outgrow the caches a batch of 1 stays in (12.8 MB after the
    # stem): there an unfused plan's extra passes cost what fusion saves (unfused/fused 1.09
    # at batch 4 against 1.02 at 1, AOT, 2 Zen 4 cores, 32 MB L3).
    vision("resnet50_b4", lambda: tv("resnet50"), batch=4),
    vision("mobilenet_v2", lambda: tv("mobilenet_v2")),
    vision("mobilenet_v3_large", lambda: tv("mobilenet_v3_large")),
    vision("efficientnet_b0", lambda: tv("efficientnet_b0")),
    vision("shufflenet_v2", lambda: tv("shufflenet_v2_x1_0")),
    vision("densenet121", lambda: tv("densenet121")),
    vision("convnext_tiny", lambda: tv("convnext_tiny")),
    vision("vit_tiny", lambda: timm_model("vit_tiny_patch16_224")),
    # Shifted windows: a constant attention mask built with ScatterND, F.pad on the windows.
    vision("swin_t", lambda: tv("swin_t")),
    ("bert", bert),
    ("roberta", roberta),
    ("gpt2", gpt2),
])


def randomise_batch_norm(module):
    # Statistics away from the identity, so that folding or computing them matters.
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


def export(module, feeds, outputs, path, exporter):
    args = tuple(feeds.values())
    names = list(feeds)
    if exporter == "torchscript":
        torch.onnx.export(module, args, path, dynamo=False, opset_version=17,
                          input_names=names, output_names=outputs, do_constant_folding=True)
    else:
        program = torch.onnx.export(module, args, dynamo=True, opset_version=20,
                                    input_names=names, output_names=outputs)
        program.save(path, external_data=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--only", default="", help="comma-separated network names")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = [n for n in a.only.split(",") if n]
    for n in only:
        if n not in NETWORKS:
            sys.exit(f"unknown network '{n}'; known: {', '.join(NETWORKS)}")
    manifest_path = os.path.join(a.out, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    manifest["torch"] = torch.__version__
    nets = manifest.setdefault("networks", {})
    for name, build in NETWORKS.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        module, feeds, outputs = build()
        module.eval()
        randomise_batch_norm(module)
        entry = {"inputs": {}, "outputs": {}, "exports": {}}
        with torch.no_grad():
            result = module(*feeds.values())
        results = result if isinstance(result, (tuple, list)) else [result]
        for k, v in feeds.items():
            f = f"{name}.in.{k}.npy"
            np.save(os.path.join(a.out, f), v.numpy())
            entry["inputs"][k] = f
        for k, v in zip(outputs, results):
            f = f"{name}.out.{k}.npy"
            np.save(os.path.join(a.out, f), v.numpy())
            entry["outputs"][k] = f
        for exporter in a.exporters.split(","):
            path = os.path.join(a.out, f"{name}_{exporter}.onnx")
            try:
                with torch.no_grad():
                    export(module, feeds, outputs, path, exporter)
                entry["exports"][exporter] = {"model": os.path.basename(path)}
                print(f"wrote {path}", flush=True)
            except Exception as e:  # recorded: an exporter's failure is a result too
                traceback.print_exc()
                entry["exports"][exporter] = {"error": f"{type(e).__name__}: {e}"[:2000]}
                print(f"{name}: the {exporter} exporter failed: {type(e).__name__}", flush=True)
        nets[name] = entry
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
