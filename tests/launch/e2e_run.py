"""ipex-launch real runs on this machine: pinning, environment, logs, summary, failures."""
import json
import os
import unittest

from launch_e2e import (LaunchTest, run, online_cpus, prefixed_lines, parse_list, summary_rows, PYTHON)

SHOW = ('grep -E "^(Cpus|Mems)_allowed_list" /proc/self/status; '
        'echo "policy=$(head -1 /proc/self/numa_maps | cut -d" " -f2)"; '
        'echo "OMP=$OMP_NUM_THREADS INSTANCE=$IPEX_LAUNCH_INSTANCE"')


def field(lines, name):
    """Value of "NAME:<tab>value" (from /proc) or "NAME=value" (from the shell)."""
    for line in lines:
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
        if line.startswith(name + "="):
            return line.split("=", 1)[1]
    return None


@unittest.skipIf(len(online_cpus()) < 2, "needs two CPUs")
class TwoInstances(LaunchTest):
    def test_each_instance_reads_its_own_cpus(self):
        r = run("--ninstances", "2", "--json", "--", "/bin/sh", "-c", SHOW)
        self.assertExit(r, 0)
        report = r.json()
        cpus = online_cpus()
        seen = []
        for i in range(2):
            lines = prefixed_lines(r.err, i)  # with --json the instances' output goes to stderr
            allowed = parse_list(field(lines, "Cpus_allowed_list"))
            self.assertEqual(allowed, report["instances"][i]["cpus"])
            self.assertEqual(lines[-1], f"OMP={len(allowed)} INSTANCE={i}")
            self.assertTrue(field(lines, "policy").startswith("bind:"), lines)
            seen += allowed
        self.assertEqual(sorted(seen), cpus[:len(seen)])
        self.assertEqual(len(set(seen)), len(seen))
        self.assertTrue(report["ok"])
        self.assertEqual([i["status"] for i in report["instances"]], ["exit 0", "exit 0"])

    def test_console_prefixes_stdout_and_stderr(self):
        r = run("--ninstances", "2", "--", "/bin/sh", "-c", 'echo "out $IPEX_LAUNCH_INSTANCE"; echo "err" >&2')
        self.assertExit(r, 0)
        self.assertEqual(prefixed_lines(r.out, 0), ["out 0"])
        self.assertEqual(prefixed_lines(r.out, 1), ["out 1"])
        self.assertEqual(prefixed_lines(r.err, 1), ["err"])

    def test_logs_and_summary(self):
        logs = os.path.join(self.tmp, "logs", "nested")
        r = run("--ninstances", "2", "--log-dir", logs, "--log-file-prefix", "job", "--",
                "/bin/sh", "-c", 'echo "hello $IPEX_LAUNCH_INSTANCE"; echo warn >&2')
        self.assertExit(r, 0)
        cpus = online_cpus()
        for i in range(2):
            path = os.path.join(logs, f"job_instance{i}_cpus{cpus[i]}.log")
            with open(path) as f:
                text = f.read()
            self.assertIn(f"hello {i}\n", text)   # raw output, no prefix
            self.assertIn("warn\n", text)
        with open(os.path.join(logs, "job_summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(summary["ok"])
        self.assertEqual(len(summary["instances"]), 2)
        rows = summary_rows(r.err)
        self.assertEqual([row["instance"] for row in rows], ["0", "1"])
        for i, row in enumerate(rows):
            self.assertEqual(row["cpus"], str(cpus[i]))
            self.assertEqual(row["status"], "exit 0")
            self.assertTrue(row["wall"].endswith(" s"))
            self.assertRegex(row["peak RSS"], r"^[0-9.]+ (KiB|MiB|GiB)$")
            self.assertTrue(row["pid"].isdigit())

    def test_one_failing_instance_fails_the_run(self):
        r = run("--ninstances", "2", "--", "/bin/sh", "-c", '[ "$IPEX_LAUNCH_INSTANCE" = 1 ] && exit 7; exit 0')
        self.assertExit(r, 1)
        rows = summary_rows(r.err)
        self.assertEqual([row["status"] for row in rows], ["exit 0", "exit 7"])
        self.assertIn("ipex-launch: error: 1 instance of 2 failed: instance 1 exit 7", r.err)

    def test_instance_subset_runs_only_those(self):
        r = run("--ninstances", "2", "--instance-idx", "1", "--json", "--", "/bin/sh", "-c",
                'echo "i=$IPEX_LAUNCH_INSTANCE n=$IPEX_LAUNCH_NINSTANCES"')
        self.assertExit(r, 0)
        self.assertEqual([i["index"] for i in r.json()["instances"]], [1])
        self.assertEqual(prefixed_lines(r.err, 1), ["i=1 n=2"])
        self.assertEqual(prefixed_lines(r.err, 0), [])


class Environment(LaunchTest):
    def child_env(self, *args, env=None):
        r = run(*args, "--", "/usr/bin/env", env=env)
        self.assertExit(r, 0)
        return dict(line.split("=", 1) for line in prefixed_lines(r.out, 0) if "=" in line), r

    def test_variables_set_and_user_ones_kept(self):
        user_lib = "/usr/lib/x86_64-linux-gnu/libnuma.so.1"
        env, r = self.child_env("--memory-allocator", "jemalloc", "--omp-runtime", "intel",
                                env={"KMP_BLOCKTIME": "200", "LD_PRELOAD": user_lib})
        preload = env["LD_PRELOAD"].split(":")
        self.assertTrue(preload[0].endswith("libjemalloc.so.2"), preload)
        self.assertIn(os.path.basename(preload[1]), ("libiomp5.so", "libomp.so.5", "libomp.so"))
        self.assertEqual(preload[2], user_lib)
        self.assertEqual(env["KMP_BLOCKTIME"], "200")
        self.assertIn("KMP_BLOCKTIME=200 is already set", r.err)
        cpus = ",".join(str(c) for c in online_cpus())
        self.assertEqual(env["KMP_AFFINITY"], f"granularity=fine,explicit,proclist=[{cpus}]")
        self.assertEqual(env["OMP_NUM_THREADS"], str(len(online_cpus())))
        self.assertIn("background_thread:true", env["MALLOC_CONF"])

    def test_gnu_openmp(self):
        env, _ = self.child_env("--omp-runtime", "default", "--memory-allocator", "default",
                                env={"LD_PRELOAD": None})
        self.assertNotIn("LD_PRELOAD", env)
        self.assertEqual(env["OMP_PROC_BIND"], "close")
        self.assertEqual(env["OMP_PLACES"], ",".join("{%d}" % c for c in online_cpus()))
        self.assertNotIn("KMP_AFFINITY", env)

    def test_jemalloc_accepts_the_documented_settings(self):
        for extra in ([], ["--benchmark"]):
            r = run("--memory-allocator", "jemalloc", *extra, "--", "/bin/true")
            self.assertExit(r, 0)
            self.assertNotIn("<jemalloc>", r.err)

    def test_python_script_runs_unbuffered(self):
        script = os.path.join(self.tmp, "job.py")
        with open(script, "w") as f:
            f.write("import os, sys\n"
                    "print(sys.stdout.write_through, sorted(os.sched_getaffinity(0)), sys.argv[1:])\n")
        r = run("--python", PYTHON, "--ninstances", "1", "--cpus-list", str(online_cpus()[0]), "--",
                script, "--batch", "4")
        self.assertExit(r, 0)
        self.assertEqual(prefixed_lines(r.out, 0), [f"True [{online_cpus()[0]}] ['--batch', '4']"])

    def test_python_module(self):
        r = run("--python", PYTHON, "-m", "--", "json.tool", "--help")
        self.assertExit(r, 0)
        self.assertTrue(any("usage" in l for l in prefixed_lines(r.out, 0)), r)


class Binding(LaunchTest):
    def allowed(self, *args):
        r = run("--ninstances", "1", "--cpus-list", str(online_cpus()[-1]), *args, "--", "/bin/sh", "-c", SHOW)
        self.assertExit(r, 0)
        lines = prefixed_lines(r.out, 0)
        return parse_list(field(lines, "Cpus_allowed_list")), field(lines, "policy")

    def test_direct(self):
        self.assertEqual(self.allowed(), ([online_cpus()[-1]], "bind:0"))

    def test_numactl(self):
        self.assertEqual(self.allowed("--multi-task-manager", "numactl"), ([online_cpus()[-1]], "bind:0"))

    def test_taskset_binds_cpus_only(self):
        cpus, policy = self.allowed("--multi-task-manager", "taskset")
        self.assertEqual(cpus, [online_cpus()[-1]])
        self.assertEqual(policy, "default")

    def test_none_leaves_the_process_unbound(self):
        cpus, policy = self.allowed("--multi-task-manager", "none")
        self.assertEqual(cpus, online_cpus())
        self.assertEqual(policy, "default")


class Lifetime(LaunchTest):
    def test_timeout(self):
        r = run("--timeout", "1", "--", "/bin/sh", "-c", "sleep 30")
        self.assertExit(r, 1)
        self.assertIn("timed out", r.err)
        self.assertEqual(summary_rows(r.err)[0]["status"], "signal 15 (SIGTERM), timed out")

    def test_quiet_success_prints_no_summary(self):
        r = run("--quiet", "--", "/bin/true")
        self.assertExit(r, 0)
        self.assertEqual(r.err, "")
        r = run("--quiet", "--", "/bin/false")
        self.assertExit(r, 1)
        self.assertIn("ipex-launch summary:", r.err)

    def test_program_killed_by_a_signal(self):
        r = run("--", "/bin/sh", "-c", "kill -SEGV $$")
        self.assertExit(r, 1)
        self.assertIn("signal 11 (SIGSEGV)", r.err)


if __name__ == "__main__":
    unittest.main()
