#!/usr/bin/env bash
# INT8 acceptance benchmark: torchvision resnet50 (random weights, eval) at batch 16,
# calibrated by `ipex-tool calibrate` on seeded random batches and converted by
# `ipex-tool quantize` (default: ipex int8 ops; also --portable), timed interleaved in one
# run (medians, ratios) against
#   - stock PyTorch FX INT8 (onednn engine, the same calibration batches, traced + frozen)
#   - our bf16 model (`ipex-tool optimize --dtype bf16`, prepacked oneDNN ops)
# plus the accuracy check: cosine vs fp32 on a held-out batch for resnet50 and mobilenet_v2
# (both outputs), and the ISA oneDNN dispatched for the int8 model. Then two variants against
# our own int8 model: --mixed-dtype bf16 vs fp32 with the stem conv and the fc outside int8,
# and s8 symmetric vs u8 affine activations.
# Usage: bash bench/int8_resnet50.sh [ITERATIONS] [CALIB_BATCHES]   (build dir: $IPEX_BUILD_DIR, default ./build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
work="${IPEX_DEMO_DIR:-$root/demo}"
iterations="${1:-20}"
calib="${2:-4}"
batch=16
tool="$build/apps/ipex-tool/ipex-tool"
data="$root/bench/int8_data.py"
mkdir -p "$work"
cmake --build "$build" --target ipex-tool ipex_ops >/dev/null

for name in resnet50 mobilenet_v2; do
    /usr/bin/python3 "$root/bench/make_models.py" "$work" "$name" >/dev/null
    /usr/bin/python3 "$data" "$work" "$name" batches "$batch" "$calib"
    "$tool" calibrate "$work/$name.pt" --data "$work/$name-calib" --out "$work/$name-qconfig.json" -q
    "$tool" quantize "$work/$name.pt" "$work/$name-int8.pt" --qconfig "$work/$name-qconfig.json" -q
    "$tool" quantize "$work/$name.pt" "$work/$name-int8-portable.pt" --qconfig "$work/$name-qconfig.json" \
        --portable -q
    IPEX_OPS_LIBRARY="$build/lib/libipex_ops.so" \
        /usr/bin/python3 "$data" "$work" "$name" cosine "$work/$name.pt" "$work/$name-int8.pt"
    /usr/bin/python3 "$data" "$work" "$name" cosine "$work/$name.pt" "$work/$name-int8-portable.pt"
done

/usr/bin/python3 "$data" "$work" resnet50 fx "$batch"
/usr/bin/python3 "$data" "$work" resnet50 cosine "$work/resnet50.pt" "$work/resnet50-fx-int8.pt"
"$tool" optimize "$work/resnet50.pt" "$work/resnet50-bf16.pt" --dtype bf16 --sample-input "${batch}x3x224x224" -q

echo "== resnet50 int8 --portable (stock quantized ops) vs stock FX int8, batch $batch"
"$tool" bench "$work/resnet50-int8-portable.pt" --baseline "$work/resnet50-fx-int8.pt" \
    --input "${batch}x3x224x224" --iterations "$iterations" --warmup 3
echo "== resnet50 int8 (ipex-tool) vs stock FX int8, batch $batch"
"$tool" bench "$work/resnet50-int8.pt" --baseline "$work/resnet50-fx-int8.pt" \
    --input "${batch}x3x224x224" --iterations "$iterations" --warmup 3
echo "== resnet50 int8 (ipex-tool) vs ipex-tool bf16, batch $batch"
"$tool" bench "$work/resnet50-int8.pt" --baseline "$work/resnet50-bf16.pt" \
    --input "${batch}x3x224x224" --iterations "$iterations" --warmup 3
echo "== ISA oneDNN used by the int8 model"
"$tool" bench "$work/resnet50-int8.pt" --input "${batch}x3x224x224" --iterations 2 --warmup 1 \
    --check-isa avx512_core_vnni || true

# --mixed-dtype: with the stem conv and the classifier left out of int8 (not listed in the
# qconfig), the float ops around them run in fp32 (default) or bf16.
/usr/bin/python3 - "$work/resnet50-qconfig.json" "$work/resnet50-qconfig-partial.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))
kept = [op for op in q["ops"] if op["id"] not in ("conv1:conv2d:0", "fc:linear:0")]
assert len(kept) == len(q["ops"]) - 2, "resnet50 qconfig has no conv1:conv2d:0 / fc:linear:0"
q["ops"] = kept
json.dump(q, open(sys.argv[2], "w"))
PY
for mixed in fp32 bf16; do
    "$tool" quantize "$work/resnet50.pt" "$work/resnet50-int8-mixed-$mixed.pt" -q \
        --qconfig "$work/resnet50-qconfig-partial.json" --mixed-dtype "$mixed"
    IPEX_OPS_LIBRARY="$build/lib/libipex_ops.so" /usr/bin/python3 "$data" "$work" resnet50 cosine \
        "$work/resnet50.pt" "$work/resnet50-int8-mixed-$mixed.pt"
done
echo "== resnet50 int8, stem conv + fc outside int8: --mixed-dtype bf16 vs fp32, batch $batch"
"$tool" bench "$work/resnet50-int8-mixed-bf16.pt" --baseline "$work/resnet50-int8-mixed-fp32.pt" \
    --input "${batch}x3x224x224" --iterations "$iterations" --warmup 3

# s8 symmetric activations (recipe activation.dtype "s8") against the default u8 affine ones.
cat > "$work/int8-s8.json" <<'JSON'
{"format": "ipex-quant-recipe", "version": 1,
 "activation": {"dtype": "s8", "observer": {"name": "histogram_l2", "bins": 2048}}}
JSON
"$tool" calibrate "$work/resnet50.pt" --data "$work/resnet50-calib" --recipe "$work/int8-s8.json" \
    --out "$work/resnet50-qconfig-s8.json" -q
"$tool" quantize "$work/resnet50.pt" "$work/resnet50-int8-s8.pt" --qconfig "$work/resnet50-qconfig-s8.json" -q
IPEX_OPS_LIBRARY="$build/lib/libipex_ops.so" /usr/bin/python3 "$data" "$work" resnet50 cosine \
    "$work/resnet50.pt" "$work/resnet50-int8-s8.pt"
echo "== resnet50 int8 s8 activations vs u8 activations, batch $batch"
"$tool" bench "$work/resnet50-int8-s8.pt" --baseline "$work/resnet50-int8.pt" \
    --input "${batch}x3x224x224" --iterations "$iterations" --warmup 3
