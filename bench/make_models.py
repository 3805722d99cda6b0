#!/usr/bin/python3
"""Writes TorchScript benchmark models with seeded random weights (no downloads).

usage: make_models.py OUTDIR NAME [NAME...]
names: resnet50 resnet18 mobilenet_v2 encoder (BERT-base-sized nn.TransformerEncoder, traced:
its layers run as aten::_transformer_encoder_layer_fwd) bert (the same size written as plain
Linear/LayerNorm/GELU modules, scripted)
"""
import math
import os
import sys

import torch
import torchvision


def encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                             activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)


class BertLayer(torch.nn.Module):
    """One BERT encoder layer from plain modules (post-norm, GELU feed-forward)."""

    def __init__(self, d_model=768, heads=12, d_ff=3072):
        super().__init__()
        self.heads = heads
        self.query = torch.nn.Linear(d_model, d_model)
        self.key = torch.nn.Linear(d_model, d_model)
        self.value = torch.nn.Linear(d_model, d_model)
        self.output = torch.nn.Linear(d_model, d_model)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.intermediate = torch.nn.Linear(d_model, d_ff)
        self.ffn_output = torch.nn.Linear(d_ff, d_model)
        self.norm2 = torch.nn.LayerNorm(d_model)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        b, n, d = x.shape
        hd = d // self.heads
        q = self.query(x).view(b, n, self.heads, hd).transpose(1, 2)
        k = self.key(x).view(b, n, self.heads, hd).transpose(1, 2)
        v = self.value(x).view(b, n, self.heads, hd).transpose(1, 2)
        scores = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        context = (self.dropout(scores) @ v).transpose(1, 2).reshape(b, n, d)
        x = self.norm1(x + self.dropout(self.output(context)))
        ff = self.ffn_output(torch.nn.functional.gelu(self.intermediate(x)))
        return self.norm2(x + self.dropout(ff))


def bert():
    return torch.nn.Sequential(*[BertLayer() for _ in range(12)])


BUILDERS = {
    "resnet50": (lambda: torchvision.models.resnet50(), (1, 3, 224, 224)),
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
    "encoder": (encoder, (1, 128, 768)),
    "bert": (bert, (1, 128, 768)),
}


def main():
    if len(sys.argv) < 3 or any(n not in BUILDERS for n in sys.argv[2:]):
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:]:
        path = os.path.join(out, name + ".pt")
        if os.path.exists(path):
            continue
        torch.manual_seed(0)
        build, shape = BUILDERS[name]
        model = build().eval()
        # Give batch-norm layers non-trivial statistics, as a trained model would have.
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        with torch.no_grad():
            scripted = torch.jit.trace(model, torch.randn(*shape)) if name == "encoder" \
                else torch.jit.script(model)
        tmp = path + ".tmp"
        torch.jit.save(scripted, tmp)
        os.replace(tmp, path)
        print("wrote", path)


if __name__ == "__main__":
    main()
