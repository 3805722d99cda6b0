"""A real multi-node run on one machine: two hosts made of network namespaces, Open MPI's
remote agent pointed at a script that enters a namespace instead of ssh, 2 hosts x 2 ranks
of a torch.distributed (gloo) all-reduce. Skips with the reason without root, network
namespaces, Open MPI or torch."""
import json
import os
import shutil
import subprocess
import unittest

from launch_e2e import LAUNCH, LaunchTest, PYTHON, online_cpus, parse_list
from netns_hosts import IFNAME, SUBNET, NetnsHosts, unavailable

ALLREDUCE = r'''
import datetime, json, os
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
print("RESULT " + json.dumps({
    "rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(),
    "local_rank": int(os.environ["LOCAL_RANK"]), "local_world": int(os.environ["LOCAL_WORLD_SIZE"]),
    "cpus": sorted(os.sched_getaffinity(0)), "net": os.readlink("/proc/self/ns/net"),
    "omp": os.environ.get("OMP_NUM_THREADS")}), flush=True)
dist.destroy_process_group()
'''


def has_torch():
    return subprocess.run([PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                          capture_output=True).returncode == 0


WHY = unavailable() or (None if shutil.which("mpirun.openmpi") else "needs Open MPI (openmpi-bin)") or \
    (None if has_torch() else f"needs torch with gloo in {PYTHON} (python3-torch)") or \
    (None if len(online_cpus()) >= 2 else "needs two CPUs (two ranks per host)")


@unittest.skipIf(WHY, WHY)
class TwoHostsTwoRanks(LaunchTest):
    def setUp(self):
        super().setUp()
        self.hosts = NetnsHosts(self.tmp)
        self.addCleanup(self.hosts.close)
        self.hostfile = os.path.join(self.tmp, "hosts")
        with open(self.hostfile, "w") as f:
            f.write(f"# two namespaces\n{self.hosts.addresses[0]} slots=2\n{self.hosts.addresses[1]}:2\n")
        self.mpi_params = (f"--mca plm_rsh_agent {self.hosts.agent} --mca oob_tcp_if_include {SUBNET}.0/24 "
                           f"--mca btl_tcp_if_include {SUBNET}.0/24")

    def launch(self, *args, timeout=240):
        env = dict(os.environ, GLOO_SOCKET_IFNAME=IFNAME)
        proc = subprocess.run([*self.hosts.exec_prefix(0), LAUNCH, "--nnodes", "2", "--nprocs-per-node", "2",
                               "--hostfile", self.hostfile, "--extra-mpi-params", self.mpi_params, *args],
                              capture_output=True, text=True, timeout=timeout, env=env)
        return proc

    def test_gloo_all_reduce_across_two_hosts(self):
        script = os.path.join(self.tmp, "allreduce.py")
        with open(script, "w") as f:
            f.write(ALLREDUCE)
        logs = os.path.join(self.tmp, "logs")
        p = self.launch("--master-port", "29511", "--log-dir", logs, "--json", "--", PYTHON, script)
        detail = f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
        self.assertEqual(p.returncode, 0, detail)
        report = json.loads(p.stdout)
        self.assertTrue(report["ok"], detail)
        self.assertEqual(report["world_size"], 4)
        self.assertEqual([h["name"] for h in report["hosts"]], self.hosts.addresses)
        net_ids = [self.hosts.net_id(0), self.hosts.net_id(1)]
        host_cpus = set(online_cpus())
        results = {}
        for r in report["ranks"]:
            rank, host = r["rank"], r["host"]
            self.assertEqual(host, self.hosts.addresses[rank // 2])
            self.assertEqual(r["status"], "exit 0")
            prefix = f"[{host}:{rank}] RESULT "
            lines = [l[len(prefix):] for l in p.stderr.splitlines() if l.startswith(prefix)]
            self.assertEqual(len(lines), 1, detail)
            res = json.loads(lines[0])
            results[rank] = res
            self.assertEqual(res["rank"], rank)
            self.assertEqual(res["world"], 4)
            self.assertEqual(res["sum"], 0 + 1 + 2 + 3)
            self.assertEqual(res["local_rank"], rank % 2)
            self.assertEqual(res["local_world"], 2)
            self.assertEqual(res["net"], net_ids[rank // 2], f"rank {rank} ran in the wrong namespace")
            self.assertEqual(res["cpus"], r["cpus"], "the CPU set the rank saw is the one reported")
            self.assertEqual(res["omp"], str(len(res["cpus"])))
            # The log file holds the rank's raw output.
            with open(r["log_file"]) as f:
                self.assertIn("RESULT " + lines[0], f.read())
            self.assertEqual(os.path.dirname(r["log_file"]), logs)
        for host in range(2):
            a, b = set(results[2 * host]["cpus"]), set(results[2 * host + 1]["cpus"])
            self.assertTrue(a and b and not (a & b), f"local ranks of host {host} share CPUs: {a} {b}")
            self.assertLessEqual(a | b, host_cpus)
        with open(os.path.join(logs, "run_summary.json")) as f:
            self.assertEqual(json.load(f)["world_size"], 4)
        self.assertIn("ipex-launch summary:", p.stderr)

    def test_master_address_of_the_other_host_is_refused(self):
        p = self.launch("--master-addr", self.hosts.addresses[1], "--", "/bin/true", timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"--master-addr {self.hosts.addresses[1]} is not an address of this machine", p.stderr)

    def test_unreachable_host_is_named(self):
        with open(self.hostfile, "w") as f:
            f.write(f"{self.hosts.addresses[0]} slots=2\n{SUBNET}.99 slots=2\n")
        p = self.launch("--", "/bin/true", timeout=60)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(f"line 2: host {SUBNET}.99 does not answer", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
