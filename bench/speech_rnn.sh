#!/usr/bin/env bash
# Speech-style RNN benchmark: conv1d + 2-layer LSTM (and a GRU variant) over 200 frames of 80
# log-mel features, batch 8 (bench/make_rnn_models.py). Each model is optimized to fp32 and
# bf16 (`--optimize-lstm`, on by default: oneDNN RNN primitives with prepacked weights),
# checked with verify and timed interleaved, in one run, against stock libtorch on the same
# weights and inputs (frozen fp32; frozen autocast-bf16). Prints a markdown table: ratio to
# each baseline, cosine vs fp32, GFLOP/s reached and that as a fraction of this machine's
# measured oneDNN matmul peak in the same dtype. The ONNX export of the LSTM model
# ($work/rnn/speech_lstm.onnx) is what bench/ort_compare.py times against ONNX Runtime.
# Usage: bash bench/speech_rnn.sh [ITERATIONS]   (needs a build in ./build or $IPEX_BUILD_DIR)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
work="${IPEX_DEMO_DIR:-$root/demo}/rnn"
iterations="${1:-10}"
tool="$build/apps/ipex-tool/ipex-tool"
compare="$build/bench/compare_stock"
py=/usr/bin/python3
mkdir -p "$work"
cmake --build "$build" --target ipex-tool ipex_ops compare_stock >/dev/null
"$py" "$root/bench/make_rnn_models.py" "$work" --onnx "$work/speech_lstm.onnx" >/dev/null
input="$work/speech.input.pt"

results="$work/speech-results.jsonl"
: > "$results"
for cell in lstm gru; do
    src="$work/speech_$cell.pt"
    for dtype in fp32 bf16; do
        out="$work/speech_$cell-$dtype.pt"
        [ -f "$out" ] || "$tool" optimize "$src" "$out" --dtype "$dtype" --sample-input "$input" -q \
            --report "$out.report.json"
        baselines=fp32
        [ "$dtype" = bf16 ] && baselines=fp32,bf16
        cosine=$("$tool" verify "$src" "$out" --input "$input" --json |
                 "$py" -c 'import json,sys; print(min(o["cosine"] for o in json.load(sys.stdin)["outputs"]))')
        "$compare" --original "$src" --candidate "$out" --input "$input" --baselines "$baselines" \
            --iterations "$iterations" --warmup 2 --label "speech $cell $dtype" --json |
            "$py" -c 'import json,sys; j=json.loads(sys.stdin.read()); j.update(cosine=float(sys.argv[1]), model=sys.argv[2], dtype=sys.argv[3]); print(json.dumps(j))' \
            "$cosine" "speech_$cell" "$dtype" >> "$results"
        tail -n 1 "$results" >&2
    done
done

"$py" - "$results" "$work/speech_models.json" "$build/lib/libipex_ops.so" <<'PY'
import json, sys, time
import torch

rows = [json.loads(line) for line in open(sys.argv[1])]
models = json.load(open(sys.argv[2]))
torch.ops.load_library(sys.argv[3])
threads = rows[0]["threads"]
torch.set_num_threads(threads)


def matmul_peak(dtype, n=2048, runs=5):
    """GFLOP/s of the best of a few n x n x n oneDNN matmuls (the prepacked linear op) in
    `dtype`: the compute ceiling this machine shows for that dtype."""
    ctx = torch.ops.ipex.linear_prepack(torch.randn(n, n), None, dtype, [], [], n)
    x = torch.randn(n, n).to(torch.bfloat16 if dtype == "bf16" else torch.float32)
    torch.ops.ipex.linear(x, ctx)
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        torch.ops.ipex.linear(x, ctx)
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


peaks = {"fp32": matmul_peak("fp32"), "bf16": matmul_peak("bf16")}
print()
print("| model | dtype | median ms | vs stock fp32 frozen | vs stock autocast-bf16 | cosine vs fp32 | GFLOP/s | of matmul peak |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    cand = next(k for k in r["median_ms"] if not k.startswith("stock"))
    ms = r["median_ms"][cand]
    ratio = r.get("ratio", {})
    fmt = lambda x: f"{x:.2f}x" if x is not None else "-"
    gflops = models[r["model"]]["flops"] / (ms / 1e3) / 1e9
    print(f"| {r['model']} | {r['dtype']} | {ms:.1f} | {fmt(ratio.get('stock-fp32-frozen'))} | "
          f"{fmt(ratio.get('stock-autocast-bf16-frozen-channels-last'))} | {r['cosine']:.7f} | {gflops:.1f} | "
          f"{100 * gflops / peaks[r['dtype']]:.0f}% of {peaks[r['dtype']]:.0f} |")
print(f"\n{threads} threads, {rows[0]['iterations']} interleaved rounds per row (medians)")
PY
