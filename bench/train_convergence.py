#!/usr/bin/python3
"""Convergence of split-bf16 training against fp32 training, same seeds, same batches (issue 51).

usage: train_convergence.py [--task cnn,lm] [--steps N] [--eval-every E] [--text FILE]
                            [--optimizer adamw|sgd] [--threads T] [--target PCT] [--enforce]
                            [--json FILE|-]

Tasks:
  cnn  a small CNN on 16x16 RGB images synthesized with learnable structure: four classes of
       striped patterns (horizontal, vertical, diagonal, checkered) with a random period, phase,
       pair of colours and Gaussian noise; held-out images from another seed.
  lm   a two-layer character-level transformer LM on a real text file (default
       /usr/share/common-licenses/GPL-3, which Debian's base-files ships); the last tenth of the
       text is held out.
Configurations, each from the same initial weights and the same batch order:
  fp32        the fp32 model, torch.optim
  split_bf16  ipex_tool.optimize(model, optimizer=opt, dtype=torch.bfloat16): bf16 tops with the
              trails in the optimizer, the fused step, forward and backward under
              torch.cpu.amp.autocast(bf16)
  autocast    the fp32 model under autocast with torch.optim (bf16 compute, fp32 weights): the
              usual alternative, for reference
The learning rate decays to zero on a cosine over the run, so each run ends settled. The figure
is the held-out loss averaged over the last three evaluations; the target is split_bf16 within PCT
percent (default 2) of fp32. No speed is measured here (bench/train_step.py does that).
Exit codes: 0 ok, 1 the target missed with --enforce, 2 usage, 3 a file is missing or unreadable.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

CONFIGS = ("fp32", "split_bf16", "autocast")
DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"


class UsageError(Exception):
    pass


# ---- the image task -------------------------------------------------------------------------

def striped_images(count: int, seed: int, size: int = 16):
    """`count` images of four classes of stripes (random period, phase, colours, noise)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (count,), generator=g)
    ys, xs = torch.meshgrid(torch.arange(size, dtype=torch.float32), torch.arange(size, dtype=torch.float32),
                            indexing="ij")
    period = torch.randint(3, 7, (count, 1, 1), generator=g).float()
    phase = torch.rand(count, 1, 1, generator=g) * 2 * math.pi
    coords = torch.stack([ys, xs, (xs + ys) / math.sqrt(2), xs]).unsqueeze(0)  # per class
    along = coords[0, labels]  # [count, size, size]
    wave = torch.sin(2 * math.pi * along / period + phase)
    checker = torch.sin(2 * math.pi * ys / period + phase) * torch.sin(2 * math.pi * xs / period)
    wave = torch.where((labels == 3).view(-1, 1, 1), checker, wave)
    mask = (wave > 0).float().unsqueeze(1)  # [count, 1, size, size]
    fg, bg = torch.rand(count, 3, 1, 1, generator=g), torch.rand(count, 3, 1, 1, generator=g)
    images = mask * fg + (1 - mask) * bg + 0.15 * torch.randn(count, 3, size, size, generator=g)
    return images, labels


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.head(self.features(x))


class ImageTask:
    batch = 64
    lr = {"adamw": 2e-3, "sgd": 0.05}

    def __init__(self, args):
        self.train_x, self.train_y = striped_images(4096, seed=1)
        self.eval_x, self.eval_y = striped_images(1024, seed=2)

    def model(self):
        return SmallCnn()

    def batch_at(self, step: int, g: torch.Generator):
        idx = torch.randint(0, self.train_x.shape[0], (self.batch,), generator=g)
        return self.train_x[idx], self.train_y[idx]

    @staticmethod
    def loss(out, y):
        return F.cross_entropy(out.float(), y)

    def eval_batches(self):
        for i in range(0, self.eval_x.shape[0], 256):
            yield self.eval_x[i:i + 256], self.eval_y[i:i + 256]


# ---- the text task --------------------------------------------------------------------------

class Block(nn.Module):
    """Pre-norm causal self-attention and MLP of linears. The norms run in fp32 (torch 1.13's CPU
    autocast passes layer_norm a bf16 input with an fp32 weight)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x.float())).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, c)).float()
        return x + self.down(F.gelu(self.up(self.norm2(x.float())))).float()


class CharLm(nn.Module):
    def __init__(self, vocab: int, width: int = 64, layers: int = 2, heads: int = 4, context: int = 48):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(context, width) * 0.02)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        x = self.embed(ids).float() + self.pos[:ids.shape[1]]
        return self.head(self.norm(self.blocks(x).float()))


class TextTask:
    batch, context = 16, 48
    lr = {"adamw": 3e-3, "sgd": 0.3}

    def __init__(self, args):
        try:
            with open(args.text, "rb") as f:
                data = f.read()
        except OSError as e:
            raise FileNotFoundError(f"--text {args.text}: {e.strerror}") from e
        if len(data) < 20 * self.context:
            raise UsageError(f"--text {args.text}: {len(data)} bytes; at least {20 * self.context} are needed")
        ids = torch.tensor(list(data), dtype=torch.long)
        split = len(ids) * 9 // 10
        self.train_ids, self.eval_ids = ids[:split], ids[split:]
        self.text_bytes = len(data)

    def model(self):
        return CharLm(256, context=self.context)

    def batch_at(self, step: int, g: torch.Generator):
        starts = torch.randint(0, len(self.train_ids) - self.context - 1, (self.batch,), generator=g)
        x = torch.stack([self.train_ids[s:s + self.context] for s in starts])
        y = torch.stack([self.train_ids[s + 1:s + self.context + 1] for s in starts])
        return x, y

    @staticmethod
    def loss(out, y):
        return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))

    def eval_batches(self):
        n = (len(self.eval_ids) - 1) // self.context
        x = self.eval_ids[:n * self.context].view(n, self.context)
        y = self.eval_ids[1:n * self.context + 1].view(n, self.context)
        for i in range(0, n, 64):
            yield x[i:i + 64], y[i:i + 64]


TASKS = {"cnn": ImageTask, "lm": TextTask}


# ---- training -------------------------------------------------------------------------------

def make_optimizer(name: str, params, lr: float):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)


def evaluate(task, model, autocast: bool) -> float:
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad(), torch.cpu.amp.autocast(enabled=autocast, dtype=torch.bfloat16):
        for x, y in task.eval_batches():
            total += task.loss(model(x), y).item() * y.numel()
            count += y.numel()
    model.train()
    return total / count


def train(task, config: str, args) -> dict:
    import ipex_tool
    torch.manual_seed(0)
    model = task.model()
    optimizer = make_optimizer(args.optimizer, model.parameters(), task.lr[args.optimizer])
    if config == "split_bf16":
        model, optimizer = ipex_tool.optimize(model, optimizer=optimizer, dtype=torch.bfloat16)
    autocast = config != "fp32"
    g = torch.Generator().manual_seed(123)  # the same batches for every configuration
    curve, train_losses = [], []
    base_lr = task.lr[args.optimizer]
    for step in range(1, args.steps + 1):
        # cosine decay to zero: the run ends settled, not at a point of its oscillation
        for group in optimizer.param_groups:
            group["lr"] = base_lr * 0.5 * (1 + math.cos(math.pi * (step - 1) / args.steps))
        x, y = task.batch_at(step, g)
        optimizer.zero_grad(set_to_none=True)
        with torch.cpu.amp.autocast(enabled=autocast, dtype=torch.bfloat16):
            loss = task.loss(model(x), y)
        loss.backward()
        optimizer.step()
        train_losses.append(loss.item())
        if not math.isfinite(train_losses[-1]):
            break
        if step % args.eval_every == 0 or step == args.steps:
            curve.append({"step": step, "eval_loss": evaluate(task, model, autocast),
                          "train_loss": sum(train_losses[-args.eval_every:]) / len(train_losses[-args.eval_every:])})
    last = [c["eval_loss"] for c in curve[-3:]]
    final = sum(last) / len(last) if last and len(train_losses) == args.steps else float("nan")
    return {"config": config, "final_eval_loss": final, "curve": curve}


def main(argv) -> int:
    parser = argparse.ArgumentParser(description="split-bf16 training convergence against fp32")
    parser.add_argument("--task", default="cnn,lm", help="comma list of: " + ", ".join(TASKS))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the LM's text file (default %(default)s)")
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--target", type=float, default=2.0, help="percent; split_bf16 vs fp32 final loss")
    parser.add_argument("--enforce", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    tasks = [t for t in args.task.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise UsageError(f"--task: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(TASKS)}")
    if args.steps < 1 or args.eval_every < 1:
        raise UsageError("--steps and --eval-every must be >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)

    results, ok = [], True
    for name in tasks:
        task = TASKS[name](args)
        runs = {c: train(task, c, args) for c in CONFIGS}
        ref = runs["fp32"]["final_eval_loss"]
        row = {"task": name, "steps": args.steps, "optimizer": args.optimizer, "runs": list(runs.values())}
        if name == "lm":
            row["text"], row["text_bytes"] = args.text, task.text_bytes
        print(f"{name} ({args.steps} steps, {args.optimizer}): held-out loss, mean of the last three evaluations")
        for c in CONFIGS:
            v = runs[c]["final_eval_loss"]
            print(f"  {c:<11} {v:.4f}  ({(v - ref) / ref * 100:+.2f}% vs fp32)")
        diff = abs(runs["split_bf16"]["final_eval_loss"] - ref) / ref * 100
        row["split_bf16_vs_fp32_pct"] = diff
        row["pass"] = bool(diff <= args.target)
        ok &= row["pass"]
        print(f"  target: split_bf16 within {args.target:g}% of fp32: {'PASS' if row['pass'] else 'MISS'} "
              f"({diff:.2f}%)")
        results.append(row)
    report = {"torch": torch.__version__, "threads": torch.get_num_threads(), "target_pct": args.target,
              "tasks": results, "ok": ok}
    if args.json == "-":
        print(json.dumps(report))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if args.enforce and not ok else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"train_convergence.py: {e}", file=sys.stderr)
        sys.exit(2)
    except FileNotFoundError as e:
        print(f"train_convergence.py: {e}", file=sys.stderr)
        sys.exit(3)
