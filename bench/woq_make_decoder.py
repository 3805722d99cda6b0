#!/usr/bin/python3
"""Writes the decoder of bench/woq_decoder.sh: the Llama-style decoder of
tests/fixtures/woq_decoder.py (Hugging Face module names) at Llama-1B-like widths, random
weights, TorchScript, plus a one-token input.

Usage: woq_make_decoder.py OUTDIR [--hidden 2048] [--intermediate 5632] [--layers 2] [--vocab 8192]
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from woq_decoder import DecoderConfig, TinyLlama  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8192)
    a = p.parse_args()
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab=a.vocab, hidden=a.hidden, heads=a.heads, intermediate=a.intermediate,
                        layers=a.layers)
    model = TinyLlama(cfg).eval()
    os.makedirs(a.outdir, exist_ok=True)
    torch.jit.script(model).save(os.path.join(a.outdir, "decoder.pt"))
    torch.save(torch.randint(0, a.vocab, (1, 1)), os.path.join(a.outdir, "one_token.pt"))
    params = sum(p.numel() for p in model.parameters())
    print(f"decoder: {a.layers} layers, hidden {a.hidden}, intermediate {a.intermediate}, vocab {a.vocab}, "
          f"{params / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
