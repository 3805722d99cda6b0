#!/usr/bin/python3
"""Writes the speech-recognition style RNN benchmark models with seeded random weights.

usage: make_rnn_models.py OUTDIR [--cells lstm,gru] [--batch 8] [--mel 80] [--frames 200]
                          [--onnx PATH]

The model: log-mel frames [batch, mel, frames] -> conv1d (mel -> 256, kernel 3) -> relu ->
2-layer LSTM (or GRU) of 512 over the frames (batch_first) -> linear to 29 characters per
frame. Writes, per cell, OUTDIR/speech_CELL.pt (scripted, eval), OUTDIR/speech.input.pt (one
input batch) and OUTDIR/speech_models.json (per model: input SPEC and the multiply-adds of one
forward as flops, for GFLOP/s). --onnx PATH also exports the first cell's model to PATH
(torch.onnx.export, opset 14, batch and frames dynamic) for bench/ort_compare.py.
"""
import argparse
import json
import os
import warnings

import torch

CHANNELS = 256
HIDDEN = 512
LAYERS = 2
CLASSES = 29
KERNEL = 3
ONNX_OPSET = 14


class SpeechRnn(torch.nn.Module):
    def __init__(self, cell: str, mel: int):
        super().__init__()
        self.conv = torch.nn.Conv1d(mel, CHANNELS, KERNEL, padding=KERNEL // 2)
        rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
        self.rnn = rnn(CHANNELS, HIDDEN, num_layers=LAYERS, batch_first=True)
        self.fc = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.rnn(y)
        return self.fc(y)


def forward_flops(cell: str, batch: int, mel: int, frames: int) -> int:
    """2 x multiply-adds of one forward (conv, recurrent gates of every layer, classifier)."""
    gates = 4 if cell == "lstm" else 3
    conv = batch * frames * CHANNELS * mel * KERNEL
    rnn = sum(batch * frames * gates * HIDDEN * ((CHANNELS if l == 0 else HIDDEN) + HIDDEN) for l in range(LAYERS))
    fc = batch * frames * HIDDEN * CLASSES
    return 2 * (conv + rnn + fc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--cells", default="lstm,gru")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--mel", type=int, default=80)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--onnx", help="export the first cell's model to this .onnx path")
    args = ap.parse_args()
    cells = [c for c in args.cells.split(",") if c]
    for cell in cells:
        if cell not in ("lstm", "gru"):
            ap.error(f"unknown cell {cell!r} (lstm or gru)")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.batch, args.mel, args.frames, generator=gen)
    torch.save(x, os.path.join(args.outdir, "speech.input.pt"))
    spec = f"{args.batch}x{args.mel}x{args.frames}"
    manifest = {}
    for index, cell in enumerate(cells):
        torch.manual_seed(100 + index)
        model = SpeechRnn(cell, args.mel).eval()
        with torch.no_grad():
            torch.jit.script(model).save(os.path.join(args.outdir, f"speech_{cell}.pt"))
            if args.onnx and index == 0:
                warnings.filterwarnings("ignore", category=UserWarning)  # the exporter's shape-inference notes
                torch.onnx.export(model, (x,), args.onnx, opset_version=ONNX_OPSET, input_names=["mel"],
                                  output_names=["logits"],
                                  dynamic_axes={"mel": {0: "batch", 2: "frames"}, "logits": {0: "batch", 1: "frames"}})
        manifest[f"speech_{cell}"] = {"file": f"speech_{cell}.pt", "input": spec, "input_file": "speech.input.pt",
                                      "flops": forward_flops(cell, args.batch, args.mel, args.frames)}
    with open(os.path.join(args.outdir, "speech_models.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
