#!/usr/bin/python3
"""Writes the detectors of issue 54 as ort_compare.py model directories (seeded random weights,
random BatchNorm / FrozenBatchNorm2d statistics so scores spread, score threshold 0 so every
detection is returned; no downloads), then the
optimized models: ours_fp32.pt and ours_bf16.pt by `ipex-tool optimize`.

usage: make_detection_models.py OUTDIR [NAME...] [--size S] [--tool PATH]
names: fasterrcnn_mobilenet_v3_large_320_fpn fasterrcnn_resnet50_fpn retinanet_resnet50_fpn
       maskrcnn_resnet50_fpn (default: all four)

Each OUTDIR/NAME holds model.pt (scripted; forward takes [image]), model.onnx (the same weights,
opset 11, input one 3xSxS image), inputs/0.npy (that image) and ours_*.pt. Then:
  IPEX_ORT_DIR=/tmp/ortdir bench/ort_compare.py OUTDIR/NAME --target ours_bf16=1.5x --target ours_fp32=1.0x
The ResNet-50 detectors use FrozenBatchNorm2d, as torchvision builds them for trained weights.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision
from torchvision.models import detection
from torchvision.ops.misc import FrozenBatchNorm2d

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ("fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn",
         "maskrcnn_resnet50_fpn")


def build(name: str, size: int) -> torch.nn.Module:
    kwargs = dict(weights=None, weights_backbone=None, min_size=size, max_size=size)
    if "resnet50" in name:
        kwargs["norm_layer"] = FrozenBatchNorm2d
    # Random weights score every class near 1/classes, under the default 0.05 threshold, and the
    # model would return no box: keep every detection (up to detections_per_img), so
    # ort_compare's output check compares real boxes, labels and scores.
    kwargs["score_thresh" if name.startswith("retinanet") else "box_score_thresh"] = 0.0
    model = getattr(detection, name)(**kwargs).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm2d, FrozenBatchNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.2)
                m.running_mean.normal_(0, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("names", nargs="*", default=list(NAMES))
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--tool", default=os.path.join(ROOT, "build", "apps", "ipex-tool", "ipex-tool"))
    args = parser.parse_args()
    for name in args.names:
        if name not in NAMES:
            print(f"unknown model {name}; one of {', '.join(NAMES)}", file=sys.stderr)
            return 2
        torch.manual_seed(0)
        out = os.path.join(args.outdir, name)
        os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
        model = build(name, args.size)
        image = torch.rand(3, args.size, args.size)
        np.save(os.path.join(out, "inputs", "0.npy"), image.numpy())
        torch.jit.script(model).save(os.path.join(out, "model.pt"))
        torch.onnx.export(model, ([image],), os.path.join(out, "model.onnx"), opset_version=11,
                          input_names=["image"])
        src = os.path.join(out, "model.pt")
        for dtype in ("fp32", "bf16"):
            subprocess.run([args.tool, "optimize", src, os.path.join(out, f"ours_{dtype}.pt"), "--dtype", dtype,
                            "--report", os.path.join(out, f"ours_{dtype}.report.json")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
