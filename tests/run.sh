#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs packages, builds, runs ctest
# (GoogleTest units, end-to-end CLI tests, fuzz smoke runs). Usage: bash tests/run.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IPEX_BUILD_DIR:-$root/build}"
jobs="${IPEX_JOBS:-$(nproc)}"

bash "$root/.ci/deps"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIPEX_BUILD_TESTS=ON -DIPEX_BUILD_BENCH=ON
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
