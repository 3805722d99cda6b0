#!/usr/bin/env bash
# One-token forward of a Llama-style decoder (bench/woq_make_decoder.py): int4 weight-only
# (optimize --woq-dtype int4 --group-size 128) against the same decoder optimized to bf16
# (optimize --dtype bf16), timed interleaved by `ipex-tool bench --baseline`; prints medians
# and the ratio (target >= 2x). Also checks the int4 model against the fp32 original (cosine
# >= 0.95: round-to-nearest int4 of random Gaussian weights loses more than a real GPTQ model).
# Usage: bash bench/woq_decoder.sh [decoder options, e.g. --layers 4]
#   env IPEX_WOQ_BENCH_THREADS (default: ipex-tool's), IPEX_WOQ_BENCH_ITERATIONS (30)
#   (build dir: $IPEX_BUILD_DIR or ./build; work files: $IPEX_WOQ_BENCH_DIR or a temp dir)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
tool="$build/apps/ipex-tool/ipex-tool"
py=/usr/bin/python3
work="${IPEX_WOQ_BENCH_DIR:-$(mktemp -d)}"
iterations="${IPEX_WOQ_BENCH_ITERATIONS:-30}"
threads=()
[ -n "${IPEX_WOQ_BENCH_THREADS:-}" ] && threads=(--threads "$IPEX_WOQ_BENCH_THREADS")
[ -x "$tool" ] || { echo "build ipex-tool first (cmake --build $build --target ipex-tool)" >&2; exit 2; }

"$py" "$root/bench/woq_make_decoder.py" "$work" "$@"
"$tool" optimize "$work/decoder.pt" "$work/decoder-bf16.pt" --dtype bf16 -q
"$tool" optimize "$work/decoder.pt" "$work/decoder-int4.pt" --woq-dtype int4 --group-size 128 -q \
    --report "$work/int4-report.json"
"$tool" verify "$work/decoder.pt" "$work/decoder-int4.pt" --input "$work/one_token.pt" --min-cosine 0.95 -q
"$tool" bench "$work/decoder-int4.pt" --input "$work/one_token.pt" --baseline "$work/decoder-bf16.pt" \
    --iterations "$iterations" --warmup 5 --json "$work/bench.json" ${threads[@]+"${threads[@]}"} >/dev/null
"$py" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
r = json.load(open(os.path.join(work, "bench.json")))
rep = json.load(open(os.path.join(work, "int4-report.json")))
cand, base = r["latency_ms"]["median"], r["baseline"]["latency_ms"]["median"]
size = lambda f: os.path.getsize(os.path.join(work, f)) / 2**20
print(f"linears replaced: {len(rep['woq']['replaced'])} (lowp-mode {rep['woq']['lowp_mode']})")
print(f"model files: bf16 {size('decoder-bf16.pt'):.0f} MiB, int4 {size('decoder-int4.pt'):.0f} MiB")
print(f"one-token forward, {r['threads']} threads, {r['iterations']} interleaved rounds: "
      f"int4 {cand:.2f} ms, bf16-optimized {base:.2f} ms (medians), "
      f"ratio {base / cand:.2f}x (target >= 2x)")
sys.exit(0 if base / cand >= 2.0 else 1)
PY
