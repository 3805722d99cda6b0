"""Bad options, conflicting flags, missing programs and bad files: documented exit codes and
one clear error line naming the flag or file."""
import os
import resource
import subprocess
import unittest

from launch_e2e import LAUNCH, LaunchTest, run, online_cpus

SYN = ["--synthetic", "package:1 core:4 pu:1", "--dry-run"]


class UsageErrors(LaunchTest):
    def test_unknown_option_suggests_the_right_one(self):
        r = run("--ninstance", "2", "--", "/bin/true")
        self.assertError(r, 2, "--ninstance", "did you mean --ninstances?")

    def test_bad_values(self):
        self.assertError(run("--ninstances", "abc", "--", "/bin/true"), 2, "--ninstances")
        self.assertError(run("--strategy", "spread", "--", "/bin/true"), 2, "--strategy")
        self.assertError(run("--memory-allocator", "mimalloc", "--", "/bin/true"), 2, "--memory-allocator")
        self.assertError(run("--omp-runtime", "gnu", "--", "/bin/true"), 2, "--omp-runtime")
        self.assertError(run("--multi-task-manager", "srun", "--", "/bin/true"), 2, "--multi-task-manager")
        self.assertError(run("--require-isa", "amx9", "--", "/bin/true"), 2, "--require-isa amx9")
        self.assertError(run("--require-isa", "amx", "--require-isa-share", "1.5", "--", "/bin/true"), 2,
                         "--require-isa-share")
        self.assertError(run(*SYN, "--cores-list", "3-1", "--", "/bin/true"), 2, "--cores-list", "backwards")
        self.assertError(run(*SYN, "--nodes-list", "x", "--", "/bin/true"), 2, "--nodes-list")
        self.assertError(run("--log-file-prefix", "a/b", "--", "/bin/true"), 2, "--log-file-prefix")

    def test_conflicting_flags(self):
        cases = [
            (["--latency-mode", "--throughput-mode"], "--throughput-mode"),
            (["--throughput-mode", "--ninstances", "2"], "--ninstances"),
            (["--latency-mode", "--ncores-per-instance", "2"], "--ncores-per-instance"),
            (["--cores-list", "0", "--cpus-list", "0"], "--cpus-list"),
            (["--topology", "x.xml"], "--synthetic"),
            (["-m", "--no-python"], "--no-python"),
            (["--benchmark", "--memory-allocator", "tcmalloc"], "--benchmark"),
            (["--quiet", "--verbose"], "--quiet"),
        ]
        for flags, mention in cases:
            with self.subTest(flags=flags):
                self.assertError(run(*SYN, *flags, "--", "/bin/true"), 2, mention)

    def test_plans_for_another_machine_need_dry_run(self):
        r = run("--synthetic", "package:1 core:4 pu:1", "--", "/bin/true")
        self.assertError(r, 2, "--synthetic", "--dry-run")

    def test_impossible_requests(self):
        n = len(online_cpus())
        self.assertError(run("--ninstances", str(n + 1), "--", "/bin/true"), 2, f"--ninstances {n + 1}")
        self.assertError(run(*SYN, "--ncores-per-instance", "5", "--", "/bin/true"), 2, "only 4")
        self.assertError(run(*SYN, "--ninstances", "2", "--instance-idx", "2", "--", "/bin/true"), 2,
                         "--instance-idx 2")
        self.assertError(run(*SYN, "--cpus-list", "9", "--", "/bin/true"), 2, "--cpus-list: CPU 9")

    def test_missing_programs(self):
        self.assertError(run("--", "no-such-program-xyz"), 2, "no-such-program-xyz", "PATH")
        self.assertError(run("--", "/nonexistent/prog"), 2, "/nonexistent/prog")
        self.assertError(run("--", os.path.join(self.tmp, "missing.py")), 2, "missing.py")
        self.assertError(run("--python", "/nonexistent/python3", "--", "/etc/hostname.py"), 2)
        self.assertError(run("--ninstances", "1"), 2, "no program given")
        self.assertError(run("-m", "--python", "/nonexistent/python", "--", "json.tool"), 2, "--python")

    def test_missing_tool(self):
        r = run("--multi-task-manager", "numactl", "--", "/bin/true", env={"PATH": "/nonexistent"})
        self.assertError(r, 4, "numactl", "Debian package numactl")

    def test_unwritable_log_dir(self):
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        self.assertError(run("--log-dir", os.path.join(blocker, "logs"), "--", "/bin/true"), 2, "--log-dir")


class BadFiles(LaunchTest):
    def test_unreadable_topology(self):
        r = run("--dry-run", "--topology", "/nonexistent/topo.xml", "--", "/bin/true")
        self.assertError(r, 3, "--topology /nonexistent/topo.xml")

    def test_corrupt_topology(self):
        path = os.path.join(self.tmp, "topo.xml")
        with open(path, "w") as f:
            f.write("<topology><object type=\"Machine\"")
        self.assertError(run("--dry-run", "--topology", path, "--", "/bin/true"), 3, path, "lstopo")

    def test_topology_that_is_not_xml(self):
        path = os.path.join(self.tmp, "topo.xml")
        with open(path, "wb") as f:
            f.write(os.urandom(256))
        self.assertError(run("--dry-run", "--topology", path, "--", "/bin/true"), 3, path)


def _no_more_processes():
    """In the child before exec: allow no further process for this user (root ignores
    RLIMIT_NPROC, so a root test drops to nobody first, who owns no other process)."""
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)


class InternalErrors(LaunchTest):
    def test_failed_fork_exits_5_with_a_message(self):
        # An internal error (here fork: EAGAIN) must end the launcher with exit 5 and one
        # error line, not a crash or a spin.
        os.chmod(self.tmp, 0o777)
        proc = subprocess.run([LAUNCH, "--ninstances", "1", "--", "/bin/true"], capture_output=True,
                              text=True, timeout=60, cwd=self.tmp, preexec_fn=_no_more_processes)
        if proc.returncode != 5 and "fork" not in proc.stderr:
            # The limit did not bite (a kernel or container that does not apply RLIMIT_NPROC).
            probe = subprocess.run(["/bin/sh", "-c", "/bin/true"], capture_output=True,
                                   preexec_fn=_no_more_processes)
            if probe.returncode == 0:
                self.skipTest("RLIMIT_NPROC does not stop fork here; cannot provoke an internal error")
        self.assertEqual(proc.returncode, 5, proc.stderr)
        errors = [l for l in proc.stderr.splitlines() if l.startswith("ipex-launch: error: ")]
        self.assertEqual(len(errors), 1, proc.stderr)
        self.assertIn("fork", errors[0])


class CountOptions(LaunchTest):
    """An explicit count is 1 or more: 0 or a negative number is a usage error naming the
    flag, never taken for the option left out (which used to run one instance for
    --ninstances 0 and plan every host for --nnodes 0)."""

    def test_zero_and_negative_counts_are_usage_errors(self):
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("node0\nnode1\n")
        for flag, extra in (("--ninstances", SYN), ("--ncores-per-instance", SYN),
                            ("--nnodes", ["--dry-run", "--hostfile", hosts]),
                            ("--nprocs-per-node", ["--dry-run", "--hostfile", hosts])):
            for value in ("0", "-1", "-7"):
                if flag == "--ncores-per-instance" and value in ("0", "-1"):
                    continue  # its two split modes
                with self.subTest(flag=flag, value=value):
                    self.assertError(run(*extra, flag, value, "--", "/bin/true"), 2, f"{flag} {value}: takes a whole "
                                     "number of 1 or more", "leave it out for the default")

    def test_ncores_per_instance_modes_and_one_instance(self):
        r = run(*SYN, "--json", "--ninstances", "1", "--ncores-per-instance", "0", "--", "/bin/true")
        self.assertExit(r, 0)
        self.assertEqual(len(r.json()["instances"]), 1)
        # Given is given: an explicit 0 conflicts with a mode that sets the cores itself.
        self.assertError(run(*SYN, "--latency-mode", "--ncores-per-instance", "0", "--", "/bin/true"), 2,
                         "drop --ncores-per-instance")


class Help(LaunchTest):
    def test_help_lists_every_flag(self):
        r = run("--help")
        self.assertExit(r, 0)
        for flag in ("--ninstances", "--ncores-per-instance", "--instance-idx", "--strategy",
                     "--bind-numa-node", "--use-logical-cores", "--use-e-cores", "--cores-list",
                     "--cpus-list", "--nodes-list", "--latency-mode", "--throughput-mode",
                     "--multi-task-manager", "--memory-allocator", "--benchmark", "--omp-runtime",
                     "--module", "--no-python", "--python", "--log-dir", "--log-file-prefix",
                     "--onednn-verbose", "--require-isa", "--require-isa-share", "--timeout", "--dry-run",
                     "--json", "--quiet", "--verbose", "--topology", "--synthetic", "--version"):
            self.assertIn(flag, r.out)

    def test_man_page_and_help_list_the_same_flags(self):
        import re
        man = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "man", "ipex-launch.1")
        with open(man) as f:
            page = f.read()
        # An option of --help starts its line: "  --flag TYPE  description" or "  -q,--quiet".
        help_flags = {m for line in run("--help").out.splitlines()
                      for m in re.findall(r"^  (?:-\w,)?(--[a-z][a-z-]*[a-z])", line)}
        # An option of the page is a .TP item: its first line names it.
        items = re.findall(r"^\.TP\n(\.B[IR]? .*)$", page, re.M)
        man_flags = {m.replace("\\-", "-") for item in items for m in re.findall(r"\\-\\-[a-z][a-z\\-]*[a-z]", item)}
        self.assertEqual(help_flags - {"--help"} - man_flags, set(), "in --help, not in the man page")
        self.assertEqual(man_flags - help_flags, set(), "in the man page, not in --help")

    def test_failed_writes_to_stdout_are_exit_2(self):
        # The dry-run plan printed to a full device or a closed stdout is lost: exit 2, never 0.
        argv = [LAUNCH, *SYN, "--", "/bin/true"]
        with open("/dev/full", "w") as full:
            proc = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("ipex-launch: error: cannot write standard output", proc.stderr)
        proc = subprocess.run(["/bin/sh", "-c", '"$@" >&-', "sh", *argv], stderr=subprocess.PIPE, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("cannot write standard output: it is closed", proc.stderr)

    def test_version(self):
        r = run("--version")
        self.assertExit(r, 0)
        self.assertTrue(r.out.startswith("ipex-launch "))


if __name__ == "__main__":
    unittest.main()
