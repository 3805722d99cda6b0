#!/usr/bin/env bash
# A second build of the suite with clang, AddressSanitizer and UndefinedBehaviorSanitizer:
# runs the unit tests (each GoogleTest binary in one process) and the fuzz replays under the
# sanitizers, then every libFuzzer target for IPEX_FUZZ_SECONDS seconds (20), two at a time,
# on a copy of its seed corpus. Any
# sanitizer report, failed test or fuzzer crash fails the script. Usage: bash tests/sanitize.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
jobs="${IPEX_JOBS:-$(nproc)}"
fuzz_seconds="${IPEX_FUZZ_SECONDS:-20}"

bash "$root/.ci/deps"
# -O0: clang instruments and compiles libtorch's templates in half the time it takes at -O1
# (the sanitizers' other usual level), and this stage's tests are small: the build is most of
# the stage. The libFuzzer targets run fewer inputs in their 20 s for it. The test binaries
# link one shared library of the project's code (IPEX_TESTS_SHARED): each carrying its own
# copy took 4.6 GB of disk.
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O0" -DCMAKE_CXX_FLAGS_RELEASE="-O0" \
  -DIPEX_SANITIZE=address,undefined -DIPEX_BUILD_FUZZ=ON -DIPEX_BUILD_TESTS=ON -DIPEX_BUILD_BENCH=OFF \
  -DIPEX_DISCOVER_GTESTS=OFF -DIPEX_TESTS_SHARED=ON
# Only what this stage runs: the tools and benchmarks are left to the main build.
cmake --build "$build" -j "$jobs" --target ipex_unit_targets

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizer.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The ops library's caching CPU allocator would hand freed tensors' memory out again instead of
# freeing it, hiding a use after free from ASan: libtorch's own allocator here.
export IPEX_CPU_CACHE_MB=0
# The fixtures and fuzz replays through ctest, then each GoogleTest binary once with all its
# tests (one process per test, as ctest runs them, spends most of the stage starting libtorch
# under the sanitizers).
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L unit -LE gtest
/usr/bin/python3 "$root/tests/run_unit_binaries.py" "$build" "$jobs"

# libFuzzer: each target on its seeds, new inputs kept in a scratch corpus; two at a time.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fixtures="$build/fixtures"
declare -A seeds=(
  [npy]="$root/tests/fuzz/corpus/npy"
  [spec]="$root/tests/fuzz/corpus/spec"
  [qconfig]="$root/tests/fuzz/corpus/qconfig"
  [safetensors]="$root/tests/fuzz/corpus/safetensors"
  [model]="$work/model-seeds"
)
mkdir -p "$work/model-seeds"
cp "$fixtures/conv_bn_relu_2d.pt" "$fixtures/pickled_module.pt" "$work/model-seeds/"
# plus files that once crashed libtorch's loader under the sanitizers (tests/fuzz/corpus/model)
cp "$root"/tests/fuzz/corpus/model/* "$work/model-seeds/"
for extra in "$root"/tests/fuzz/corpus/*/; do  # targets added later bring their own corpus folder
  name="$(basename "$extra")"
  [ -n "${seeds[$name]:-}" ] || seeds[$name]="$extra"
done

failed=0
run_fuzzer() {
  local name="$1"
  local bin="$build/tests/fuzz/fuzz_$name"
  local extra=()
  # model: libtorch's loader can crash on damaged code records; load_model turns that into
  # exit 3, and under the fuzzer jumps back out of libtorch, whose skipped frames then leak.
  # Leaks of the model path stay checked by the replays (fuzz.model) in the unit stage.
  # Allocations the loader makes for damaged length fields are capped inside fuzz_model
  # (std::bad_alloc above 256 MiB, as a real machine answers an absurd request).
  [ "$name" = model ] && extra=(-detect_leaks=0)
  # The JSON readers share one dictionary: nesting, the fields they look up, numbers at bounds.
  case "$name" in json|qconfig|tokenizer|llm_config|safetensors) extra+=(-dict="$root/tests/fuzz/json.dict") ;; esac
  mkdir -p "$work/$name"
  if "$bin" -max_total_time="$fuzz_seconds" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 "${extra[@]}" \
      -artifact_prefix="$work/$name/crash-" "$work/$name" "${seeds[$name]}" > "$work/$name.log" 2>&1; then
    echo "fuzz_$name: $(grep -m1 'stat::number_of_executed_units' "$work/$name.log" | awk '{print $2}') inputs in ${fuzz_seconds}s, no crash"
  else
    echo "fuzz_$name: FAILED"; tail -n 60 "$work/$name.log"; return 1
  fi
}
names=("${!seeds[@]}")
for ((i = 0; i < ${#names[@]}; i += 2)); do
  pids=()
  for name in "${names[@]:i:2}"; do
    [ -x "$build/tests/fuzz/fuzz_$name" ] || { echo "fuzz_$name: no binary"; failed=1; continue; }
    run_fuzzer "$name" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
done
exit "$failed"
