"""Multi-node runs: --dry-run --json plans per host and rank on synthetic machines, the
error cases with their exit codes, and live runs of several ranks on this host through
Open MPI (and MPICH when installed): prefixed output, a log file per rank, the summary,
signals through mpirun, --require-isa per rank."""
import json
import os
import shutil
import signal
import subprocess
import time
import unittest

from launch_e2e import LAUNCH, DATA, LaunchTest, run, online_cpus, PYTHON

TWO_SOCKETS = "package:2 numa:1 core:28 pu:2(indexes=2*56:1*2)"  # core c: CPUs c, c + 56
FOUR_NODES = "package:2 numa:2 core:8 pu:2"
HAS_OPENMPI = shutil.which("mpirun.openmpi") is not None
HAS_MPICH = shutil.which("mpiexec.hydra") is not None
TWO_CPUS = len(online_cpus()) >= 2


def lines_of(text, label):
    prefix = f"[{label}] "
    return [l[len(prefix):] for l in text.splitlines() if l.startswith(prefix)]


class MultiNodeTest(LaunchTest):
    def hostfile(self, text, name="hosts"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class DryRun(MultiNodeTest):
    def plan(self, *args):
        r = run("--dry-run", "--json", *args)
        self.assertExit(r, 0)
        return r.json()

    def test_two_sockets_two_hosts_two_ranks(self):
        hf = self.hostfile("node0 slots=2\nnode1 slots=2\nnode2\n")
        plan = self.plan("--synthetic", TWO_SOCKETS, "--nnodes", "2", "--nprocs-per-node", "2", "--hostfile", hf,
                         "--master-port", "29600", "--memory-allocator", "default", "--omp-runtime", "default",
                         "--", "/bin/echo", "hi")
        self.assertEqual(plan["mode"], "multi-node")
        self.assertEqual((plan["nnodes"], plan["nprocs_per_node"], plan["world_size"]), (2, 2, 4))
        self.assertEqual(plan["master_addr"], "node0")
        self.assertEqual([h["name"] for h in plan["hosts"]], ["node0", "node1"])
        self.assertEqual([h["ranks"] for h in plan["hosts"]], [[0, 1], [2, 3]])
        for r in plan["ranks"]:
            lr = r["local_rank"]
            self.assertEqual(r["host"], f"node{r['rank'] // 2}")
            self.assertEqual(lr, r["rank"] % 2)
            self.assertEqual(r["packages"], [lr])                      # one socket per rank
            self.assertEqual(r["cores"], list(range(28 * lr, 28 * lr + 28)))
            self.assertEqual(r["cpus"], list(range(28 * lr, 28 * lr + 28)))  # first thread of each core
            env = r["env"]
            self.assertEqual(env["OMP_NUM_THREADS"], "28")
            self.assertEqual(env["OMP_PLACES"].split("},{")[0], "{" + str(28 * lr))
            self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"]), ("node0", "29600"))
            self.assertEqual((env["RANK"], env["WORLD_SIZE"]), (str(r["rank"]), "4"))
            self.assertEqual((env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]), (str(lr), "2"))
            self.assertEqual(r["command"], ["/bin/echo", "hi"])
        cmd = plan["mpi"]["command"]
        i = cmd.index("--host")
        self.assertEqual(cmd[i:i + 8], ["--host", "node0:2,node1:2", "-np", "4", "--map-by", "ppr:2:node",
                                        "--bind-to", "none"])
        k = cmd.index("--rank-exec")
        self.assertEqual(os.path.realpath(cmd[k - 1]), os.path.realpath(LAUNCH))
        self.assertEqual(cmd[-3:], ["--", "/bin/echo", "hi"])

    def test_four_numa_nodes_one_rank_per_node_by_default(self):
        hf = self.hostfile("a\nb\n")
        plan = self.plan("--synthetic", FOUR_NODES, "--hostfile", hf, "--master-addr", "10.9.9.9", "--", "/bin/true")
        self.assertEqual((plan["nnodes"], plan["nprocs_per_node"], plan["world_size"]), (2, 4, 8))
        for r in plan["ranks"]:
            self.assertEqual(r["numa_nodes"], [r["local_rank"]])
            self.assertEqual(r["cores"], list(range(8 * r["local_rank"], 8 * r["local_rank"] + 8)))
            self.assertEqual(r["env"]["MASTER_ADDR"], "10.9.9.9")
        self.assertEqual(plan["ranks"][7]["host"], "b")

    def test_mpich_command(self):
        hf = self.hostfile("a:2\nb:2\n")
        r = run("--dry-run", "--json", "--synthetic", FOUR_NODES, "--hostfile", hf, "--nprocs-per-node", "2",
                "--mpi", "mpich", "--extra-mpi-params", "-launcher ssh -launcher-exec '/x y/agent'", "--", "/bin/true")
        self.assertExit(r, 0)
        plan = r.json()
        cmd = plan["mpi"]["command"]
        self.assertEqual(plan["mpi"]["implementation"], "mpich")
        self.assertEqual(cmd[1:9], ["-hosts", "a:2,b:2", "-n", "4", "-ppn", "2", "-bind-to", "none"])
        self.assertIn("/x y/agent", cmd)
        if not HAS_MPICH:
            self.assertIsNone(plan["mpi"]["launcher"])
            self.assertIn("Debian package mpich", r.err)

    def test_text_plan_and_log_names(self):
        hf = self.hostfile("node0\nnode1\n")
        r = run("--dry-run", "--synthetic", FOUR_NODES, "--hostfile", hf, "--nprocs-per-node", "2",
                "--log-dir", "/tmp/logs", "--", "/bin/true")
        self.assertExit(r, 0)
        self.assertIn("plan: 2 host(s) x 2 rank(s) = world size 4; master node0:29500", r.out)
        self.assertIn("rank 3 on node1 (host 1, local rank 1): cpus 32,34,", r.out)
        self.assertIn("cores 16-31, NUMA node 2-3\n", r.out)
        self.assertIn("log: /tmp/logs/run_rank3_node1.log", r.out)
        self.assertIn("    WORLD_SIZE=4", r.out)


class Errors(MultiNodeTest):
    def test_hostfile_errors_name_the_line(self):
        cases = [("node0\nnode1 slots=two\n", "line 2: slots=two: must be a whole number"),
                 ("node0\n\nnode0\n", "line 3: host node0 is listed again (first on line 1)"),
                 ("# only a comment\n", "no hosts"),
                 ("node0 cores=4\n", "line 1: unknown field 'cores=4'"),
                 ("node0\n" + "x" * 5000 + "\n", "line 2: longer than 4096 characters")]
        for text, mention in cases:
            with self.subTest(text=text[:30]):
                hf = self.hostfile(text)
                self.assertError(run("--hostfile", hf, "--", "/bin/true"), 3, f"--hostfile {hf}", mention)
        self.assertError(run("--hostfile", "/nonexistent/hosts", "--", "/bin/true"), 3, "cannot read")

    def test_usage_errors(self):
        hf = self.hostfile("127.0.0.1\n")
        two = self.hostfile("node0\nnode1\n", "two_hosts")
        cases = [(["--master-addr", "1.2.3.4"], "--master-addr is for multi-node runs"),
                 (["--dry-run", "--hostfile", two, "--nnodes", "0"], "--nnodes 0: takes a whole number of 1 or more"),
                 (["--dry-run", "--hostfile", two, "--nprocs-per-node", "0"], "--nprocs-per-node 0"),
                 (["--hostfile", hf, "--nnodes", "2"], "--nnodes 2: --hostfile"),
                 (["--nnodes", "2"], "--nnodes 2 needs --hostfile"),
                 (["--hostfile", hf, "--ninstances", "2"], "drop --ninstances"),
                 (["--hostfile", hf, "--master-port", "0"], "--master-port 0"),
                 (["--hostfile", hf, "--mpi", "lam"], "--mpi"),
                 (["--hostfile", hf, "--extra-mpi-params", "--mca 'x"], "unterminated"),
                 (["--nprocs-per-node", str(len(online_cpus()) + 1)], "--nprocs-per-node")]
        for flags, mention in cases:
            with self.subTest(flags=flags):
                self.assertError(run(*flags, "--", "/bin/true"), 2, mention)

    def test_master_address_must_be_this_machine(self):
        hf = self.hostfile("127.0.0.1\n")
        self.assertError(run("--hostfile", hf, "--master-addr", "192.0.2.1", "--", "/bin/true"), 2,
                         "--master-addr 192.0.2.1 is not an address of this machine", "127.0.0.1")
        hf = self.hostfile("192.0.2.7\n127.0.0.1\n")
        self.assertError(run("--hostfile", hf, "--", "/bin/true"), 2, "line 1, 192.0.2.7, is not this machine")

    # A DNS server that drops a query makes getaddrinfo wait its 5 s timeout and retry, so a
    # lookup of a .invalid name may still be running at the check's 10 s deadline.
    UNRESOLVED = ("does not resolve", "gave no answer within the 10 s host check")

    def assertUnresolved(self, result):
        self.assertTrue(any(phrase in result.err for phrase in self.UNRESOLVED), result)

    def test_unknown_host(self):
        hf = self.hostfile("127.0.0.1\nno-such-host.invalid\n")
        r = run("--hostfile", hf, "--", "/bin/true")
        self.assertError(r, 3, "line 2: host no-such-host.invalid ")
        self.assertUnresolved(r)

    def test_hostile_host_names_never_reach_mpirun(self):
        # A name starting with '-' would be an option to mpirun or ssh; the parser refuses
        # it (and every other non-RFC 1123 name) before any plan, dry run included.
        for name in ("-oProxyCommand", "-H", "node_1", "a..b", "x;touch", "10.0.0.256"):
            with self.subTest(name=name):
                hf = self.hostfile(f"127.0.0.1\n{name} slots=1\n")
                self.assertError(run("--dry-run", "--hostfile", hf, "--", "/bin/true"), 3,
                                 f"--hostfile {hf} line 2: host '{name}'")
        hf = self.hostfile("fe80::1\n")
        self.assertError(run("--dry-run", "--hostfile", hf, "--", "/bin/true"), 3, "line 1", "IPv6")
        hf = self.hostfile("127.0.0.1\n")
        self.assertError(run("--dry-run", "--hostfile", hf, "--master-addr=-oProxyCommand=x", "--", "/bin/true"), 2,
                         "--master-addr '-oProxyCommand=x' starts with '-'")

    def test_two_hundred_unresolvable_hosts_end_within_the_check_bound(self):
        # Names under the reserved .invalid TLD: NXDOMAIN, no host is contacted. The check
        # runs 32 at a time, stops after 3 failures, and never takes more than its 10 s.
        hf = self.hostfile("127.0.0.1\n" + "".join(f"h{i}.invalid\n" for i in range(200)))
        started = time.monotonic()
        r = run("--hostfile", hf, "--nprocs-per-node", "1", "--", "/bin/true")
        took = time.monotonic() - started
        self.assertError(r, 3, f"--hostfile {hf} line ", ".invalid ", "more not checked",
                         "the host check stops after 3 failed hosts or 10 s")
        self.assertUnresolved(r)
        self.assertLess(took, 12.0, r)
        # The error and the two warnings above it name one failed host each.
        self.assertEqual(len([l for l in r.err.splitlines() if ": host h" in l]), 3, r)

    def test_missing_mpi_names_the_package(self):
        r = run("--nprocs-per-node", "1", "--", "/bin/true", env={"PATH": "/nonexistent"})
        self.assertError(r, 4, "no MPI launcher was found", "openmpi-bin")
        if not HAS_MPICH:
            self.assertError(run("--nprocs-per-node", "1", "--mpi", "mpich", "--", "/bin/true"), 4,
                             "mpiexec.hydra", "Debian package mpich")

    def test_rank_exec_outside_mpirun(self):
        self.assertError(run("--rank-exec", "--nnodes", "1", "--nprocs-per-node", "1", "--", "/bin/true"), 2,
                         "--rank-exec runs one rank under mpirun")


@unittest.skipUnless(HAS_OPENMPI, "needs Open MPI (Debian package openmpi-bin)")
@unittest.skipUnless(TWO_CPUS, "needs two CPUs")
class LocalRanks(MultiNodeTest):
    def test_prefixed_output_logs_and_report(self):
        logs = os.path.join(self.tmp, "logs")
        r = run("--nprocs-per-node", "2", "--log-dir", logs, "--json", "--", "/bin/sh", "-c",
                'echo "out $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT"; '
                'grep Cpus_allowed_list /proc/self/status; echo "err $RANK" >&2')
        self.assertExit(r, 0)
        report = r.json()
        self.assertTrue(report["ok"])
        self.assertEqual(report["mpi"]["status"], "exit 0")
        cpus = []
        for rank in range(2):
            label = f"localhost:{rank}"
            out = lines_of(r.err, label)  # with --json, rank stdout goes to stderr
            self.assertIn(f"out {rank}/2 local {rank}/2 at 127.0.0.1:29500", out)
            self.assertIn(f"err {rank}", out)
            allowed = [l for l in out if l.startswith("Cpus_allowed_list")][0].split()[1]
            self.assertEqual(allowed, ",".join(map(str, report["ranks"][rank]["cpus"])))
            cpus += report["ranks"][rank]["cpus"]
            with open(os.path.join(logs, f"run_rank{rank}_localhost.log")) as f:
                self.assertIn(f"out {rank}/2", f.read())
        self.assertEqual(len(set(cpus)), 2)
        with open(os.path.join(logs, "run_summary.json")) as f:
            self.assertTrue(json.load(f)["ok"])
        self.assertTrue(os.path.exists(os.path.join(logs, "run_mpirun.log")))

    def test_failed_rank_exit_1_and_summary(self):
        r = run("--nprocs-per-node", "2", "--", "/bin/sh", "-c", 'exit $((RANK * 7))')
        self.assertExit(r, 1)
        self.assertIn("ipex-launch: error: 1 of 2 ranks failed (1); first: rank 1 on localhost: exit 7", r.err)
        self.assertIn("ipex-launch summary:", r.err)

    def test_require_isa_per_rank(self):
        r = run("--nprocs-per-node", "2", "--require-isa", "amx", "--", "/bin/cat",
                os.path.join(DATA, "onednn2_amx.log"))
        self.assertExit(r, 0)
        self.assertIn("oneDNN, rank 1: AMX: yes", r.err)
        r = run("--nprocs-per-node", "2", "--require-isa", "amx", "--json", "--", "/bin/cat",
                os.path.join(DATA, "onednn3_amx.log"))
        self.assertExit(r, 1)
        self.assertIn("rank 0 ran 85.0% on it", r.err)
        self.assertEqual([x["require_isa"]["ok"] for x in r.json()["ranks"]], [False, False])

    def test_signal_reaches_every_rank_through_mpirun(self):
        code, err, _, logs = self.stop_ranks('trap "echo got TERM; exit 3" TERM; echo ready; sleep 300 & wait')
        self.assertEqual(code, 1, err)
        self.assertIn("received SIGTERM", err)
        for rank in range(2):
            self.assertIn("got TERM", logs[rank])
        self.assertIn("exit 3", err)

    def stop_ranks(self, script, *launch_args, signals=(signal.SIGTERM,)):
        """Starts 2 ranks of `script`, waits until both said "ready", sends `signals` half
        a second apart; returns (exit code, stderr, elapsed seconds after the first
        signal, the rank logs)."""
        logs = os.path.join(self.tmp, "logs")
        proc = subprocess.Popen([LAUNCH, "--nprocs-per-node", "2", "--log-dir", logs, *launch_args, "--",
                                 "/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def log(rank):
            try:
                with open(os.path.join(logs, f"run_rank{rank}_localhost.log")) as f:
                    return f.read()
            except FileNotFoundError:
                return ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all("ready" in log(i) for i in range(2)):
            time.sleep(0.05)
        self.assertTrue(all("ready" in log(i) for i in range(2)), "ranks did not start")
        started = time.monotonic()
        for i, sig in enumerate(signals):
            if i:
                time.sleep(0.5)
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.monotonic() - started, [log(i) for i in range(2)]

    def test_rank_handlers_do_not_race_open_mpis_kill_timer(self):
        # The launcher passes the signal to each rank over its report connection, so Open
        # MPI's SIGTERM-then-SIGKILL timer (here its own default of 1 s) never starts: a
        # handler that takes 3 s finishes. (Through mpirun the TERM came after the timer and
        # the SIGKILL one timer later, which killed slower handlers: the flaky test.)
        code, err, took, logs = self.stop_ranks(
            'trap "echo got TERM; sleep 3; echo handler done; exit 3" TERM; echo ready; sleep 300 & wait',
            "--extra-mpi-params", "--mca odls_base_sigkill_timeout 1")
        self.assertEqual(code, 1, err)
        for rank in range(2):
            self.assertIn("handler done", logs[rank], err)
        self.assertEqual(err.count("exit 3"), 3, err)  # two summary rows and the error line
        self.assertLess(took, 30, err)

    def test_second_signal_kills_the_ranks_programs(self):
        code, err, _, _ = self.stop_ranks('trap "" TERM; echo ready; while :; do sleep 0.1; done',
                                          signals=(signal.SIGTERM, signal.SIGTERM))
        self.assertEqual(code, 1, err)
        self.assertIn("sending SIGKILL to the ranks", err)
        self.assertEqual(err.count("signal 9 (SIGKILL)"), 3, err)


@unittest.skipUnless(HAS_MPICH, "needs MPICH (Debian package mpich); its command line is unit-tested")
@unittest.skipUnless(TWO_CPUS, "needs two CPUs")
class LocalRanksMpich(MultiNodeTest):
    def test_two_ranks(self):
        r = run("--nprocs-per-node", "2", "--mpi", "mpich", "--", "/bin/sh", "-c", 'echo "rank $RANK"')
        self.assertExit(r, 0)
        for rank in range(2):
            self.assertEqual(lines_of(r.out, f"localhost:{rank}"), [f"rank {rank}"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
