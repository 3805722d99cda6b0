#!/usr/bin/python3
"""INT8 benchmark inputs and the stock PyTorch FX INT8 baseline (onednn engine).

usage: int8_data.py OUTDIR NAME batches BATCH N      calibration batches OUTDIR/NAME-calib/*.pt and
                                                   held-out inputs OUTDIR/NAME-heldout.pt (other seed)
       int8_data.py OUTDIR NAME fx BATCH             FX int8 model OUTDIR/NAME-fx-int8.pt, calibrated on
                                                   the same batches, traced and frozen
       int8_data.py OUTDIR NAME cosine A.pt B.pt     cosine of two models' outputs on the held-out inputs
                                                   (loads $IPEX_OPS_LIBRARY first when set)
The eager model is rebuilt exactly as bench/make_models.py builds it (same seed).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402


def eager(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    build, _ = make_models.BUILDERS[name]
    model = build().eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model


def calib_dir(out: str, name: str) -> str:
    return os.path.join(out, f"{name}-calib")


def batches(out, name, batch, n):
    os.makedirs(calib_dir(out, name), exist_ok=True)
    gen = torch.Generator().manual_seed(11)
    for i in range(n):
        path = os.path.join(calib_dir(out, name), f"batch_{i:03d}.pt")
        torch.save(torch.randn(batch, 3, 224, 224, generator=gen), path)
    held = torch.Generator().manual_seed(12345)
    torch.save(torch.randn(batch, 3, 224, 224, generator=held), os.path.join(out, f"{name}-heldout.pt"))


def fx(out, name, batch):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = "onednn"
    model = eager(name)
    example = torch.randn(batch, 3, 224, 224)
    prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), (example,))
    with torch.no_grad():
        for f in sorted(os.listdir(calib_dir(out, name))):
            prepared(torch.load(os.path.join(calib_dir(out, name), f)))
        quantized = convert_fx(prepared)
        frozen = torch.jit.freeze(torch.jit.trace(quantized, example).eval())
    frozen.save(os.path.join(out, f"{name}-fx-int8.pt"))


def cosine(out, name, a, b):
    if os.environ.get("IPEX_OPS_LIBRARY"):
        torch.ops.load_library(os.environ["IPEX_OPS_LIBRARY"])
    x = torch.load(os.path.join(out, f"{name}-heldout.pt"))
    with torch.no_grad():
        ya, yb = torch.jit.load(a)(x).float().flatten(), torch.jit.load(b)(x).float().flatten()
    print(f"{name}: cosine {F.cosine_similarity(ya, yb, 0).item():.5f} "
          f"({os.path.basename(b)} vs {os.path.basename(a)}, held-out batch)")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, name, what = sys.argv[1:4]
    if what == "batches":
        batches(out, name, int(sys.argv[4]), int(sys.argv[5]))
    elif what == "fx":
        fx(out, name, int(sys.argv[4]))
    elif what == "cosine":
        cosine(out, name, sys.argv[4], sys.argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
