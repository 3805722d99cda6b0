#!/usr/bin/env bash
# The main job from a fresh checkout: install packages, build, make a ResNet-50
# TorchScript model, optimize it to bf16 (fp32 on a CPU without AVX-512, where oneDNN 2.6 has no
# bf16 convolutions), check it against the original, benchmark it
# side by side with stock libtorch, and show which ISA oneDNN ran it on (AMX if present).
# Usage: bash bench/demo.sh      (work files go to ./demo, or $IPEX_DEMO_DIR)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
work="${IPEX_DEMO_DIR:-$root/demo}"
py=/usr/bin/python3

bash "$root/.ci/deps"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target ipex-tool compare_stock
tool="$build/apps/ipex-tool/ipex-tool"
mkdir -p "$work"

echo "== ipex-tool info"
"$tool" info

echo "== model: torchvision resnet50 (random weights), TorchScript"
"$py" "$root/bench/make_models.py" "$work" resnet50

# oneDNN 2.6 has bf16 convolutions only from AVX-512 on; below that the demo runs fp32.
dtype=bf16
baselines=fp32,bf16
if ! "$tool" info --json | "$py" -c 'import json,sys; sys.exit(0 if "avx512" in json.load(sys.stdin)["onednn"]["isa"] else 1)'; then
    echo "this CPU has no AVX-512: oneDNN 2.6 has no bf16 convolutions here, so the demo optimizes to fp32"
    dtype=fp32
    baselines=fp32
fi
model="$work/resnet50-$dtype.pt"

echo "== ipex-tool optimize resnet50.pt resnet50-$dtype.pt --dtype $dtype"
"$tool" optimize "$work/resnet50.pt" "$model" --dtype "$dtype" \
    --sample-input 16x3x224x224 --report "$work/optimize-report.json"
"$py" - "$work/optimize-report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"report: {sys.argv[1]}")
for p in r["passes"]:
    extra = f" ({len(p['skipped'])} left alone)" if p.get("skipped") else ""
    print(f"  {p['name']:<22} {p['status']:<14} count={p['count']}{extra}")
before, after = r["op_histogram"]["before"], r["op_histogram"]["after"]
for op in ("aten::batch_norm", "aten::dropout", "aten::conv2d", "aten::linear", "aten::relu_",
           "aten::add_", "ipex::convolution", "ipex::convolution_sum_", "ipex::convolution_chain", "ipex::linear"):
    print(f"  {op:<22} {before.get(op, 0):>4} -> {after.get(op, 0)}")
print(f"  bytes {r['bytes']['before']} -> {r['bytes']['after']}, {r['elapsed_ms']:.0f} ms")
PY

echo "== ipex-tool verify ($dtype against the fp32 original)"
"$tool" verify "$work/resnet50.pt" "$model" --input 4x3x224x224

echo "== ipex-tool bench --baseline stock (interleaved, same inputs)"
"$tool" bench "$model" --input 16x3x224x224 --baseline stock \
    --iterations 20 --warmup 3

echo "== side by side with both stock baselines (bench/compare_stock, interleaved)"
"$build/bench/compare_stock" --original "$work/resnet50.pt" --candidate "$model" \
    --input 16x3x224x224 --baselines "$baselines" --iterations 10 --warmup 2 --label "resnet50 $dtype, batch 16"

echo "== ISA check"
if "$tool" info --json | "$py" -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["amx"]["usable"] else 1)'; then
    "$tool" bench "$model" --input 1x3x224x224 --iterations 1 --warmup 0 --check-isa amx
else
    echo "this CPU has no usable AMX; checking the best ISA oneDNN dispatches instead:"
    isa=$("$tool" info --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["onednn"]["isa"])')
    "$tool" bench "$model" --input 1x3x224x224 --iterations 1 --warmup 0 --check-isa "$isa"
fi
