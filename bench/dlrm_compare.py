#!/usr/bin/python3
"""DLRM side by side with ONNX Runtime fp32 (issue 54's acceptance), and the merged EmbeddingBag
alone against the machine's read bandwidth.

usage: dlrm_compare.py OUTDIR [--make | --embedding-only] [--tables N] [--rows-min R] [--rows-max R] [--dim D]
                       [--batch B] [--bag-size L] [--threads T] [--rounds N] [--tool PATH]
                       [-- ORT_COMPARE_OPTIONS...]

--make writes OUTDIR as a bench/ort_compare.py model directory: model.pt (a scripted DLRM:
bottom MLP 13-512-256-D, N nn.EmbeddingBag tables of rows spread geometrically from --rows-min
to --rows-max (sum pooling), the dot interaction of facebookresearch/dlrm, top MLP
to 1024-1024-512-256-1), model.onnx (the same weights), inputs/ (dense [B, 13] fp32, indices
[N, B * L] int64, offsets [N, B] int64: L random rows per bag, Criteo's one-hot at L = 1) and
ours_fp32.pt / ours_bf16.pt / ours_int8emb.pt (fp32 with --embedding-int8: uint8 rows) by
`ipex-tool optimize`. Defaults are the issue's Criteo-like shapes:
26 tables of 100k-1M rows x 128, batch 2048 (about 5 GB of fp32 tables, written three times).

Then (without --make, on a directory --make wrote):
  1. bench/ort_compare.py OUTDIR with --target ours_bf16=2x --target ours_fp32=1.2x (ONNX
     Runtime fp32 at IPEX_ORT_DIR, stock libtorch, ours; rounds interleaved, same weights and
     inputs); options after -- go to it.
     ours_int8emb is timed beside them with no target of its own.
  2. ipex::merged_embedding_bag alone on the model's tables and inputs, fp32, bf16 and uint8
     row-wise tables (aten's byte prepack, the layout --embedding-int8 stores), in alternating
     processes: median time, GB/s of the bytes it touches (each index's row,
     the indices and offsets, the output) and their share of `ipex-tool info --limits`'s
     read_gbs measured in the same run (target >= 60%).
Ratios only; results go to bench/RESULTS.md with the date and build.
Exit codes: 0 ok, 1 a target missed, 2 usage, 3 missing files.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
DEFAULT_TOOL = os.path.join(ROOT, "build", "apps", "ipex-tool", "ipex-tool")
DENSE = 13
BANDWIDTH_TARGET = 0.60


def build_model(tables, rows_min, rows_max, dim):
    import torch
    from torch import nn

    def mlp(sizes, last):
        layers = []
        for i in range(len(sizes) - 1):
            layers += [nn.Linear(sizes[i], sizes[i + 1]), nn.ReLU()]
        layers[-1] = last
        return nn.Sequential(*layers)

    class Dlrm(nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.bot = mlp([DENSE, 512, 256, dim], nn.ReLU())
            self.emb = nn.ModuleList([nn.EmbeddingBag(r, dim, mode="sum") for r in rows])
            f = len(rows) + 1
            self.top = mlp([dim + f * (f - 1) // 2, 1024, 1024, 512, 256, 1], nn.Sigmoid())
            self.register_buffer("li", torch.tensor([i for i in range(f) for j in range(i)]))
            self.register_buffer("lj", torch.tensor([j for i in range(f) for j in range(i)]))

        def forward(self, dense, indices, offsets):
            x = self.bot(dense)
            ly = []
            for k, e in enumerate(self.emb):
                ly.append(e(indices[k], offsets[k]))
            b, d = x.shape
            t = torch.cat([x] + ly, dim=1).view((b, -1, d))
            z = torch.bmm(t, torch.transpose(t, 1, 2))
            return self.top(torch.cat([x] + [z[:, self.li, self.lj]], dim=1))

    ratio = (rows_max / rows_min) ** (1 / max(tables - 1, 1))
    rows = [int(round(rows_min * ratio ** k)) for k in range(tables)]
    return Dlrm(rows).eval(), rows


def make(args) -> int:
    import numpy as np
    import torch
    torch.manual_seed(0)
    os.makedirs(os.path.join(args.outdir, "inputs"), exist_ok=True)
    model, rows = build_model(args.tables, args.rows_min, args.rows_max, args.dim)
    dense = torch.randn(args.batch, DENSE)
    indices = torch.stack([torch.randint(0, r, (args.batch * args.bag_size,)) for r in rows])
    offsets = (torch.arange(args.batch) * args.bag_size).repeat(len(rows), 1)
    for i, (name, t) in enumerate((("dense", dense), ("indices", indices), ("offsets", offsets))):
        np.save(os.path.join(args.outdir, "inputs", f"{i}_{name}.npy"), t.numpy())
    src = os.path.join(args.outdir, "model.pt")
    torch.jit.script(model).save(src)
    torch.onnx.export(model, (dense, indices, offsets), os.path.join(args.outdir, "model.onnx"), opset_version=13,
                      input_names=["dense", "indices", "offsets"])
    with open(os.path.join(args.outdir, "model.json"), "w") as f:
        json.dump({"label": f"DLRM {len(rows)} tables x {args.dim}, batch {args.batch}", "rows": rows,
                   "dim": args.dim, "batch": args.batch, "bag_size": args.bag_size}, f, indent=1)
    for name, flags in (("fp32", ["--dtype", "fp32"]), ("bf16", ["--dtype", "bf16"]),
                        ("int8emb", ["--dtype", "fp32", "--embedding-int8"])):
        subprocess.run([args.tool, "optimize", src, os.path.join(args.outdir, f"ours_{name}.pt"), *flags,
                        "--report", os.path.join(args.outdir, f"ours_{name}.report.json")], check=True)
    print(f"wrote {args.outdir}; run: IPEX_ORT_DIR=/tmp/ortdir {sys.argv[0]} {args.outdir}")
    return 0


# Times ipex::merged_embedding_bag on the model's tables in a process of its own; prints JSON.
TIME_MERGED = """
import json, sys, time, numpy as np, torch
ops, model, inputs, dtype, threads, warmup, iterations = sys.argv[1:8]
torch.ops.load_library(ops)
torch.set_num_threads(int(threads))
m = torch.jit.load(model)
tables = [p for n, p in m.named_parameters() if n.startswith("emb.")]
if dtype == "bf16":
    tables = [t.to(torch.bfloat16) for t in tables]
elif dtype == "uint8":  # a row's values, then its fp32 scale and bias
    tables = [torch.ops.quantized.embedding_bag_byte_prepack(t.detach()) for t in tables]
indices = torch.from_numpy(np.load(inputs + "/1_indices.npy"))
offsets = torch.from_numpy(np.load(inputs + "/2_offsets.npy"))
idx, off = list(indices.unbind(0)), list(offsets.unbind(0))
psw, pad = [None] * len(tables), [-1] * len(tables)
call = lambda: torch.ops.ipex.merged_embedding_bag(tables, idx, off, psw, pad, 0, False, torch.float)
for _ in range(int(warmup)):
    call()
samples = []
for _ in range(int(iterations)):
    start = time.perf_counter()
    call()
    samples.append(time.perf_counter() - start)
row = tables[0].shape[1] * tables[0].element_size()
dim = tables[0].shape[1] - (8 if dtype == "uint8" else 0)
touched = indices.numel() * (row + 8) + offsets.numel() * 8 + offsets.numel() * dim * 4
print(json.dumps({"median_s": sorted(samples)[len(samples) // 2], "bytes": touched}))
"""


def find_ops_library() -> str:
    for root, _, files in os.walk(os.path.join(ROOT, "build")):
        if "libipex_ops.so" in files:
            return os.path.join(root, "libipex_ops.so")
    return ""


def embedding_bandwidth(args) -> bool:
    ops = find_ops_library()
    if not ops:
        print("no libipex_ops.so under build/", file=sys.stderr)
        return False
    limits = json.loads(subprocess.run([args.tool, "info", "--limits", "--threads", str(args.threads), "--json"],
                                       check=True, capture_output=True, text=True).stdout)["limits"]
    kinds = ("fp32", "bf16", "uint8")
    runs = {kind: [] for kind in kinds}
    touched = {}
    for _ in range(args.rounds):
        for dtype in (kinds if _ % 2 == 0 else tuple(reversed(kinds))):
            out = subprocess.run([PYTHON, "-c", TIME_MERGED, ops, os.path.join(args.outdir, "model.pt"),
                                  os.path.join(args.outdir, "inputs"), dtype, str(args.threads), "3", "20"],
                                 check=True, capture_output=True, text=True).stdout
            result = json.loads(out)
            runs[dtype].append(result["median_s"])
            touched[dtype] = result["bytes"]
    ok = True
    print(f"merged EmbeddingBag alone; read bandwidth measured now: {limits['read_gbs']:.1f} GB/s "
          f"on {limits['threads']} threads")
    for dtype, samples in runs.items():
        seconds = statistics.median(samples)
        gbs = touched[dtype] / seconds / 1e9
        share = gbs / limits["read_gbs"] if limits["read_gbs"] else math.nan
        passed = share >= BANDWIDTH_TARGET
        ok &= passed
        print(f"  {dtype} tables: {seconds * 1e3:.3f} ms, {gbs:.1f} GB/s, {share:.0%} of read_gbs "
              f"(target {BANDWIDTH_TARGET:.0%}: {'PASS' if passed else 'MISS'})")
    return ok


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--make", action="store_true", help="write the model directory")
    parser.add_argument("--embedding-only", action="store_true", help="time the merged EmbeddingBag alone (step 2)")
    parser.add_argument("--tables", type=int, default=26)
    parser.add_argument("--rows-min", type=int, default=100_000)
    parser.add_argument("--rows-max", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--bag-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tool", default=DEFAULT_TOOL)
    args = parser.parse_args(argv)
    if args.tables < 1 or args.rows_min < 1 or args.rows_max < args.rows_min or args.dim < 1 or args.batch < 1 \
            or args.bag_size < 1:
        print("counts must be positive and --rows-max at least --rows-min", file=sys.stderr)
        return 2
    if args.make:
        return make(args)
    if args.embedding_only:
        return 0 if embedding_bandwidth(args) else 1
    for name in ("model.pt", "model.onnx", "ours_fp32.pt", "ours_bf16.pt", "ours_int8emb.pt"):
        if not os.path.exists(os.path.join(args.outdir, name)):
            print(f"{args.outdir}/{name} is missing; write the directory with --make", file=sys.stderr)
            return 3
    compare = subprocess.run([PYTHON, os.path.join(ROOT, "bench", "ort_compare.py"), args.outdir,
                              "--threads", str(args.threads), "--rounds", str(args.rounds), "--ipex-tool", args.tool,
                              "--target", "ours_bf16=2x", "--target", "ours_fp32=1.2x", *extra])
    bandwidth_ok = embedding_bandwidth(args)
    return 1 if compare.returncode == 1 or not bandwidth_ok else compare.returncode


if __name__ == "__main__":
    sys.exit(main())
