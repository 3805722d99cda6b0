#!/usr/bin/python3
"""`ipex-tool info`: human output, JSON fields, ISA flags against /proc/cpuinfo."""

import os

import e2e_common as e2e

# JSON feature name -> /proc/cpuinfo flag.
CPUINFO_FLAGS = {
    "avx2": "avx2",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512dq": "avx512dq",
    "avx512_vnni": "avx512_vnni",
    "avx512_bf16": "avx512_bf16",
    "avx512_fp16": "avx512_fp16",
    "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16",
    "amx_int8": "amx_int8",
}


def cpuinfo():
    """(vendor_id, model name, set of flags) of the first processor in /proc/cpuinfo."""
    vendor, model, flags = "", "", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "vendor_id" and not vendor:
                vendor = value
            elif key == "model name" and not model:
                model = value
            elif key == "flags" and not flags:
                flags = set(value.split())
    return vendor, model, flags


class Info(e2e.ToolTestCase):
    def test_human_output(self):
        result = self.tool("info")
        self.assertTrue(result.stdout.strip(), "info printed nothing")
        _, model, _ = cpuinfo()
        if model:
            self.assertIn(model.split()[0], result.stdout)

    def test_json_keys(self):
        info = self.tool_json("info", "--json")
        for key in ("cpu", "features", "amx", "onednn", "libtorch", "threads", "topology"):
            self.assertIn(key, info)
        self.assertIsInstance(info["cpu"]["vendor"], str)
        self.assertIsInstance(info["cpu"]["model"], str)
        self.assertEqual(sorted(info["features"]), sorted(CPUINFO_FLAGS))
        for name, value in info["features"].items():
            self.assertIsInstance(value, bool, f"features.{name}")
        self.assertIsInstance(info["amx"]["usable"], bool)
        self.assertIsInstance(info["amx"]["status"], str)
        self.assertTrue(info["amx"]["status"])
        self.assertIsInstance(info["onednn"]["version"], str)
        self.assertRegex(info["onednn"]["version"], r"^\d+\.\d+")
        self.assertIsInstance(info["onednn"]["isa"], str)
        self.assertTrue(info["onednn"]["isa"])
        self.assertRegex(info["libtorch"]["version"], r"^\d+\.\d+")
        self.assertIsInstance(info["threads"], int)
        self.assertGreaterEqual(info["threads"], 1)
        topo = info["topology"]
        for key in ("sockets", "numa_nodes", "cores", "logical_cpus"):
            self.assertIsInstance(topo[key], int, f"topology.{key}")
            self.assertGreaterEqual(topo[key], 1, f"topology.{key}")
        self.assertIn("smt", topo)
        self.assertLessEqual(topo["cores"], topo["logical_cpus"])
        self.assertLessEqual(topo["sockets"], topo["cores"])

    def test_features_match_proc_cpuinfo(self):
        info = self.tool_json("info", "--json")
        vendor, model, flags = cpuinfo()
        if not flags:
            self.skipTest("/proc/cpuinfo has no flags line (not x86 Linux?)")
        mismatches = {name: (info["features"][name], flag in flags)
                      for name, flag in CPUINFO_FLAGS.items()
                      if info["features"][name] != (flag in flags)}
        self.assertEqual(mismatches, {}, "feature (ipex-tool, /proc/cpuinfo) disagreements")
        if vendor:
            self.assertEqual(info["cpu"]["vendor"], vendor)
        if model:
            self.assertEqual(info["cpu"]["model"].strip(), model)

    def test_amx_usable_needs_amx(self):
        info = self.tool_json("info", "--json")
        if not (info["features"]["amx_tile"] and info["features"]["amx_bf16"]):
            self.assertFalse(info["amx"]["usable"], "AMX usable on a CPU without AMX")
        if info["amx"]["usable"]:
            self.assertIn("amx", info["onednn"]["isa"].lower())

    def test_topology_matches_os(self):
        info = self.tool_json("info", "--json")
        topo = info["topology"]
        online = os.cpu_count()
        allowed = len(os.sched_getaffinity(0))
        self.assertGreaterEqual(topo["logical_cpus"], min(allowed, online))
        self.assertLessEqual(topo["logical_cpus"], online)
        self.assertLessEqual(info["threads"], max(online, 1) * 2)

    def test_threads_follow_omp_num_threads(self):
        # ctest sets OMP_NUM_THREADS=2; libtorch's intra-op pool follows it.
        if os.environ.get("OMP_NUM_THREADS") != "2":
            self.skipTest("OMP_NUM_THREADS is not 2 in this environment")
        info = self.tool_json("info", "--json")
        self.assertEqual(info["threads"], 2)


if __name__ == "__main__":
    e2e.main()
