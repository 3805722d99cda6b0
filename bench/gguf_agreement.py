#!/usr/bin/python3
"""Our run of a GGUF file beside llama.cpp's run of the same file: the same greedy ids, and logits
that agree (the GGUF issue's acceptance: ids for F32/F16/Q8_0, cosine of logits for 4-bit types).

For each GGUF type, the Hugging Face directory (a Llama-family checkpoint, as bench/llm_make_model.py
writes or the tests' fixtures) is written as GGUF by bench/gguf_write.py (once: model-TYPE.gguf
beside it), or FILE.gguf arguments are taken as they are. Ours: `ipex-tool generate FILE --prompt-ids
P --greedy --max-new-tokens N --dtype fp32 --lowp-mode L --logits X.npy`. llama.cpp (node-llama-cpp
3.21.1's CPU library, bench/llamacpp_run.mjs --score-ids): the same prompt, then our ids, its
log-softmax at each of those positions (temperature 1, no truncation). Per position both rows are
log-softmaxed and centred (logits are defined up to a constant per row), and compared by cosine;
llama.cpp's argmax there is its greedy id given the same prefix.

Printed per type: our ids = llama.cpp's argmax at every position (yes/no, and where they first
differ), the smallest cosine over the positions, the mean |difference| of the log-probabilities.
Targets: ids equal for f32, f16, bf16 and q8_0; cosine >= --min-cosine (default 0.999) for every
type. llama.cpp multiplies q4/q5/q6/q8 weights with activations quantized to 8 bits (q8_0/q8_K)
where ours keeps them fp32 with --lowp-mode fp32 (int8 makes ours quantize them too): the cosine
then measures both quantizations of the activations, not the weights' decoding alone.

Usage: gguf_agreement.py HF_DIR|FILE.gguf... [--types f32,f16,q8_0,q4_0,q4_1,q4_K,q5_K,q6_K]
       [--prompt-tokens 16] [--new-tokens 8] [--lowp-mode fp32|int8] [--min-cosine 0.999]
       [--build DIR] [--threads 2] [--seed 7] [--json OUT]
Exit codes: 0 every target met, 1 a target missed, 2 usage, 3 a run failed.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from llm_compare import llamacpp_dir  # noqa: E402

EXACT_TYPES = ("f32", "f16", "bf16", "q8_0")


def log_softmax_centred(row):
    top = max(row)
    lse = top + math.log(sum(math.exp(x - top) for x in row))
    values = [x - lse for x in row]
    mean = sum(values) / len(values)
    return [x - mean for x in values]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else float("nan")


def ours(tool, gguf, prompt, new_tokens, lowp, threads, out_npy):
    import numpy as np
    run = subprocess.run([tool, "generate", gguf, "--prompt-ids", ",".join(map(str, prompt)), "--greedy",
                          "--max-new-tokens", str(new_tokens), "--dtype", "fp32", "--lowp-mode", lowp,
                          "--threads", str(threads), "--logits", out_npy, "--json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ipex-tool generate {gguf} exited {run.returncode}: {run.stderr.strip()}")
    ids = json.loads(run.stdout)["sequences"][0]["ids"]
    logits = np.load(out_npy)[0, :len(ids)].astype("float64")
    return ids, [list(r) for r in logits]


def llamacpp(directory, gguf, prompt, ids, threads):
    run = subprocess.run(["node", "llamacpp_run.mjs", gguf, "--prompt-ids", ",".join(map(str, prompt)), "--score-ids",
                          ",".join(map(str, ids)), "--threads", str(threads),
                          "--context", str(len(prompt) + len(ids) + 16)],
                         cwd=directory, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"llama.cpp on {gguf} exited {run.returncode}: {run.stderr.strip()[-500:]}")
    d = json.loads(run.stdout.strip().splitlines()[-1])
    return d["argmax"], d["log_probs"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--types", default="f32,f16,q8_0,q4_0,q4_1,q4_K,q5_K,q6_K")
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--lowp-mode", default="fp32", choices=["fp32", "int8"])
    p.add_argument("--min-cosine", type=float, default=0.999)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json")
    a = p.parse_args()
    if a.prompt_tokens < 1 or a.new_tokens < 1:
        print("--prompt-tokens and --new-tokens must be positive", file=sys.stderr)
        return 2
    tool = os.path.join(a.build, "apps", "ipex-tool", "ipex-tool")
    files = []  # (type, path, vocabulary size or None)
    for m in a.models:
        if m.endswith(".gguf"):
            files.append((os.path.basename(m), m, None))
            continue
        with open(os.path.join(m, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        for kind in a.types.split(","):
            path = os.path.join(m, f"model-{kind}.gguf")
            if not os.path.exists(path):
                subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gguf_write.py"), m, path, "--type", kind],
                               check=True)
            files.append((kind, path, vocab))
    directory = llamacpp_dir()
    rng = random.Random(a.seed)
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for kind, gguf, vocab in files:
            try:
                if vocab is None:  # a file given as it is: its vocabulary from a one-token run of ours
                    _, first = ours(tool, gguf, [1], 1, a.lowp_mode, a.threads, os.path.join(tmp, "v.npy"))
                    vocab = len(first[0])
                prompt = [1] + [rng.randrange(3, vocab) for _ in range(a.prompt_tokens - 1)]
                ids, our_logits = ours(tool, gguf, prompt, a.new_tokens, a.lowp_mode, a.threads,
                                       os.path.join(tmp, "l.npy"))
                their_ids, their_log_probs = llamacpp(directory, gguf, prompt, ids, a.threads)
            except (RuntimeError, OSError, ValueError) as e:
                print(f"{kind}: {e}", file=sys.stderr)
                return 3
            cosines, diffs = [], []
            for mine, theirs in zip(our_logits, their_log_probs):
                if len(theirs) < len(mine) or any(x is None for x in theirs[:len(mine)]):
                    cosines.append(float("nan"))
                    continue
                x, y = log_softmax_centred(mine), log_softmax_centred(theirs[:len(mine)])
                cosines.append(cosine(x, y))
                diffs.append(sum(abs(u - v) for u, v in zip(x, y)) / len(x))
            first_diff = next((i for i, (u, v) in enumerate(zip(ids, their_ids)) if u != v), None)
            same_ids = first_diff is None and len(ids) == len(their_ids)
            worst = min(cosines) if cosines else float("nan")
            ids_needed = kind.split(".")[0].lower() in EXACT_TYPES
            passed = (same_ids or not ids_needed) and worst >= a.min_cosine
            ok &= passed
            rows.append({"type": kind, "file": gguf, "prompt": prompt, "ids": ids, "llama_cpp_argmax": their_ids,
                         "same_ids": same_ids, "min_cosine": worst, "mean_abs_log_prob_diff": sum(diffs) / max(len(diffs), 1)})
            print(f"{kind:6} ids {'equal' if same_ids else f'differ from step {first_diff + 1}'}"
                  f"{' (required)' if ids_needed else ''}; min cosine of centred log-probabilities {worst:.6f} "
                  f"(target >= {a.min_cosine}); mean |difference| {rows[-1]['mean_abs_log_prob_diff']:.2e}: "
                  f"{'PASS' if passed else 'MISS'}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
