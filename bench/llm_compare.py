#!/usr/bin/python3
"""ipex-tool's LLM runtime beside llama.cpp on the same weights, interleaved in one run.

The Hugging Face directory (Llama-family: bench/llm_make_model.py writes a TinyLlama-shaped one)
is written as GGUF by bench/gguf_write.py once per llama.cpp type; llama.cpp runs it through
node-llama-cpp 3.21.1's prebuilt CPU library (installed on demand into IPEX_LLAMACPP_DIR,
default ~/.cache/ipex-tool/llamacpp, with `npm i -E node-llama-cpp@3.21.1`). Each pair
(ours, llama.cpp's) runs the same random prompt ids at each context, rounds alternating, and
prints the medians and the ratios the LLM issue sets:
  decode ms/token, ours / llama.cpp           (target <= 0.9)
  prefill tokens/s, ours / llama.cpp          (target >= 1.5)
  peak RSS of the process, ours / llama.cpp   (target <= 1.1)
  load time, ours / llama.cpp                 (target <= 1.0)
Pairs: int4 (ours: --woq-dtype int4 --group-size 32, round-to-nearest, --lowp-mode auto: on a CPU
with AVX512-BF16 and VNNI prefill on int8 activations, as llama.cpp multiplies q4_0 with q8_0
activations, decode on bf16) vs q4_0 (blocks of 32); int4a8 (the same with --lowp-mode int8 named)
vs q4_0; int4bf16 (--lowp-mode bf16: prefill on bf16 activations too) vs q4_0; gguf-q4_0 (ours loading llama.cpp's own q4_0 file,
held int4 as stored) vs q4_0; bf16 (weights read in place from the mapped file, the default, as
llama.cpp reads its own) and bf16-copy (--no-mmap: copied into huge pages) vs the faster of f16
and bf16; fp32 vs f32 (--pairs chooses).
The int4 pairs load the Hugging Face weights and quantize them as they load; llama.cpp and
gguf-q4_0 read a file already quantized.

Usage: llm_compare.py HF_DIR [--build DIR] [--contexts 128,512,2048] [--new-tokens 32]
       [--rounds 3] [--threads 2] [--pairs int4,bf16] [--json OUT]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# pair: (our flags, llama.cpp's types, what we load: the HF directory or llama.cpp's file)
PAIRS = {"int4": (["--woq-dtype", "int4", "--group-size", "32"], ["q4_0"], "hf"),
         "int4a8": (["--woq-dtype", "int4", "--group-size", "32", "--lowp-mode", "int8"], ["q4_0"], "hf"),
         "int4bf16": (["--woq-dtype", "int4", "--group-size", "32", "--lowp-mode", "bf16"], ["q4_0"], "hf"),
         "gguf-q4_0": ([], ["q4_0"], "gguf"),
         "bf16": (["--dtype", "bf16"], ["f16", "bf16"], "hf"),
         "bf16-copy": (["--dtype", "bf16", "--no-mmap"], ["f16", "bf16"], "hf"),
         "fp32": (["--dtype", "fp32"], ["f32"], "hf")}


def llamacpp_dir():
    d = os.environ.get("IPEX_LLAMACPP_DIR", os.path.expanduser("~/.cache/ipex-tool/llamacpp"))
    if not os.path.isdir(os.path.join(d, "node_modules", "node-llama-cpp")):
        os.makedirs(d, exist_ok=True)
        print(f"installing node-llama-cpp 3.21.1 into {d} ...", file=sys.stderr)
        subprocess.run(["npm", "init", "-y"], cwd=d, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["npm", "i", "-E", "node-llama-cpp@3.21.1"], cwd=d, check=True)
    shutil.copy(os.path.join(ROOT, "bench", "llamacpp_run.mjs"), d)
    return d


def run_ours(tool, model, flags, context, new_tokens, threads):
    out = subprocess.run([tool, "bench", model, "--llm", "--input-tokens", str(context), "--output-tokens",
                          str(new_tokens), "--iterations", "1", "--threads", str(threads), "--json", "-",
                          # stated limits: no bandwidth probe, whose buffer would count in the peak RSS
                          "--bandwidth-gbs", "1", "--peak-gflops", "1"] + flags,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return {"first_token_ms": d["first_token_ms"]["p50"], "decode_ms": d["next_token_ms"]["p50"],
            "rss_bytes": d["peak_rss_bytes"], "load_ms": d["load_ms"]}


def run_llamacpp(directory, gguf, prompt, new_tokens, threads):
    out = subprocess.run(["node", "llamacpp_run.mjs", gguf, "--prompt-ids", ",".join(map(str, prompt)),
                          "--new-tokens", str(new_tokens + 1), "--threads", str(threads),
                          "--context", str(len(prompt) + new_tokens + 16)],
                         cwd=directory, check=True, capture_output=True, text=True).stdout
    d = json.loads(out.strip().splitlines()[-1])
    return {"first_token_ms": d["first_token_ms"], "decode_ms": d["decode_ms_median"], "rss_bytes": d["peak_rss_bytes"],
            "load_ms": d["load_ms"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--contexts", default="128,512,2048")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pairs", default="int4,bf16")
    p.add_argument("--json")
    a = p.parse_args()
    tool = os.path.join(a.build, "apps", "ipex-tool", "ipex-tool")
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    directory = llamacpp_dir()
    rng = random.Random(7)
    results = []
    for pair in a.pairs.split(","):
        flags, kinds, source = PAIRS[pair]
        ggufs = {}
        for kind in kinds:
            ggufs[kind] = os.path.join(a.model, f"model-{kind}.gguf")
            if not os.path.exists(ggufs[kind]):
                subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gguf_write.py"), a.model, ggufs[kind],
                                "--type", kind], check=True)
        for context in map(int, a.contexts.split(",")):
            prompt = [1] + [rng.randrange(3, cfg["vocab_size"]) for _ in range(context - 1)]
            runs = {"ours": []} | {kind: [] for kind in kinds}
            for _ in range(a.rounds):  # alternating: the host's drift reaches both sides alike
                ours = a.model if source == "hf" else ggufs[kinds[0]]
                runs["ours"].append(run_ours(tool, ours, flags, context, a.new_tokens, a.threads))
                for kind in kinds:
                    runs[kind].append(run_llamacpp(directory, ggufs[kind], prompt, a.new_tokens, a.threads))
            med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
            peer = min(kinds, key=lambda k: med[k]["decode_ms"])
            row = {"pair": pair, "context": context, "peer": peer, "ours": med["ours"], "llama_cpp": med[peer],
                   "decode_ratio": med["ours"]["decode_ms"] / med[peer]["decode_ms"],
                   "prefill_speedup": med[peer]["first_token_ms"] / med["ours"]["first_token_ms"],
                   "rss_ratio": med["ours"]["rss_bytes"] / med[peer]["rss_bytes"],
                   "load_ratio": med["ours"]["load_ms"] / med[peer]["load_ms"]}
            results.append(row)
            print(f"{pair:9} ctx {context:5} vs {peer:5}: decode {med['ours']['decode_ms']:.2f} / "
                  f"{med[peer]['decode_ms']:.2f} ms = {row['decode_ratio']:.2f}x (target <= 0.9); prefill "
                  f"{row['prefill_speedup']:.2f}x llama.cpp's tokens/s (target >= 1.5); peak RSS "
                  f"{med['ours']['rss_bytes'] / 2**30:.2f} / {med[peer]['rss_bytes'] / 2**30:.2f} GiB; load "
                  f"{med['ours']['load_ms'] / 1e3:.2f} / {med[peer]['load_ms'] / 1e3:.2f} s", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
