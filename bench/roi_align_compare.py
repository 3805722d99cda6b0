#!/usr/bin/python3
"""RoIAlign alone: ipex::roi_align (channels-last fp32 and bf16) against torchvision's CPU kernel
(NCHW fp32, its only fast layout) on the same feature map and boxes, interleaved in one process.

usage: roi_align_compare.py [--ops-lib PATH] [--rounds N] [--iterations N] [--threads N] [--json FILE]

Calls (Mask R-CNN sized, FPN level 0 of an 800x1088 image: a 1x256x200x272 map):
  box    1000 boxes -> 7x7, sampling_ratio 2 (the box head)
  mask    100 boxes -> 14x14, sampling_ratio 2 (the mask head)
Per call and configuration: the median of the round medians, the ratio to torchvision's kernel
(its time / ours; above 1 is faster), and the bytes the bilinear samples read per second
(4 corners x channels x samples x element size; the map's reuse in cache makes this an upper
bound on memory traffic). Target of issue 54: >= 3x at the mask call.
torchvision is imported before the ops library, so torchvision:: stays torchvision's kernel.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torchvision  # noqa: F401  (its kernels, loaded first)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS = {"box": (1000, 7, 2), "mask": (100, 14, 2)}


def boxes(k: int, h: int, w: int, scale: float) -> torch.Tensor:
    b = torch.rand(k, 4) * torch.tensor([w, h, w, h]) / scale
    b[:, 2:] = b[:, :2] + torch.rand(k, 2) * 96 / scale * 0.25 + 8
    return torch.cat([torch.zeros(k, 1), b], 1)


def median_time(fn, iterations: int) -> float:
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops-lib", default=os.path.join(ROOT, "build", "lib", "libipex_ops.so"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.ops.load_library(args.ops_lib)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    scale = 0.25
    x = torch.randn(1, 256, 200, 272)
    configs = {
        "torchvision_fp32": (x, torch.ops.torchvision.roi_align, 4),
        "ours_fp32": (x.contiguous(memory_format=torch.channels_last), torch.ops.ipex.roi_align, 4),
        "ours_bf16": (x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last), torch.ops.ipex.roi_align,
                      2),
    }
    results = {}
    for call, (k, size, ratio) in CALLS.items():
        rois = boxes(k, 200, 272, scale)
        rounds = {name: [] for name in configs}
        with torch.no_grad():
            for r in range(args.rounds):
                order = list(configs)[r % len(configs):] + list(configs)[:r % len(configs)]
                for name in order:
                    feature, op, _ = configs[name]
                    fn = lambda: op(feature, rois, scale, size, size, ratio, False)  # noqa: E731
                    fn()
                    rounds[name].append(median_time(fn, args.iterations))
        base = statistics.median(rounds["torchvision_fp32"])
        for name, (_, _, element) in configs.items():
            t = statistics.median(rounds[name])
            read = 4 * 256 * k * size * size * ratio * ratio * element
            results[f"{call}/{name}"] = {"seconds": t, "ratio_to_torchvision": base / t, "sample_GB_per_s": read / t / 1e9}
            print(f"{call:5s} {name:17s} {t * 1e3:9.3f} ms  x{base / t:5.2f}  {read / t / 1e9:7.1f} GB/s sampled")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
