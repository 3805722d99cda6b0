"""The process's intra-op threads at import: the CLI's default (one per allowed physical core).

Debian's libtorch starts a Python process on one thread (omp_get_max_threads() is 1 there), where
pip's torch and IPEX users' scripts run on every physical core; a migrated script would run at a
fraction of its speed. Unless OMP_NUM_THREADS says otherwise, or the script already chose more,
the import sets torch's thread count to the physical cores of the CPUs this process may run on,
as ``ipex-tool`` does for its own commands.
"""

import os

import torch


def allowed_physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs in this process's affinity mask."""
    cpus = sorted(os.sched_getaffinity(0))
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as f:
                package = f.read().strip()
            with open(base + "core_id") as f:
                core = f.read().strip()
        except OSError:
            return len(cpus)  # no topology in sysfs: count the CPUs
        cores.add((package, core))
    return max(1, len(cores))


def set_default_threads() -> None:
    if os.environ.get("OMP_NUM_THREADS"):
        return
    cores = allowed_physical_cores()
    if torch.get_num_threads() < cores:
        torch.set_num_threads(cores)
