#!/usr/bin/python3
"""One training step (forward, backward, optimizer step) side by side: stock torch.optim against
ipex_tool.optimize's fused steps, fp32 and bf16 (issue 51).

usage: train_step.py [--model mlp,cnn,transformer,step] [--size tiny|small|base|bert|100m]
                     [--optimizer adamw|adam|sgd]
                     [--batch B] [--steps N] [--warmup W] [--rounds R] [--threads T]
                     [--tool PATH | --read-gbs X | --no-limits] [--json FILE|-]

Configurations, each in its own process (so peak RSS is its own), rounds interleaved:
  stock_fp32      fp32 model, torch.optim (foreach=True, 1.13's fastest)
  stock_autocast  fp32 model under torch.cpu.amp.autocast(bf16), torch.optim (foreach=True)
  fused_fp32      ipex_tool.optimize(model, optimizer=opt): the fused fp32 step
  split_bf16      ipex_tool.optimize(model, optimizer=opt, dtype=torch.bfloat16) under autocast
Model "step" is the optimizer step alone on the MLP's parameters with fixed random gradients
(no forward or backward; stock_autocast is skipped there): `--model step --size 100m` is the
100 M-parameter fused step of issue 51's acceptance. Size "bert" is the transformer at BERT-base's
width and depth (768 x 12 layers, 16-token sequences).
For each: the median step time and optimizer-step time, the bytes the step must read and write
(parameter, trail, gradient, optimizer state: each element once) over the optimizer-step time as
a share of the machine's read bandwidth (`ipex-tool info --limits --json`, limits.read_gbs,
measured in the same run) and of the rate an in-place add a += b over 512 MiB reaches on the
same threads (the read+write floor an elementwise op meets here), the bytes of weights +
gradients + optimizer state per parameter, and peak RSS. Ratios against stock_fp32 are printed; no absolute claim. Results go to
bench/RESULTS.md with the date and machine. --size tiny is the ctest smoke size (no timing).
Exit codes: 0 ok, 2 usage, 3 the tool or a worker failed.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
DEFAULT_TOOL = os.path.join(ROOT, "build", "apps", "ipex-tool", "ipex-tool")
CONFIGS = ["stock_fp32", "stock_autocast", "fused_fp32", "split_bf16"]
MODELS = ["mlp", "cnn", "transformer", "step"]
# width, depth, batch of each size (the transformer's sequences are 16 tokens); the MLP at 100m
# holds 3 x (2048 x 8192 x 2) + biases + head = 100.7 M parameters
SIZES = {"tiny": (16, 1, 4), "small": (512, 2, 64), "base": (768, 4, 32), "bert": (768, 12, 8),
         "100m": (2048, 3, 8)}
STATE_TENSORS = {"adamw": 2, "adam": 2, "sgd": 1}  # fp32 state tensors per parameter element


def make_model(kind, width, depth):
    import torch
    from torch import nn

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(*[m for _ in range(depth) for m in
                                          (nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))])
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.layers(x))

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            channels = max(4, width // 16)
            self.convs = nn.Sequential(*[m for i in range(depth) for m in
                                         (nn.Conv2d(3 if i == 0 else channels, channels, 3, padding=1), nn.ReLU())])
            self.head = nn.Linear(channels * 8 * 8, 10)

        def forward(self, x):
            return self.head(nn.functional.adaptive_avg_pool2d(self.convs(x), 8).flatten(1))

    class Block(nn.Module):
        """A pre-norm transformer encoder block of linears (split) and LayerNorms (fp32; torch
        1.13's CPU autocast gives layer_norm a bf16 input with an fp32 weight, hence the casts)."""

        def __init__(self):
            super().__init__()
            self.heads = max(1, width // 64)
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x.float())).view(b, t, 3, self.heads, d // self.heads).unbind(2)
            q, k, v = (y.transpose(1, 2) for y in (q, k, v))
            att = torch.softmax((q @ k.transpose(-1, -2)).float() / (d // self.heads) ** 0.5, -1)
            x = x + self.proj((att.to(v.dtype) @ v).transpose(1, 2).reshape(b, t, d)).float()
            return x + self.fc2(torch.relu(self.fc1(self.ln2(x.float())))).float()

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.blocks(x)[:, 0])

    return {"mlp": Mlp, "cnn": Cnn, "transformer": Transformer}[kind]()


def make_input(kind, width, batch):
    import torch
    generator = torch.Generator().manual_seed(0)
    if kind == "mlp":
        x = torch.randn(batch, width, generator=generator)
    elif kind == "cnn":
        x = torch.randn(batch, 3, 32, 32, generator=generator)
    else:
        x = torch.randn(batch, 16, width, generator=generator)
    return x, torch.randint(0, 10, (batch,), generator=generator)


def make_optimizer(name, params, foreach):
    import torch
    extra = {"foreach": True} if foreach else {}
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **extra)
    return {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[name](params, lr=1e-4, **extra)


def step_bytes(model, optimizer, name):
    """Bytes one optimizer step must read and write (each element once), and the bytes of
    weights + gradients + optimizer state held."""
    moved = held = 0
    for param in model.parameters():
        n = param.numel()
        trail = 2 if "trail" in optimizer.state.get(param, {}) else 0
        weight = param.element_size() + trail
        grad = param.element_size() if param.grad is None else param.grad.element_size()
        state = 4 * STATE_TENSORS[name]
        moved += n * (2 * weight + grad + 2 * state)
        held += n * (weight + grad + state)
    return moved, held


def worker(args):
    """One configuration in this process: prints one JSON line."""
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    import ipex_tool
    width, depth, batch = SIZES[args.size]
    batch = args.batch or batch
    torch.manual_seed(0)
    step_only = args.model == "step"
    model = make_model("mlp" if step_only else args.model, width, depth)
    stock = args.worker.startswith("stock")
    optimizer = make_optimizer(args.optimizer, model.parameters(), foreach=stock)
    if not stock:
        model, optimizer = ipex_tool.optimize(model, optimizer=optimizer,
                                              dtype=torch.bfloat16 if args.worker == "split_bf16" else None)
    autocast = args.worker in ("stock_autocast", "split_bf16")
    if step_only:  # fixed gradients, set once: the loop below times the step alone
        generator = torch.Generator().manual_seed(1)
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=generator).mul_(1e-3).to(param.dtype)
    else:
        x, y = make_input(args.model, width, batch)
    steps, opt_steps = [], []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        if not step_only:
            optimizer.zero_grad(set_to_none=True)
            with torch.cpu.amp.autocast(enabled=autocast, dtype=torch.bfloat16):
                out = model(x)
            torch.nn.functional.cross_entropy(out.float(), y).backward()
        before_step = time.perf_counter() if not step_only else start
        optimizer.step()
        end = time.perf_counter()
        if i >= args.warmup:
            steps.append(end - start)
            opt_steps.append(end - before_step)
    moved, held = step_bytes(model, optimizer, args.optimizer)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"config": args.worker, "model": args.model, "parameters": params,
                      "step_s": statistics.median(steps), "optimizer_step_s": statistics.median(opt_steps),
                      "optimizer_step_bytes": moved, "bytes_per_parameter": held / params,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def stream_worker(args):
    """The read+write rate an elementwise op reaches here: the best of 5 in-place adds a += b over
    2 x 256 MiB fp32 (12 bytes moved per element), on the same threads."""
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    import ipex_tool  # noqa: F401  (its default threads, as the configurations' workers get)
    n = 64 << 20
    a, b = torch.ones(n), torch.ones(n)
    best = float("inf")
    for _ in range(6):
        start = time.perf_counter()
        a.add_(b)
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"inplace_add_gbs": 12 * n / best / 1e9}))


def stream_gbs(args):
    if args.no_limits or args.read_gbs:
        return None
    cmd = [PYTHON, os.path.abspath(__file__), "--worker", "stream", "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"train_step.py: the in-place add reference failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["inplace_add_gbs"]


def read_gbs(args):
    if args.no_limits:
        return None
    if args.read_gbs:
        return args.read_gbs
    cmd = [args.tool, "info", "--limits", "--json"] + (["--threads", str(args.threads)] if args.threads else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"train_step.py: {' '.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)["limits"]["read_gbs"]


def run_worker(args, model, config):
    cmd = [PYTHON, os.path.abspath(__file__), "--worker", config, "--model", model, "--size", args.size,
           "--optimizer", args.optimizer, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--batch", str(args.batch), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        print(f"train_step.py: {config} on {model} failed (exit {proc.returncode}):\n{proc.stderr}", file=sys.stderr)
        sys.exit(3)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(runs, gbs, add_gbs=None):
    """Per model and configuration: medians over the rounds, the optimizer step's share of the
    bandwidth floor, and ratios against stock_fp32."""
    results = []
    for model in dict.fromkeys(r["model"] for r in runs):
        base = None
        for config in CONFIGS:
            mine = [r for r in runs if r["model"] == model and r["config"] == config]
            if not mine:
                continue
            row = {"model": model, "config": config, "parameters": mine[0]["parameters"],
                   "step_s": statistics.median(r["step_s"] for r in mine),
                   "optimizer_step_s": statistics.median(r["optimizer_step_s"] for r in mine),
                   "optimizer_step_bytes": mine[0]["optimizer_step_bytes"],
                   "bytes_per_parameter": mine[0]["bytes_per_parameter"],
                   "peak_rss_bytes": max(r["peak_rss_bytes"] for r in mine)}
            achieved = row["optimizer_step_bytes"] / row["optimizer_step_s"] / 1e9
            row["optimizer_step_gbs"] = achieved
            row["bandwidth_share"] = achieved / gbs if gbs else None
            row["inplace_add_share"] = achieved / add_gbs if add_gbs else None
            base = base or row
            row["step_speedup"] = base["step_s"] / row["step_s"]
            row["optimizer_step_speedup"] = base["optimizer_step_s"] / row["optimizer_step_s"]
            results.append(row)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mlp,cnn,transformer")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--optimizer", choices=sorted(STATE_TENSORS), default="adamw")
    parser.add_argument("--batch", type=int, default=0, help="default: the size's batch")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="default: torch's")
    parser.add_argument("--tool", default=DEFAULT_TOOL, help="ipex-tool, for info --limits")
    parser.add_argument("--read-gbs", type=float, help="the read bandwidth to compare with, instead of measuring")
    parser.add_argument("--no-limits", action="store_true", help="no bandwidth share (smoke runs)")
    parser.add_argument("--json", help="write the results as JSON to FILE (- for stdout)")
    parser.add_argument("--worker", choices=CONFIGS + ["stream"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    models = args.model.split(",")
    if any(m not in MODELS for m in models) or args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error(f"--model takes {','.join(MODELS)}; --steps and --rounds at least 1")
    if args.worker == "stream":
        return stream_worker(args)
    if args.worker:
        args.model = models[0]
        return worker(args)
    gbs = read_gbs(args)
    add_gbs = stream_gbs(args)
    runs = [run_worker(args, model, config) for _ in range(args.rounds) for model in models for config in CONFIGS
            if not (model == "step" and config == "stock_autocast")]
    results = summarize(runs, gbs, add_gbs)
    report = {"size": args.size, "optimizer": args.optimizer, "read_gbs": gbs, "inplace_add_gbs": add_gbs,
              "rounds": args.rounds,
              "date": time.strftime("%Y-%m-%d"), "results": results}
    table = sys.stderr if args.json == "-" else sys.stdout
    for r in results:
        share = f"{100 * r['bandwidth_share']:.0f}% of read bw" if r["bandwidth_share"] is not None else "-"
        if r["inplace_add_share"] is not None:
            share += f", {100 * r['inplace_add_share']:.0f}% of an in-place add's rate"
        print(f"{r['model']:<12} {r['config']:<15} step {r['step_s'] * 1e3:9.3f} ms ({r['step_speedup']:.2f}x)  "
              f"opt step {r['optimizer_step_s'] * 1e3:8.3f} ms ({r['optimizer_step_speedup']:.2f}x, {share})  "
              f"{r['bytes_per_parameter']:.1f} B/param  peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB",
              file=table)
    if args.json:
        text = json.dumps(report, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
