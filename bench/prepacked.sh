#!/usr/bin/env bash
# Acceptance benchmark of the prepacked path (`ipex-tool optimize`, default mode): every
# optimized model is timed interleaved, in one run, against what stock libtorch gives for the
# original (frozen fp32; frozen autocast-bf16 with channels-last), and checked with verify.
# Prints a markdown table: model, batch, mode, cosine vs fp32, ratio to each baseline, target.
# Usage: bash bench/prepacked.sh [ITERATIONS]   (needs a build in ./build or $IPEX_BUILD_DIR)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
work="${IPEX_DEMO_DIR:-$root/demo}"
iterations="${1:-12}"
tool="$build/apps/ipex-tool/ipex-tool"
compare="$build/bench/compare_stock"
py=/usr/bin/python3
mkdir -p "$work"
cmake --build "$build" --target ipex-tool compare_stock >/dev/null
"$py" "$root/bench/make_models.py" "$work" resnet50 bert >/dev/null

optimize() {  # NAME SRC OUT SAMPLE FLAGS...
    local src="$1" out="$2" sample="$3"
    shift 3
    [ -f "$out" ] || "$tool" optimize "$src" "$out" --sample-input "$sample" -q "$@"
}
optimize "$work/resnet50.pt" "$work/resnet50-bf16-prepacked.pt" 16x3x224x224 --dtype bf16
optimize "$work/resnet50.pt" "$work/resnet50-fp32-prepacked.pt" 16x3x224x224
optimize "$work/resnet50.pt" "$work/resnet50-bf32-prepacked.pt" 16x3x224x224 --fp32-math-mode bf32
optimize "$work/bert.pt" "$work/bert-bf16-prepacked.pt" 8x128x768 --dtype bf16

results="$work/prepacked-results.jsonl"
: > "$results"
run() {  # LABEL ORIGINAL CANDIDATE INPUT BASELINES TARGET
    local label="$1" original="$2" candidate="$3" input="$4" baselines="$5" target="$6"
    local cosine
    cosine=$("$tool" verify "$original" "$candidate" --input "$input" --json |
             "$py" -c 'import json,sys; print(min(o["cosine"] for o in json.load(sys.stdin)["outputs"]))')
    "$compare" --original "$original" --candidate "$candidate" --input "$input" --baselines "$baselines" \
        --iterations "$iterations" --warmup 2 --label "$label" --json |
        "$py" -c 'import json,sys; j=json.loads(sys.stdin.read()); j["cosine"]=float(sys.argv[1]); j["target"]=sys.argv[2]; print(json.dumps(j))' \
        "$cosine" "$target" >> "$results"
    tail -n 1 "$results" >&2
}
run "resnet50 bf16, batch 16" "$work/resnet50.pt" "$work/resnet50-bf16-prepacked.pt" 16x3x224x224 fp32,bf16 \
    "autocast-bf16 >= 1.6x"
run "resnet50 bf16, batch 1" "$work/resnet50.pt" "$work/resnet50-bf16-prepacked.pt" 1x3x224x224 fp32,bf16 \
    "autocast-bf16 >= 1.8x"
run "resnet50 fp32, batch 16" "$work/resnet50.pt" "$work/resnet50-fp32-prepacked.pt" 16x3x224x224 fp32 \
    "fp32 >= 1.2x"
run "resnet50 fp32, batch 1" "$work/resnet50.pt" "$work/resnet50-fp32-prepacked.pt" 1x3x224x224 fp32 \
    "fp32 >= 1.2x"
run "resnet50 bf32, batch 16" "$work/resnet50.pt" "$work/resnet50-bf32-prepacked.pt" 16x3x224x224 fp32 \
    "fp32 >= 2.5x"
run "resnet50 bf32, batch 1" "$work/resnet50.pt" "$work/resnet50-bf32-prepacked.pt" 1x3x224x224 fp32 \
    "fp32 >= 2.5x"
run "BERT-base encoder bf16, batch 8 x 128" "$work/bert.pt" "$work/bert-bf16-prepacked.pt" 8x128x768 fp32,bf16 \
    "autocast-bf16 >= 1.3x"

"$py" - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print()
print("| model | candidate median ms | vs stock fp32 frozen | vs stock autocast-bf16 | cosine vs fp32 | target |")
print("|---|---|---|---|---|---|")
for r in rows:
    cand = next(iter(k for k in r["median_ms"] if not k.startswith("stock")), None)
    ratio = r.get("ratio", {})
    fp32 = ratio.get("stock-fp32-frozen")
    bf16 = ratio.get("stock-autocast-bf16-frozen-channels-last")
    fmt = lambda x: f"{x:.2f}x" if x is not None else "-"
    print(f"| {r['label']} | {r['median_ms'][cand]:.1f} | {fmt(fp32)} | {fmt(bf16)} | {r['cosine']:.7f} | {r['target']} |")
print(f"\n{rows[0]['threads']} threads, {rows[0]['iterations']} interleaved rounds per row (medians)")
PY
