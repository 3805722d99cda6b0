#!/usr/bin/python3
"""Throughput mode against one stream at the same total batch, side by side in one run:
`ipex-tool bench MODEL --streams S` (each stream batch B/S on its own CPUs) against
`ipex-tool bench MODEL --threads CPUS` (batch B on all of them), and ipex_tool.cpu.runtime's
MultiStreamModule(model, num_streams=S) against the model itself on batch B in Python, and
ipex_tool.optimize(eager model, sample_input=x) against the CLI's output loaded in the same
Python (the same graph: node kinds counted; the same speed within noise). Rounds alternate
(A B, B A, ...); the medians of samples/s are compared.

Models: ResNet-50 at batch 2 and MobileNetV2 at batch 4 (torchvision, random weights), optimized
by `ipex-tool optimize` (bf16 where the CPU has AVX512-BF16, else fp32). Beside the ratios it
records the machine's measured peaks (`ipex-tool info --limits`) and each side's share of the
matching compute peak (the model's FLOPs from `bench --profile`). Results go to --out (JSON)
and a Markdown table on stdout for bench/RESULTS.md.

usage: bench/streams.py [--build DIR] [--streams S] [--rounds N] [--iterations K] [--out FILE]
       bench/streams.py --smoke     (a tiny model, two rounds: checks the plumbing, times nothing)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision  # before ipex_tool, which names torchvision's ops only where no library did

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tool(build, *args) -> dict:
    out = subprocess.run([os.path.join(build, "apps", "ipex-tool", "ipex-tool"), *map(str, args)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out) if out.strip().startswith("{") else {}


def make_models(tmp, smoke):
    if smoke:
        nets = [("tiny_conv", torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                                                  torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()), 2, 32)]
    else:
        nets = [("resnet50", torchvision.models.resnet50(weights=None), 2, 224),
                ("mobilenet_v2", torchvision.models.mobilenet_v2(weights=None), 4, 224)]
    models = []
    for name, net, batch, size in nets:
        torch.manual_seed(0)
        path = os.path.join(tmp, name + ".pt")
        torch.jit.save(torch.jit.trace(net.eval(), torch.randn(batch, 3, size, size)), path)
        models.append((name, path, batch, size, net.eval()))
    return models


def node_kinds(module):
    """Counts of the node kinds of a scripted module's forward graph (inlined)."""
    graph = module.inlined_graph if hasattr(module, "inlined_graph") else module.graph
    counts = {}
    for node in graph.nodes():
        counts[node.kind()] = counts.get(node.kind(), 0) + 1
    return counts


def alternate(a, b, rounds):
    """Runs a() and b() in alternating order; returns their results."""
    ra, rb = [], []
    for i in range(rounds):
        if i % 2:
            rb.append(b())
            ra.append(a())
        else:
            ra.append(a())
            rb.append(b())
    return ra, rb


def python_rate(module, x, iterations):
    with torch.no_grad():
        module(x)
        start = time.perf_counter()
        for _ in range(iterations):
            module(x)
        return iterations * x.shape[0] / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--out", default="streams.json")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.iterations = 2, 3
    sys.path.insert(0, os.path.join(args.build, "python"))
    import ipex_tool as ipex

    cpus = len(os.sched_getaffinity(0))
    streams = min(args.streams, cpus)
    limits = tool(args.build, "info", "--limits", "--json")
    lim = limits.get("limits", limits)
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": cpus, "streams": streams, "limits": limits,
               "models": []}
    with tempfile.TemporaryDirectory(prefix="ipex-streams-") as tmp:
        for name, src, batch, size, eager in make_models(tmp, args.smoke):
            with open("/proc/cpuinfo") as f:
                dtype = "bf16" if "avx512_bf16" in f.read() else "fp32"
            opt = os.path.join(tmp, name + "-opt.pt")
            tool(args.build, "optimize", src, opt, "--dtype", dtype, "--sample-input", f"{batch}x3x{size}x{size}")
            per_stream = max(1, batch // streams)
            common = ["--iterations", args.iterations, "--warmup", 3, "--json", "-"]
            one = lambda: tool(args.build, "bench", opt, "--input", f"{batch}x3x{size}x{size}", "--threads", cpus,
                               *common)["throughput_per_s"]
            many = lambda: tool(args.build, "bench", opt, "--input", f"{per_stream}x3x{size}x{size}", "--streams",
                                streams, *common)["throughput_per_s"]
            cli_one, cli_many = alternate(one, many, args.rounds)

            model = torch.jit.load(opt)
            x = torch.randn(batch, 3, size, size)
            ms = ipex.cpu.runtime.MultiStreamModule(model, num_streams=streams)
            py_one, py_many = alternate(lambda: python_rate(model, x, args.iterations),
                                        lambda: python_rate(ms, x, args.iterations), args.rounds)

            # The Python front end on the eager model against the CLI's output, same process.
            py_opt = ipex.optimize(eager, dtype=torch.bfloat16 if dtype == "bf16" else None, sample_input=x)
            py_opt_module = getattr(py_opt, "module", py_opt)
            same_graph = node_kinds(py_opt_module) == node_kinds(model) if hasattr(py_opt_module, "graph") else None
            py_front, cli_loaded = alternate(lambda: python_rate(py_opt, x, args.iterations),
                                             lambda: python_rate(model, x, args.iterations), args.rounds)

            profile = tool(args.build, "bench", opt, "--input", f"{batch}x3x{size}x{size}", "--profile",
                           "--iterations", 3, "--warmup", 1, "--json", "-")
            flops_per_sample = profile.get("totals", {}).get("compute_flops_per_iteration", 0) / batch
            peak = lim.get("bf16_dot_gflops" if dtype == "bf16" else "fp32_fma_gflops") or 0
            entry = {"model": name, "dtype": dtype, "batch": batch, "per_stream_batch": per_stream,
                     "cli_one_stream": statistics.median(cli_one), "cli_streams": statistics.median(cli_many),
                     "python_model": statistics.median(py_one), "python_multistream": statistics.median(py_many),
                     "python_optimize": statistics.median(py_front), "cli_model_in_python": statistics.median(cli_loaded),
                     "python_optimize_same_graph": same_graph,
                     "flops_per_sample": flops_per_sample, "peak_gflops": peak}
            for key in ("cli_one_stream", "cli_streams", "python_model", "python_multistream"):
                entry[key + "_peak_share"] = (entry[key] * flops_per_sample / 1e9 / peak) if peak else None
            entry["cli_ratio"] = entry["cli_streams"] / entry["cli_one_stream"]
            entry["python_ratio"] = entry["python_multistream"] / entry["python_model"]
            entry["optimize_ratio"] = entry["python_optimize"] / entry["cli_model_in_python"]
            results["models"].append(entry)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"| model | batch | streams | CLI samples/s 1 -> {streams} streams | ratio | "
          f"Python model -> MultiStreamModule | ratio | peak share ({streams} streams) |")
    print("|---|---|---|---|---|---|---|---|")
    for e in results["models"]:
        share = e["cli_streams_peak_share"]
        print(f"| {e['model']} {e['dtype']} | {e['batch']} | {streams} x b{e['per_stream_batch']} | "
              f"{e['cli_one_stream']:.1f} -> {e['cli_streams']:.1f} | {e['cli_ratio']:.2f}x | "
              f"{e['python_model']:.1f} -> {e['python_multistream']:.1f} | {e['python_ratio']:.2f}x | "
              f"{'-' if share is None else f'{share:.1%}'} |")
    print()
    print("| model | ipex_tool.optimize vs the CLI's model, samples/s | ratio | same graph |")
    print("|---|---|---|---|")
    for e in results["models"]:
        print(f"| {e['model']} {e['dtype']} | {e['python_optimize']:.1f} vs {e['cli_model_in_python']:.1f} | "
              f"{e['optimize_ratio']:.2f}x | {e['python_optimize_same_graph']} |")


if __name__ == "__main__":
    main()
