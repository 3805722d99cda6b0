#!/usr/bin/python3
"""ipex-launch's own cost per instance: `ipex-launch --ninstances N -- /bin/true` against
running /bin/true directly, interleaved in one run (A B, B A, ...), medians of each. With
Open MPI installed, also its cost per rank in a multi-node run on this host:
`ipex-launch --nprocs-per-node N -- /bin/true` (mpirun starting N `ipex-launch --rank-exec`,
each reporting back) against `mpirun -np N /bin/true` on the same hosts.

With the launcher's default allocator/OpenMP preloads, the direct run gets the same
LD_PRELOAD, so loading those libraries counts for neither side. Prints the medians and the
overhead per instance; exits 1 when it is above the budget (20 ms).

usage: bench/launch_overhead.py [--launcher PATH] [--rounds N] [--mpi-rounds N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

BUDGET_MS = 20.0


def run_ms(argv, env):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - start) * 1000.0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launcher", default=os.path.join(root, "build", "launcher", "ipex-launch"))
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--mpi-rounds", type=int, default=21)
    args = ap.parse_args()
    ncpu = len(os.sched_getaffinity(0))
    worst = 0.0
    for n in sorted({1, min(2, ncpu)}):
        for preload in (False, True):
            flags = [] if preload else ["--memory-allocator", "default", "--omp-runtime", "default"]
            plan = json.loads(subprocess.run(
                [args.launcher, "--dry-run", "--json", "--ninstances", str(n), *flags, "--", "/bin/true"],
                check=True, capture_output=True, text=True).stdout)
            env = dict(os.environ)
            ld = plan["instances"][0]["ld_preload"]
            if ld:
                env["LD_PRELOAD"] = ":".join(ld)
            launch = [args.launcher, "--quiet", "--ninstances", str(n), *flags, "--", "/bin/true"]
            direct = ["/bin/true"]
            a, b = [], []
            for i in range(args.rounds):
                if i % 2:
                    b.append(sum(run_ms(direct, env) for _ in range(n)))
                    a.append(run_ms(launch, os.environ))
                else:
                    a.append(run_ms(launch, os.environ))
                    b.append(sum(run_ms(direct, env) for _ in range(n)))
            overhead = (statistics.median(a) - statistics.median(b)) / n
            worst = max(worst, overhead)
            print(f"{n} instance(s), {'with' if preload else 'without'} preloads: launcher median "
                  f"{statistics.median(a):.1f} ms, direct median {statistics.median(b):.1f} ms, "
                  f"overhead {overhead:.1f} ms per instance (budget {BUDGET_MS:.0f} ms)")
    worst = max(worst, mpi_overhead(args.launcher, args.mpi_rounds, ncpu))
    return 0 if worst <= BUDGET_MS else 1


def mpi_overhead(launcher, rounds, ncpu):
    """Per-rank cost of the multi-node path; 0 when Open MPI is not installed."""
    mpirun = shutil.which("mpirun.openmpi")
    if not mpirun:
        print("multi-node: skipped (no mpirun.openmpi; install the Debian package openmpi-bin)")
        return 0.0
    n = min(4, ncpu)
    plan = json.loads(subprocess.run(
        [launcher, "--dry-run", "--json", "--nprocs-per-node", str(n), "--", "/bin/true"],
        check=True, capture_output=True, text=True).stdout)
    env = dict(os.environ)
    ld = plan["ranks"][0]["ld_preload"]
    if ld:
        env["LD_PRELOAD"] = ":".join(ld)
    launch = [launcher, "--quiet", "--nprocs-per-node", str(n), "--", "/bin/true"]
    direct = [mpirun, "--host", f"localhost:{n}", "-np", str(n), "--bind-to", "none", "-x", "LD_PRELOAD"]
    if os.geteuid() == 0:
        direct.append("--allow-run-as-root")
    direct.append("/bin/true")
    a, b = [], []
    for i in range(rounds):
        pair = [(a, launch, os.environ), (b, direct, env)]
        for samples, argv, e in (pair if i % 2 == 0 else pair[::-1]):
            samples.append(run_ms(argv, e))
    overhead = (statistics.median(a) - statistics.median(b)) / n
    print(f"multi-node, {n} ranks on this host through Open MPI: launcher median {statistics.median(a):.1f} ms, "
          f"mpirun median {statistics.median(b):.1f} ms, overhead {overhead:.1f} ms per rank "
          f"(budget {BUDGET_MS:.0f} ms)")
    return overhead


if __name__ == "__main__":
    sys.exit(main())
