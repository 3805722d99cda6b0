#!/usr/bin/env bash
# Acceptance benchmark of the portable bf16 path: torchvision resnet50 (random weights)
# optimized with `ipex-tool optimize --dtype bf16 --portable`, timed interleaved in one run
# against stock libtorch frozen fp32 and stock frozen autocast-bf16 channels-last, at
# batch 1 and 16. Prints medians and ratios (candidate speed-up over each baseline).
# Usage: bash bench/resnet50_portable.sh [ITERATIONS]   (needs a build in ./build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
work="${IPEX_DEMO_DIR:-$root/demo}"
iterations="${1:-20}"
tool="$build/apps/ipex-tool/ipex-tool"
compare="$build/bench/compare_stock"
mkdir -p "$work"
cmake --build "$build" --target ipex-tool compare_stock >/dev/null

/usr/bin/python3 "$root/bench/make_models.py" "$work" resnet50 >/dev/null
"$tool" optimize "$work/resnet50.pt" "$work/resnet50-bf16-portable.pt" --dtype bf16 --portable \
    --sample-input 16x3x224x224 -q
"$tool" verify "$work/resnet50.pt" "$work/resnet50-bf16-portable.pt" --input 4x3x224x224

for batch in 1 16; do
    "$compare" --original "$work/resnet50.pt" --candidate "$work/resnet50-bf16-portable.pt" \
        --input "${batch}x3x224x224" --baselines fp32,bf16 --iterations "$iterations" --warmup 3 \
        --label "resnet50 bf16 portable, batch $batch"
done
