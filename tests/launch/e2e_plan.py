"""ipex-launch --dry-run: the plan as text and JSON, for synthetic and XML machines."""
import os
import subprocess
import unittest

from launch_e2e import LaunchTest, run, PYTHON

FOUR_NODES = "package:2 numa:2 core:8 pu:2"


class DryRun(LaunchTest):
    def plan(self, *args, env=None):
        r = run("--dry-run", "--json", *args, env=env)
        self.assertExit(r, 0)
        return r.json(), r

    def test_json_plan_for_four_numa_nodes(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "4", "--", "/bin/echo", "hi")
        self.assertEqual(plan["ninstances"], 4)
        self.assertEqual(plan["topology"]["numa_nodes"], [0, 1, 2, 3])
        self.assertEqual(plan["topology"]["cores"], 32)
        instances = plan["instances"]
        self.assertEqual([i["index"] for i in instances], [0, 1, 2, 3])
        for i, inst in enumerate(instances):
            for key in ("index", "cpus", "cores", "numa_nodes", "env", "ld_preload", "command"):
                self.assertIn(key, inst)
            self.assertEqual(inst["cores"], list(range(8 * i, 8 * i + 8)))
            self.assertEqual(inst["cpus"], list(range(16 * i, 16 * i + 16, 2)))
            self.assertEqual(inst["numa_nodes"], [i])
            self.assertEqual(inst["command"], ["/bin/echo", "hi"])
            self.assertEqual(inst["env"]["OMP_NUM_THREADS"], "8")
            self.assertEqual(inst["env"]["IPEX_LAUNCH_INSTANCE"], str(i))
            if inst["ld_preload"]:
                self.assertEqual(inst["env"]["LD_PRELOAD"], ":".join(inst["ld_preload"]))

    def test_text_plan(self):
        r = run("--dry-run", "--synthetic", FOUR_NODES, "--ninstances", "4", "--use-logical-cores",
                "--", "/bin/echo", "a b")
        self.assertExit(r, 0)
        self.assertIn("instance 0: cpus 0-15, cores 0-7, NUMA node 0", r.out)
        self.assertIn("instance 1: cpus 16-31, cores 8-15, NUMA node 1", r.out)
        self.assertIn("OMP_NUM_THREADS=16", r.out)
        self.assertIn("command: /bin/echo 'a b'", r.out)

    def test_xml_topology_plans_like_the_synthetic_one(self):
        xml = os.path.join(self.tmp, "topo.xml")
        subprocess.run(["lstopo-no-graphics", "--if", "synthetic", "--input", FOUR_NODES,
                        "--of", "xml", xml], check=True, capture_output=True)
        from_xml, _ = self.plan("--topology", xml, "--ninstances", "4", "--", "/bin/true")
        from_syn, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "4", "--", "/bin/true")
        self.assertEqual([i["cpus"] for i in from_xml["instances"]],
                         [i["cpus"] for i in from_syn["instances"]])

    def test_gnu_openmp_and_jemalloc(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "2", "--ncores-per-instance", "2",
                            "--omp-runtime", "default", "--memory-allocator", "jemalloc", "--benchmark",
                            "--", "/bin/true")
        env = plan["instances"][1]["env"]
        self.assertEqual(env["OMP_PLACES"], "{4},{6}")
        self.assertEqual(env["OMP_PROC_BIND"], "close")
        self.assertEqual(env["OMP_SCHEDULE"], "STATIC")
        self.assertNotIn("KMP_AFFINITY", env)
        self.assertIn("dirty_decay_ms:-1", env["MALLOC_CONF"])
        self.assertTrue(plan["instances"][1]["ld_preload"][0].endswith("libjemalloc.so.2"))
        self.assertEqual(plan["allocator"]["name"], "jemalloc")

    def test_intel_openmp(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "2", "--ncores-per-instance", "2",
                            "--omp-runtime", "intel", "--memory-allocator", "tcmalloc", "--", "/bin/true")
        inst = plan["instances"][1]
        self.assertEqual(inst["env"]["KMP_AFFINITY"], "granularity=fine,explicit,proclist=[4,6]")
        self.assertEqual(inst["env"]["KMP_BLOCKTIME"], "1")
        self.assertNotIn("OMP_PLACES", inst["env"])
        names = [os.path.basename(p) for p in inst["ld_preload"]]
        self.assertEqual(names[0], "libtcmalloc.so.4")
        self.assertIn(names[1], ("libiomp5.so", "libomp.so.5", "libomp.so"))

    def test_user_variables_and_preload_are_kept(self):
        plan, r = self.plan("--synthetic", FOUR_NODES, "--ninstances", "2", "--memory-allocator", "jemalloc",
                            "--", "/bin/true",
                            env={"OMP_NUM_THREADS": "3", "LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libnuma.so.1"})
        inst = plan["instances"][0]
        self.assertNotIn("OMP_NUM_THREADS", inst["env"])
        self.assertEqual(inst["env_kept"], {"OMP_NUM_THREADS": "3"})
        self.assertEqual(inst["ld_preload"][-1], "/usr/lib/x86_64-linux-gnu/libnuma.so.1")
        self.assertTrue(inst["ld_preload"][0].endswith("libjemalloc.so.2"))
        self.assertIn("ipex-launch: warning: OMP_NUM_THREADS=3 is already set", r.err)
        self.assertEqual(r.err.count("OMP_NUM_THREADS=3"), 1)

    def test_crossing_warning(self):
        _, r = self.plan("--synthetic", FOUR_NODES, "--ninstances", "3", "--", "/bin/true")
        self.assertIn("ipex-launch: warning: instances 0-2 span more than one NUMA node", r.err)
        _, r = self.plan("--synthetic", FOUR_NODES, "--ninstances", "2", "--ncores-per-instance", "6", "--",
                         "/bin/true")
        self.assertIn("ipex-launch: warning: instance 1 spans more than one NUMA node", r.err)
        _, r = self.plan("--synthetic", FOUR_NODES, "--ninstances", "3", "--bind-numa-node", "--", "/bin/true")
        self.assertNotIn("NUMA node", r.err)

    def test_instance_subset_and_log_names(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ncores-per-instance", "4", "--instance-idx", "1,6",
                            "--log-dir", self.tmp, "--log-file-prefix", "bench", "--", "/bin/true")
        self.assertEqual(plan["ninstances"], 8)
        self.assertEqual([i["index"] for i in plan["instances"]], [1, 6])
        self.assertEqual(plan["instances"][1]["cores"], [24, 25, 26, 27])
        self.assertEqual(plan["instances"][0]["log_file"],
                         os.path.join(self.tmp, "bench_instance1_cpus8_10_12_14.log"))
        self.assertFalse(os.listdir(self.tmp))  # a dry run writes nothing

    def test_task_managers(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "4", "--multi-task-manager", "numactl",
                            "--", "true")
        self.assertEqual(plan["instances"][1]["command"][:4],
                         ["numactl", "--physcpubind=16,18,20,22,24,26,28,30", "--membind=1", "--"])
        self.assertTrue(plan["instances"][1]["command"][4].endswith("/true"))
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--ninstances", "4", "--multi-task-manager", "taskset",
                            "--", "/bin/true")
        self.assertEqual(plan["instances"][0]["command"],
                         ["taskset", "--cpu-list", "0,2,4,6,8,10,12,14", "/bin/true"])

    def test_python_programs(self):
        script = os.path.join(self.tmp, "job.py")
        open(script, "w").write("print('hi')\n")
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--python", PYTHON, "--", script, "--batch", "8")
        self.assertEqual(plan["instances"][0]["command"], [PYTHON, "-u", script, "--batch", "8"])
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--python", PYTHON, "-m", "--", "json.tool", "x.json")
        self.assertEqual(plan["instances"][0]["command"], [PYTHON, "-u", "-m", "json.tool", "x.json"])
        # After the program everything is passed on unchanged, "--" included.
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--", "/bin/echo", "--", "-x")
        self.assertEqual(plan["instances"][0]["command"], ["/bin/echo", "--", "-x"])
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--no-python", "--", "/bin/true", "a.py")
        self.assertEqual(plan["instances"][0]["command"], ["/bin/true", "a.py"])

    def test_program_missing_here_is_a_warning_in_a_dry_run(self):
        plan, r = self.plan("--synthetic", FOUR_NODES, "--", "not-installed-here", "x")
        self.assertEqual(plan["instances"][0]["command"], ["not-installed-here", "x"])
        self.assertIn("ipex-launch: warning: program 'not-installed-here' was not found", r.err)

    def test_modes(self):
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--throughput-mode", "--", "/bin/true")
        self.assertEqual([i["numa_nodes"] for i in plan["instances"]], [[0], [1], [2], [3]])
        plan, _ = self.plan("--synthetic", FOUR_NODES, "--latency-mode", "--", "/bin/true")
        self.assertEqual([len(i["cores"]) for i in plan["instances"]], [4] * 8)

    def test_negative_count_is_a_value_not_an_option(self):
        plan, _ = self.plan("--synthetic", "package:1 core:5 pu:1", "--ninstances", "2",
                            "--ncores-per-instance", "-1", "--", "/bin/true")
        self.assertEqual([i["cores"] for i in plan["instances"]], [[0, 1, 2], [3, 4]])

    def test_this_machine(self):
        plan, _ = self.plan("--", "/bin/true")
        self.assertEqual(plan["topology"]["source"], "this machine")
        self.assertEqual(plan["instances"][0]["cpus"], sorted(os.sched_getaffinity(0)))


if __name__ == "__main__":
    unittest.main()
