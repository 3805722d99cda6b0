#!/usr/bin/env bash
# The acceptance of the LLM runtime on a TinyLlama-1.1B-shaped random-weight model, batch 1,
# 2 threads, against the machine's limits as ipex-tool bench measures them at start-up in each run
# (the same threads; BANDWIDTH_GBS / PEAK_GFLOPS override them):
#   int4 g128 decode at context 512   <= 1.35x the bandwidth floor (weight bytes / bandwidth)
#   bf16 decode at context 512        <= 1.25x its floor
#   prefill of 512 tokens             >= 50% of the bf16 peak (bf16, and int4 with lowp bf16)
#   decode at context 2048            <= 1.3x the time at context 128 (int4)
# Usage: bench/llm_acceptance.sh [BUILD_DIR] [MODEL_DIR]
#   env BANDWIDTH_GBS, PEAK_GFLOPS (default: measured), THREADS (2), ITERATIONS (3)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
model="${2:-${TMPDIR:-/tmp}/ipex-llm-bench/tinyllama-1.1b-random}"
tool="$build/apps/ipex-tool/ipex-tool"
limits=()
[ -n "${BANDWIDTH_GBS:-}" ] && limits+=(--bandwidth-gbs "$BANDWIDTH_GBS")
[ -n "${PEAK_GFLOPS:-}" ] && limits+=(--peak-gflops "$PEAK_GFLOPS")
threads="${THREADS:-2}"
iters="${ITERATIONS:-3}"

[ -x "$tool" ] || { echo "no ipex-tool in $build (build first)" >&2; exit 2; }
if [ ! -f "$model/model.safetensors" ]; then
  echo "writing the random-weight model to $model (about 2.2 GB)..." >&2
  /usr/bin/python3 "$root/bench/llm_make_model.py" "$model"
fi
echo "machine load: $(uptime)"
run() {  # label, then bench arguments
  local label="$1"; shift
  local out
  out=$("$tool" bench "$model" --llm --threads "$threads" --iterations "$iters" ${limits[@]+"${limits[@]}"} \
        --json - "$@")
  echo "$out" > "${TMPDIR:-/tmp}/ipex-llm-$label.json"
  echo "$out"
}
field() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "${TMPDIR:-/tmp}/ipex-llm-$1.json" "$2"; }

run int4_512 --woq-dtype int4 --group-size 128 --input-tokens 512 --output-tokens 32 >/dev/null
run bf16_512 --input-tokens 512 --output-tokens 32 >/dev/null
run int4_128 --woq-dtype int4 --group-size 128 --input-tokens 128 --output-tokens 32 >/dev/null
run int4_2048 --woq-dtype int4 --group-size 128 --input-tokens 2048 --output-tokens 32 >/dev/null

printf '%-44s %10s %10s %8s\n' "figure" "measured" "target" "ok"
check() {  # name, value, op, target
  local ok
  ok=$(/usr/bin/python3 -c "print('yes' if $2 $3 $4 else 'NO')")
  printf '%-44s %10.3f %7s %-4s %4s\n' "$1" "$2" "$3" "$4" "$ok"
}
check "int4 g128 decode @512 / bandwidth floor" "$(field int4_512 'next_token_over_floor')" "<=" 1.35
check "bf16 decode @512 / bandwidth floor" "$(field bf16_512 'next_token_over_floor')" "<=" 1.25
check "bf16 prefill 512 share of bf16 peak" "$(field bf16_512 'prefill_share_of_peak')" ">=" 0.5
check "int4 prefill 512 share of bf16 peak" "$(field int4_512 'prefill_share_of_peak')" ">=" 0.5
check "int4 decode @2048 / decode @128" \
  "$(/usr/bin/python3 -c "print($(field int4_2048 "next_token_ms['p50']") / $(field int4_128 "next_token_ms['p50']"))")" "<=" 1.3
for f in int4_512 bf16_512 int4_128 int4_2048; do
  echo "$f: next-token p50 $(field $f 'next_token_ms["p50"]') ms, first token p50 $(field $f 'first_token_ms["p50"]') ms," \
       "floor $(field $f 'bandwidth_floor_ms') ms, $(field $f 'tokens_per_second') tokens/s, peak RSS $(field $f 'peak_rss_bytes // 2**20') MiB," \
       "limits: peak $(field $f "limits['peak_gflops']") GFLOP/s ($(field $f "limits['peak_source']")), bandwidth" \
       "$(field $f "limits['bandwidth_gbs']") GB/s ($(field $f "limits['bandwidth_source']"))"
done
echo "machine load after: $(uptime)"
