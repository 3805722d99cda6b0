#!/usr/bin/python3
"""Writes the detectors of issue 54 as ort_compare.py model directories (seeded random weights,
random BatchNorm / FrozenBatchNorm2d statistics and the classifier's weights scaled so scores
spread, score threshold 0; no downloads), then the optimized models: ours_fp32.pt and ours_bf16.pt by
`ipex-tool optimize`.

Each detector keeps its top k <= 100 detections, k chosen on the image so that the first k + 1
sorted scores lie >= 1e-4 apart (the classifier scale, of 0.001 to 30 in steps of ~3x, the one
giving the largest k): random heads give near-tied scores, and which of two boxes with
scores 1e-6 apart comes first (or is cut at the k-th place) is not defined under any change of
rounding, so outputs could not be compared box for box. Trained detectors on real images
return a few to a few tens of boxes above their 0.05 threshold; k is printed.

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

SCORE_GAP = 1e-4
MOST_DETECTIONS = 100
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


def separated_detections(model: torch.nn.Module, image: torch.Tensor) -> int:
    """How many of the model's top detections on `image` have scores >= SCORE_GAP apart."""
    with torch.no_grad():
        scores = model([image])[0]["scores"]
    gaps = scores[:-1] - scores[1:]
    close = (gaps[:MOST_DETECTIONS] < SCORE_GAP).nonzero().flatten()
    return int(close[0]) if len(close) else min(MOST_DETECTIONS, len(scores))


def keep_separated_detections(name: str, model: torch.nn.Module, image: torch.Tensor) -> str:
    """Scales the classifier and sets the model to return its first k detections (module
    docstring); says what it chose."""
    holder = model if name.startswith("retinanet") else model.roi_heads
    classifier = (model.head.classification_head.cls_logits if name.startswith("retinanet")
                  else model.roi_heads.box_predictor.cls_score)
    weight = classifier.weight.detach().clone()
    holder.detections_per_img = 1 << 20
    best = (0, 1.0)
    with torch.no_grad():
        for scale in (1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0):
            classifier.weight.copy_(weight * scale)
            best = max(best, (separated_detections(model, image), scale))
        classifier.weight.copy_(weight * best[1])
    holder.detections_per_img = max(best[0], 1)
    return f"classifier x{best[1]:g}, top {holder.detections_per_img} detections"


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
        print(f"{name}: {keep_separated_detections(name, model, image)}", flush=True)
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
