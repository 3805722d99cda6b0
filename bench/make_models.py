#!/usr/bin/python3
"""Writes TorchScript benchmark models with seeded random weights (no downloads).

usage: make_models.py OUTDIR NAME [NAME...]
names: resnet50 resnet18 mobilenet_v2 encoder (BERT-base-sized nn.TransformerEncoder)
"""
import os
import sys

import torch
import torchvision


def encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072,
                                             activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)


BUILDERS = {
    "resnet50": (lambda: torchvision.models.resnet50(), (1, 3, 224, 224)),
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
    "encoder": (encoder, (1, 128, 768)),
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
