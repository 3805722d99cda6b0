#!/usr/bin/python3
"""Side-by-side benchmark of one model: ONNX Runtime fp32, stock libtorch and our optimized models.

usage: ort_compare.py MODEL_DIR [options]

MODEL_DIR holds model.pt (the original TorchScript), model.onnx (the same weights), inputs/*.npy
(forward arguments in file-name order; --make-inputs writes them when missing) and the
optimized models ours_*.pt (or name them with --ours). model.json and flops.txt from
make_transformer_models.py are read when present.

Each of --rounds rounds runs every configuration once, as a whole process of its own, in an
order rotated by one each round; a process warms up, then times --iterations calls and reports
its median. Reported per configuration: the median of its round medians, the ratio to ONNX
Runtime fp32 and to stock libtorch (ratio = their time / this time; above 1 is faster), and,
with --flops, GFLOP/s and the share of the compute peak for its dtype. Configurations:
  ort_fp32             node bench/ort_run.js (CPU execution provider, graph optimization 'all')
  stock_fp32           ipex-tool bench model.pt: the original as libtorch runs it when loaded
                       (--no-stock leaves the stock rows out; --stock-iterations caps their calls)
  stock_frozen_fp32    the --baseline stock of that same process: frozen with torch.jit.freeze
  stock_autocast_bf16  (--stock-bf16) python: torch.jit.load, freeze, torch.cpu.amp.autocast
  ours_NAME            ipex-tool bench ours_NAME.pt
Correctness: every output of ours (loaded in python with libipex_ops.so) and of the original
is compared with ONNX Runtime's outputs (cosine in fp64, max abs error).

Targets: --target CONFIG=VALUE, VALUE one of 1.8 or 1.8x (ratio to ort_fp32), 1.2xstock
(ratio to stock_frozen_fp32, the stock run of the same dtype for bf16 ones when timed) or
50%peak (share of the peak). PASS/MISS is printed per target; --enforce exits 1 on a MISS.
Exit codes: 0 ok, 1 a target missed (--enforce), 2 usage, 3 missing or unreadable files.
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(ROOT, "bench", "ort_run.js")
DEFAULT_TOOL = os.path.join(ROOT, "build", "apps", "ipex-tool", "ipex-tool")
PYTHON = "/usr/bin/python3"
EXIT_MISSED, EXIT_USAGE, EXIT_BAD_INPUT = 1, 2, 3
STDERR_TAIL = 600


class UsageError(Exception):
    def __init__(self, message, code=EXIT_USAGE):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# Helpers run in a python of their own (so a crash in an op library cannot take the driver down)


def forward_args(module, tensors):
    """The inputs as the module's forward takes them: one list when its first argument is a
    List[Tensor] (torchvision's scripted detectors take [image]), else one argument each."""
    import torch
    arguments = module.forward.schema.arguments[1:]  # after self
    if arguments and isinstance(arguments[0].type, torch.ListType):
        return [list(tensors)]
    return list(tensors)


def helper_time_autocast(argv):
    """_time_autocast MODEL THREADS WARMUP ITERATIONS INPUT... -> JSON {median_ms, p90_ms}"""
    import numpy as np
    import torch
    model, threads, warmup, iterations, files = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4:]
    torch.set_num_threads(threads)
    module = torch.jit.freeze(torch.jit.load(model).eval())
    inputs = forward_args(module, [torch.from_numpy(np.load(f)) for f in files])
    samples = []
    with torch.no_grad(), torch.cpu.amp.autocast(dtype=torch.bfloat16):
        for _ in range(warmup):
            module(*inputs)
        for _ in range(iterations):
            start = time.perf_counter()
            module(*inputs)
            samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    rank = lambda p: samples[max(1, math.ceil(p / 100 * len(samples))) - 1]
    print(json.dumps({"median_ms": rank(50), "p90_ms": rank(90), "samples_ms": samples}))


def helper_check_outputs(argv):
    """_check_outputs OPS_LIB REFERENCE_DIR INPUTS_JSON MODEL... -> JSON per model and output"""
    import numpy as np
    import torch
    ops_lib, reference_dir, files, models = argv[0], argv[1], json.loads(argv[2]), argv[3:]
    torch.set_num_threads(2)
    if ops_lib:
        torch.ops.load_library(ops_lib)
    references = [np.load(f) for f in sorted(glob.glob(os.path.join(reference_dir, "*.npy")))]

    def leaves(value):
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (list, tuple)):
            return [t for v in value for t in leaves(v)]
        if isinstance(value, dict):
            return [t for k in value for t in leaves(value[k])]
        return []

    result = {}
    for model in models:
        try:
            module = torch.jit.load(model).eval()
            with torch.no_grad():
                outputs = leaves(module(*forward_args(module, [torch.from_numpy(np.load(f)) for f in files])))
            if len(outputs) != len(references):
                raise RuntimeError(f"{len(outputs)} outputs, ONNX Runtime gave {len(references)}")
            rows = []
            for out, ref in zip(outputs, references):
                a = out.detach().to(torch.float64).reshape(-1)
                b = torch.from_numpy(ref).to(torch.float64).reshape(-1)
                if a.numel() != b.numel():
                    raise RuntimeError(f"shape {list(out.shape)} vs ONNX Runtime {list(ref.shape)}")
                # Equal outputs count as cosine 1 even when they are all zero.
                cosine = 1.0 if torch.equal(a, b) else float(
                    torch.dot(a, b) / (a.norm() * b.norm()).clamp_min(1e-300))
                rows.append({"shape": list(out.shape), "dtype": str(out.dtype).replace("torch.", ""),
                             "cosine": cosine, "max_abs_err": float((a - b).abs().max()) if a.numel() else 0.0})
            result[model] = {"outputs": rows, "cosine": min(r["cosine"] for r in rows)}
        except Exception as e:  # reported beside the timing, not fatal
            result[model] = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}"}
    print(json.dumps(result))


HELPERS = {"_time_autocast": helper_time_autocast, "_check_outputs": helper_check_outputs}


# ---------------------------------------------------------------------------------------------


def run_json(cmd, timeout):
    """Runs cmd; returns (parsed JSON from stdout, None) or (None, error text)."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    except OSError as e:
        return None, str(e)
    if proc.returncode != 0:
        tail = proc.stderr.strip()[-STDERR_TAIL:] or "(no message)"
        return None, f"exit {proc.returncode}: {tail}"
    try:
        return json.loads(proc.stdout), None
    except json.JSONDecodeError:
        return None, "no JSON on stdout: " + proc.stdout.strip()[-STDERR_TAIL:]


def find_ops_lib(tool, given):
    if given:
        return given
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tool))))
    for candidate in ("lib/libipex_ops.so", "lib/ops/libipex_ops.so"):
        path = os.path.join(build, candidate)
        if os.path.exists(path):
            return path
    found = glob.glob(os.path.join(build, "**", "libipex_ops.so"), recursive=True)
    return found[0] if found else None


def make_inputs(directory, specs, seed):
    import numpy as np
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, spec in enumerate(specs):
        shape, _, dtype = spec.partition(":")
        dims = [int(d) for d in shape.split("x")]
        if dtype in ("", "fp32", "float32"):
            array = rng.standard_normal(dims, dtype=np.float32)
        elif dtype in ("int64", "i64"):
            array = rng.integers(0, 100, dims, dtype=np.int64)
        elif dtype == "bool":
            array = rng.integers(0, 2, dims).astype(bool)
        else:
            raise UsageError(f"--make-inputs '{spec}': dtype must be fp32, int64 or bool")
        np.save(os.path.join(directory, f"{i:02d}_input.npy"), array)


def blas_library():
    """The BLAS libtorch's matmuls reach through Debian's alternatives (netlib is the reference
    implementation, far from the machine's peak); printed so stock ratios can be read."""
    for path in ("/usr/lib/x86_64-linux-gnu/libblas.so.3", "/usr/lib/libblas.so.3"):
        if os.path.exists(path):
            return os.path.realpath(path)
    return None


def parse_target(text):
    name, sep, value = text.partition("=")
    m = re.fullmatch(r"\s*([0-9.]+)\s*(x|xort|xstock|%peak)?\s*", value)
    if not sep or not name or not m:
        raise UsageError(f"--target '{text}': expected CONFIG=1.8, CONFIG=1.2xstock or CONFIG=50%peak")
    kind = {None: "ort", "x": "ort", "xort": "ort", "xstock": "stock", "%peak": "peak"}[m.group(2)]
    need = float(m.group(1)) / (100.0 if kind == "peak" else 1.0)
    return {"spec": text, "config": name.strip(), "kind": kind, "need": need}


def is_bf16(config):
    return "bf16" in config


class Config:
    def __init__(self, name, command, parse):
        self.name, self.command, self.parse = name, command, parse
        self.error = None


def build_configs(args, model_dir, inputs, ours, ort_out):
    threads, warmup, iterations = str(args.threads), str(args.warmup), str(args.iterations)
    tool_inputs = [a for f in inputs for a in ("--input", f)]
    tool_common = ["--iterations", iterations, "--warmup", warmup, "--threads", threads,
                   "--json", "-", "-q"]
    ort_cmd = [args.node, ORT_RUN, os.path.join(model_dir, "model.onnx"), *inputs,
               "--warmup", warmup, "--iterations", iterations, "--threads", threads,
               "--inter-threads", "1", "--save-outputs", ort_out, "--first", "4"]
    if args.ort_dir:
        ort_cmd += ["--ort-dir", args.ort_dir]
    original = os.path.join(model_dir, "model.pt")

    def tool_parse(j):
        rows = {"": j["latency_ms"]["median"]}
        if j.get("baseline"):
            rows["baseline"] = j["baseline"]["latency_ms"]["median"]
        return rows

    configs = [Config("ort_fp32", ort_cmd, lambda j: {"": j["median_ms"]})]
    if not args.no_stock:
        # The stock model runs its fp32 products on the system BLAS (seconds per call on a
        # transformer): --stock-iterations caps its timed calls (its warmup is one call).
        stock_iterations = str(args.stock_iterations or iterations)
        stock_common = ["--iterations", stock_iterations, "--warmup", "1" if args.stock_iterations else warmup,
                        "--threads", threads, "--json", "-", "-q"]
        configs.append(Config("stock_fp32", [args.ipex_tool, "bench", original, *tool_inputs,
                                             "--baseline", "stock", "--original", original,
                                             *stock_common], tool_parse))
    if args.stock_bf16:
        configs.append(Config("stock_autocast_bf16",
                              [PYTHON, os.path.abspath(__file__), "_time_autocast", original,
                               threads, warmup, iterations, *inputs],
                              lambda j: {"": j["median_ms"]}))
    for name, path in ours:
        configs.append(Config(name, [args.ipex_tool, "bench", path, *tool_inputs, *tool_common],
                              tool_parse))
    return configs


def fmt(value, spec):
    """format(value, spec), '-' for None; a trailing '~' in spec appends 'x' (a ratio)."""
    if value is None:
        return "-"
    return format(value, spec[:-1]) + "x" if spec.endswith("~") else format(value, spec)


def main(argv):
    if argv and argv[0] in HELPERS:
        HELPERS[argv[0]](argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="See the module docstring (head bench/ort_compare.py) for the configurations.")
    parser.add_argument("model_dir", help="directory with model.pt, model.onnx, inputs/, ours_*.pt")
    parser.add_argument("--ours", action="append", default=[], metavar="[NAME=]FILE",
                        help="optimized model to time (repeatable; default: MODEL_DIR/ours_*.pt)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--iterations", type=int, default=20, help="timed calls per process (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per process (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads everywhere (default 2)")
    parser.add_argument("--ipex-tool", default=DEFAULT_TOOL, help=f"ipex-tool binary (default {DEFAULT_TOOL})")
    parser.add_argument("--ops-lib", help="libipex_ops.so for the correctness check (default: found in the build tree)")
    parser.add_argument("--node", default="node", help="node binary (default: node on PATH)")
    parser.add_argument("--ort-dir", default=os.environ.get("IPEX_ORT_DIR"),
                        help="directory whose node_modules holds onnxruntime-node (default $IPEX_ORT_DIR)")
    parser.add_argument("--stock-bf16", action="store_true",
                        help="also time the original under torch.cpu.amp.autocast bf16 in python")
    parser.add_argument("--no-stock", action="store_true",
                        help="do not time the stock libtorch runs (ratios to stock are then '-')")
    parser.add_argument("--stock-iterations", type=int,
                        help="timed calls of the stock fp32 process (default --iterations; its warmup is then 1)")
    parser.add_argument("--flops", type=float, help="floating-point operations per forward call")
    parser.add_argument("--peak-bf16-gflops", type=float,
                        help="bf16 compute peak (default: measured by ipex-tool info --limits on --threads)")
    parser.add_argument("--peak-fp32-gflops", type=float,
                        help="fp32 compute peak (default: measured by ipex-tool info --limits on --threads)")
    parser.add_argument("--make-inputs", nargs="+", metavar="SPEC",
                        help="write inputs/ from SPECs (8x128x768[:fp32|int64|bool]) when it has no .npy")
    parser.add_argument("--seed", type=int, default=0, help="seed for --make-inputs")
    parser.add_argument("--target", action="append", default=[], metavar="CONFIG=VALUE",
                        help="CONFIG=1.8 (x ORT fp32), CONFIG=1.2xstock, CONFIG=50%%peak")
    parser.add_argument("--enforce", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per process (default 1800)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON to FILE (- for stdout)")
    parser.add_argument("--label", help="name printed in the table (default: model.json's or the directory's)")
    args = parser.parse_args(argv)
    for name in ("rounds", "iterations", "threads"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    targets = [parse_target(t) for t in args.target]

    model_dir = os.path.abspath(args.model_dir)
    for f in ("model.pt", "model.onnx"):
        if not os.path.isfile(os.path.join(model_dir, f)):
            raise UsageError(f"'{os.path.join(model_dir, f)}': no such file", EXIT_BAD_INPUT)
    if not os.path.isfile(args.ipex_tool):
        raise UsageError(f"'{args.ipex_tool}': no ipex-tool binary (build it or pass --ipex-tool)",
                         EXIT_BAD_INPUT)
    input_dir = os.path.join(model_dir, "inputs")
    inputs = sorted(glob.glob(os.path.join(input_dir, "*.npy")))
    if not inputs and args.make_inputs:
        make_inputs(input_dir, args.make_inputs, args.seed)
        inputs = sorted(glob.glob(os.path.join(input_dir, "*.npy")))
    if not inputs:
        raise UsageError(f"'{input_dir}': no .npy inputs (write them or pass --make-inputs)",
                         EXIT_BAD_INPUT)
    meta = {}
    if os.path.isfile(os.path.join(model_dir, "model.json")):
        with open(os.path.join(model_dir, "model.json")) as f:
            meta = json.load(f)
    ours = []
    for item in args.ours:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = os.path.splitext(os.path.basename(item))[0], item
        ours.append((name if name.startswith("ours") else f"ours_{name}", os.path.abspath(path)))
    if not args.ours:
        ours = [(os.path.splitext(os.path.basename(p))[0], p)
                for p in sorted(glob.glob(os.path.join(model_dir, "ours_*.pt")))]
    for name, path in ours:
        if not os.path.isfile(path):
            raise UsageError(f"'{path}': no such file ({name})", EXIT_BAD_INPUT)

    peaks_source = "given"
    bf16_peak_absent = False  # no bf16 dot product on this CPU: bf16 rows use the fp32 peak
    if args.peak_bf16_gflops is None or args.peak_fp32_gflops is None:
        # The host of a VM changes from day to day: compare with limits measured in this run.
        limits, error = run_json([args.ipex_tool, "info", "--limits", "--threads", str(args.threads), "--json"],
                                 args.timeout)
        if error:
            raise UsageError(f"ipex-tool info --limits failed: {error}", EXIT_BAD_INPUT)
        limits = limits["limits"]
        fp32 = limits["fp32_fma_gflops"] or 0.0
        if args.peak_fp32_gflops is None:
            args.peak_fp32_gflops = fp32
        if args.peak_bf16_gflops is None:
            bf16_peak_absent = not limits["bf16_dot_gflops"]
            args.peak_bf16_gflops = limits["bf16_dot_gflops"] or fp32
        peaks_source = "measured"
        bf16_text = f"{args.peak_bf16_gflops:.1f} GFLOP/s" if not bf16_peak_absent else \
            "absent (no AVX512-BF16; bf16 rows use the fp32 peak)"
        print(f"limits measured on {limits['threads']} threads: bf16 {bf16_text}, "
              f"fp32 {args.peak_fp32_gflops:.1f} GFLOP/s", file=sys.stderr)

    ort_out = os.path.join(model_dir, "ort_outputs")
    configs = build_configs(args, model_dir, inputs, ours, ort_out)
    label = args.label or meta.get("name") or os.path.basename(model_dir)
    medians = {}  # row name -> [round medians]
    print(f"{label}: {args.rounds} round(s) of {len(configs)} processes, "
          f"{args.warmup}+{args.iterations} calls each, {args.threads} threads", file=sys.stderr)
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for config in order:
            if config.error:
                continue
            start = time.monotonic()
            result, error = run_json(config.command, args.timeout)
            if error:
                config.error = error
                print(f"  round {r + 1} {config.name}: FAILED {error.splitlines()[-1][:200]}",
                      file=sys.stderr)
                continue
            rows = config.parse(result)
            for key, value in rows.items():
                row = config.name if key == "" else "stock_frozen_fp32"
                medians.setdefault(row, []).append(value)
            print(f"  round {r + 1} {config.name}: {rows[''] :.3f} ms median "
                  f"({time.monotonic() - start:.0f} s)", file=sys.stderr)

    # Correctness against ONNX Runtime's outputs (saved by the ort_fp32 runs).
    check = {}
    if os.path.isdir(ort_out) and not next(c for c in configs if c.name == "ort_fp32").error:
        ops_lib = find_ops_lib(args.ipex_tool, args.ops_lib)
        models = [os.path.join(model_dir, "model.pt")] + [p for _, p in ours]
        result, error = run_json([PYTHON, os.path.abspath(__file__), "_check_outputs", ops_lib or "",
                                  ort_out, json.dumps(inputs), *models], args.timeout)
        check = result or {m: {"error": error} for m in models}
    cosine_of = {"stock_fp32": check.get(os.path.join(model_dir, "model.pt"))}
    for name, path in ours:
        cosine_of[name] = check.get(path)

    order = ["ort_fp32", "stock_fp32", "stock_frozen_fp32", "stock_autocast_bf16"] + [n for n, _ in ours]
    errors = {c.name: c.error for c in configs if c.error}
    ort = statistics.median(medians["ort_fp32"]) if medians.get("ort_fp32") else None
    stock_fp32 = medians.get("stock_frozen_fp32") or medians.get("stock_fp32")
    stock_fp32 = statistics.median(stock_fp32) if stock_fp32 else None
    stock_bf16 = statistics.median(medians["stock_autocast_bf16"]) if medians.get("stock_autocast_bf16") else None
    rows = {}
    for name in order:
        if name not in medians and name not in errors:
            continue
        row = {"round_medians_ms": medians.get(name, []), "error": errors.get(name)}
        ms = statistics.median(medians[name]) if medians.get(name) else None
        row["median_ms"] = ms
        row["vs_ort_fp32"] = ort / ms if ms and ort else None
        row["vs_stock_fp32"] = stock_fp32 / ms if ms and stock_fp32 else None
        row["vs_stock_bf16"] = stock_bf16 / ms if ms and stock_bf16 else None
        peak = args.peak_bf16_gflops if is_bf16(name) else args.peak_fp32_gflops
        row["peak_gflops"] = peak
        row["gflops"] = args.flops / ms / 1e6 if ms and args.flops else None
        row["peak_fraction"] = row["gflops"] / peak if row["gflops"] and peak else None
        c = cosine_of.get(name)
        row["cosine_vs_ort"] = c.get("cosine") if c else None
        row["check_error"] = c.get("error") if c else None
        rows[name] = row

    for t in targets:
        row = rows.get(t["config"])
        if row is None:
            t["got"], t["pass"], t["why"] = None, False, "no such configuration"
            continue
        stock = row["vs_stock_bf16"] if is_bf16(t["config"]) and row["vs_stock_bf16"] else row["vs_stock_fp32"]
        t["got"] = {"ort": row["vs_ort_fp32"], "stock": stock, "peak": row["peak_fraction"]}[t["kind"]]
        t["pass"] = t["got"] is not None and t["got"] >= t["need"]
        t["why"] = row["error"] if row["error"] else (None if t["got"] is not None else
                                                      "not measured (pass --flops for %peak)")

    # Table.
    flops_text = f", {args.flops / 1e9:.2f} GFLOP per call" if args.flops else ""
    print(f"\n{label}{': ' + meta['description'] if meta.get('description') else ''}{flops_text}")
    blas = blas_library()
    print(f"{args.threads} threads; median of {args.rounds} round median(s), "
          f"{args.iterations} timed calls each; ratios: their time / this time"
          f"{'; system BLAS ' + blas if blas else ''}")
    head = f"{'config':<20} {'median ms':>10} {'vs ORT':>7} {'vs stock fp32':>13} {'vs stock bf16':>13} " \
           f"{'GFLOP/s':>8} {'% peak':>7} {'cosine vs ORT':>13}"
    print(head)
    print("-" * len(head))
    for name, row in rows.items():
        if row["median_ms"] is None:
            print(f"{name:<20} FAILED: {row['error'].splitlines()[-1][:100]}")
            continue
        cosine = fmt(row["cosine_vs_ort"], ".6f") if not row["check_error"] else "error"
        if name in ("ort_fp32", "stock_frozen_fp32", "stock_autocast_bf16"):
            cosine = "" if name != "ort_fp32" else "(reference)"
        peak = fmt(row["peak_fraction"] and row["peak_fraction"] * 100, ".1f")
        print(f"{name:<20} {row['median_ms']:>10.3f} {fmt(row['vs_ort_fp32'], '.2f~'):>7} "
              f"{fmt(row['vs_stock_fp32'], '.2f~'):>13} {fmt(row['vs_stock_bf16'], '.2f~'):>13} "
              f"{fmt(row['gflops'], '.1f'):>8} {peak:>7} {cosine:>13}")
    for name, row in rows.items():
        if row["check_error"]:
            print(f"  {name}: output check failed: {row['check_error']}")
    if targets:
        print("targets:")
    for t in targets:
        unit = {"ort": " ORT fp32", "stock": " stock", "peak": " of peak"}[t["kind"]]
        show = (lambda v: f"{v * 100:.1f}%") if t["kind"] == "peak" else (lambda v: f"{v:.2f}x")
        got = show(t["got"]) if t["got"] is not None else "-"
        why = f" ({t['why'].splitlines()[-1][:120]})" if t["why"] else ""
        print(f"  {'PASS' if t['pass'] else 'MISS'} {t['config']} >= {show(t['need'])}{unit}: "
              f"got {got}{why}")

    summary = {
        "model": label, "model_dir": model_dir, "description": meta.get("description"),
        "threads": args.threads, "rounds": args.rounds, "iterations": args.iterations,
        "warmup": args.warmup, "flops": args.flops,
        "peaks_gflops": {"bf16": None if bf16_peak_absent else args.peak_bf16_gflops, "fp32": args.peak_fp32_gflops,
                         "source": peaks_source},
        "inputs": inputs, "system_blas": blas, "configs": rows, "correctness": check, "targets": targets,
        "ok": all(t["pass"] for t in targets),
    }
    if args.json:
        text = json.dumps(summary, indent=1) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            tmp = f"{args.json}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, args.json)
    return EXIT_MISSED if args.enforce and not summary["ok"] else 0


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"ort_compare: error: {e}", file=sys.stderr)
        sys.exit(e.code)
