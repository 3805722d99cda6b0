#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout (what CI runs): installs packages, builds,
# runs ctest (GoogleTest units, end-to-end CLI tests, fuzz replays), then a second build with
# clang's AddressSanitizer + UndefinedBehaviorSanitizer that runs the unit tests and fuzz
# replays under the sanitizers and every libFuzzer target for 20 s (tests/sanitize.sh).
# Usage: bash tests/run.sh [CTEST ARGS...] (with none, the GoogleTest binaries run one process
# each through tests/run_unit_binaries.py); IPEX_SANITIZE_STAGE=0 skips the second build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
jobs="${IPEX_JOBS:-$(nproc)}"

# The builds need disk: say how much there is, so a full disk is seen for what it is.
free_gb="$(df -Pk "$(dirname "$build")" | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }')"
echo "tests/run.sh: ${free_gb} GB free where the builds go (the suite's two builds take about 4 GB)"
bash "$root/.ci/deps"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIPEX_BUILD_TESTS=ON -DIPEX_BUILD_BENCH=ON \
  -DIPEX_DISCOVER_GTESTS=OFF -DIPEX_TESTS_SHARED=ON
cmake --build "$build" -j "$jobs"
if [ $# -eq 0 ]; then
  # Everything but the GoogleTest cases through ctest (fixtures first), then each GoogleTest
  # binary once with all its tests: one process per test spent minutes starting libtorch.
  ctest --test-dir "$build" --output-on-failure -j "$jobs" -LE gtest
  /usr/bin/python3 "$root/tests/run_unit_binaries.py" "$build" "$jobs"
else
  ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
fi
if [ "${IPEX_SANITIZE_STAGE:-1}" != "0" ]; then
  bash "$root/tests/sanitize.sh"
fi
