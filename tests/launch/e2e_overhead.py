"""The launcher's own cost: `ipex-launch -- /bin/true` against `/bin/true` run directly.

Spawning and pinning an instance must cost at most 20 ms (median of repeated runs). With
the default allocator and OpenMP preloads, /bin/true is also run directly with the same
LD_PRELOAD, so loading those libraries counts for neither side. Run it alone to measure:
    IPEX_LAUNCH=build/launcher/ipex-launch python3 tests/launch/e2e_overhead.py -v
"""
import json
import os
import statistics
import subprocess
import time
import unittest

from launch_e2e import LAUNCH, online_cpus

BUDGET_MS = 20.0
REPEATS = 31


def median_ms(argv, env=None):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def planned_preload(extra):
    out = subprocess.run([LAUNCH, "--dry-run", "--json", *extra, "--", "/bin/true"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["instances"][0]["ld_preload"]


class Overhead(unittest.TestCase):
    def test_overhead_per_instance(self):
        modes = (("bind only", ["--memory-allocator", "default", "--omp-runtime", "default"]),
                 ("with preloads", []))
        rows = []
        for label, extra in modes:
            env = dict(os.environ)
            preload = planned_preload(extra)
            if preload:
                env["LD_PRELOAD"] = ":".join(preload)
            direct = median_ms(["/bin/true"], env)
            for n in sorted({1, min(2, len(online_cpus()))}):
                launched = median_ms([LAUNCH, "--quiet", "--ninstances", str(n), *extra, "--", "/bin/true"])
                rows.append((label, n, direct, launched, (launched - direct) / n))
        print(f"\nmedian of {REPEATS} runs, ms")
        print(f"{'mode':<14}  {'instances':>9}  {'direct':>7}  {'ipex-launch':>11}  {'overhead/instance':>17}")
        for label, n, direct, launched, per in rows:
            print(f"{label:<14}  {n:>9}  {direct:>7.2f}  {launched:>11.2f}  {per:>17.2f}")
        for label, n, _, _, per in rows:
            self.assertLessEqual(per, BUDGET_MS, f"{label}, {n} instance(s)")


if __name__ == "__main__":
    unittest.main()
