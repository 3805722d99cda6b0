#!/usr/bin/python3
"""Runs the GoogleTest binaries behind ctest's "gtest" label once each, every test of a binary
in one process, instead of one process per test as ctest does: a process that loads libtorch
takes a third of a second to start (about a second under the sanitizers), which over ~740
tests was most of the unit tests' time. The environment and working directory of each binary
are the ones ctest gives its tests; everything else (fixture generation, fuzz replays, the
end-to-end tests) stays with ctest (`ctest -LE gtest`), which must have made the fixtures
first. A binary ctest knows whole (built with IPEX_DISCOVER_GTESTS=OFF, as tests/run.sh
does) runs the same way; its count of tests is read from its output (none there fails it).
Prints one line per binary, a failing binary's whole output, and exits 1 if any failed.

Usage: run_unit_binaries.py BUILD_DIR [JOBS]"""

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

# A binary still running after this long is hung (the slowest takes about 40 s under the
# sanitizers on 2 cores).
TIMEOUT_SECONDS = 1200


def gtest_binaries(build: str):
    listing = subprocess.run(["ctest", "--test-dir", build, "-L", "gtest", "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    binaries = {}
    for test in json.loads(listing)["tests"]:
        command = test.get("command") or []
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        if "FIXTURES_SETUP" in props:
            continue  # listed with the tests that need it; ctest has run it
        labels = props.get("LABELS", [])
        case = any(arg.startswith("--gtest_filter=") for arg in command)
        # A binary registered whole (IPEX_DISCOVER_GTESTS=OFF): its own command, no arguments.
        if not command or not (case or ("unit_gtest" in labels and len(command) == 1)):
            raise SystemExit(f"{test['name']} is labelled gtest but is neither a GoogleTest case nor a binary")
        env = tuple(props.get("ENVIRONMENT", []))
        entry = binaries.setdefault(command[0], {"env": env, "cwd": props.get("WORKING_DIRECTORY", build),
                                                 "tests": 0, "listed": case})
        if entry["env"] != env or entry["listed"] != case:
            raise SystemExit(f"{command[0]}: its tests are registered in different ways; run them with ctest")
        entry["tests"] += 1
    return binaries


def tests_ran(output: str):
    """The number of tests a GoogleTest binary says it ran, or None."""
    match = re.search(r"^\[=+\] (\d+) tests? from \d+ test (?:suites?|cases?) ran", output, re.MULTILINE)
    return int(match.group(1)) if match else None


def run(binary: str, entry: dict):
    env = dict(os.environ)
    for item in entry["env"]:
        key, _, value = item.partition("=")
        env[key] = value
    start = time.monotonic()
    try:
        proc = subprocess.run([binary], cwd=entry["cwd"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as e:
        output = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return binary, "timeout", time.monotonic() - start, output + f"\n(killed after {TIMEOUT_SECONDS} s)"
    return binary, proc.returncode, time.monotonic() - start, proc.stdout


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    jobs = int(sys.argv[2]) if len(sys.argv) == 3 else os.cpu_count() or 1
    binaries = gtest_binaries(build)
    if not binaries:
        print(f"no tests labelled gtest in {build}", file=sys.stderr)
        return 1
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for binary, code, seconds, output in pool.map(lambda b: run(b, binaries[b]), sorted(binaries)):
            name = os.path.relpath(binary, build)
            if not binaries[binary]["listed"]:
                ran = tests_ran(output)
                binaries[binary]["tests"] = ran or 0
                if ran is None and code == 0:
                    code = "no GoogleTest summary"
            status = "passed" if code == 0 else f"FAILED ({code})" if isinstance(code, str) else f"FAILED (exit {code})"
            print(f"{name}: {binaries[binary]['tests']} tests {status} in {seconds:.1f} s", flush=True)
            if code != 0:
                failed.append(name)
                print(output, flush=True)
    total = sum(b["tests"] for b in binaries.values())
    print(f"{len(binaries)} binaries, {total} tests: " + (f"{len(failed)} failed: {' '.join(failed)}" if failed
                                                          else "all passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
