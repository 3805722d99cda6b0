#!/usr/bin/python3
"""`ipex-tool info`: human output, JSON fields, ISA flags against /proc/cpuinfo."""

import ctypes
import mmap
import os
import platform

import e2e_common as e2e

# JSON feature name -> /proc/cpuinfo flag.
CPUINFO_FLAGS = {
    "avx2": "avx2",
    "avx_vnni": "avx_vnni",
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


# x86-64 SysV: void cpuid(uint32 leaf, uint32 subleaf, uint32 out[4]) -> eax, ebx, ecx, edx.
_CPUID_CODE = bytes([
    0x53,                    # push rbx
    0x89, 0xF8,              # mov eax, edi
    0x89, 0xF1,              # mov ecx, esi
    0x49, 0x89, 0xD0,        # mov r8, rdx
    0x0F, 0xA2,              # cpuid
    0x41, 0x89, 0x00,        # mov [r8], eax
    0x41, 0x89, 0x58, 0x04,  # mov [r8+4], ebx
    0x41, 0x89, 0x48, 0x08,  # mov [r8+8], ecx
    0x41, 0x89, 0x50, 0x0C,  # mov [r8+12], edx
    0x5B,                    # pop rbx
    0xC3,                    # ret
])


def cpuid_brand():
    """The processor brand string from cpuid leaves 0x80000002-4, read here independently of
    ipex-tool; None where it cannot be read (not x86-64, no executable mapping allowed)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError):
        return None
    try:
        buf.write(_CPUID_CODE)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        fn = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.POINTER(ctypes.c_uint32))(addr)
        regs = (ctypes.c_uint32 * 4)()
        fn(0x80000000, 0, regs)
        if regs[0] < 0x80000004:
            return None
        raw = b""
        for leaf in (0x80000002, 0x80000003, 0x80000004):
            fn(leaf, 0, regs)
            raw += bytes(regs)
        del fn
        return raw.split(b"\0", 1)[0].decode("ascii", "replace").strip()
    finally:
        try:
            buf.close()
        except BufferError:
            pass


def model_names():
    """Every name a correct tool may report: the cpuid brand string and /proc/cpuinfo's model
    name (a hypervisor may make the two differ)."""
    names = {cpuid_brand(), cpuinfo()[1]}
    return {" ".join(n.split()) for n in names if n}


class Info(e2e.ToolTestCase):
    def test_human_output(self):
        result = self.tool("info")
        self.assertTrue(result.stdout.strip(), "info printed nothing")
        names = model_names()
        if names:
            self.assertTrue(any(n in " ".join(result.stdout.split()) for n in names),
                            f"none of {sorted(names)} in: {result.stdout}")

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
        names = model_names()
        if names:
            self.assertIn(" ".join(info["cpu"]["model"].split()), names)

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

    def test_limits_json(self):
        info = self.tool_json("info", "--limits", "--threads", "1", "--json")
        limits = info["limits"]
        for key in ("threads", "bf16_dot_gflops", "fp32_fma_gflops", "int8_vnni_gops", "read_gbs",
                    "read_buffer_mib", "seconds"):
            self.assertIn(key, limits)
        self.assertEqual(limits["threads"], 1)
        self.assertGreater(limits["read_gbs"], 0)
        self.assertLess(limits["seconds"], 10)
        features = info["features"]
        for key, isa in (("bf16_dot_gflops", "avx512_bf16"), ("int8_vnni_gops", "avx512_vnni"),
                         ("fp32_fma_gflops", "avx2")):
            if features[isa]:
                self.assertGreater(limits[key], 0, key)
            else:
                self.assertIsNone(limits[key], key)
        if features["avx512_bf16"]:
            self.assertGreater(limits["bf16_dot_gflops"], limits["fp32_fma_gflops"])
        self.assertNotIn("limits", self.tool_json("info", "--json"))

    def test_limits_human_output(self):
        result = self.tool("info", "--limits")
        for text in ("limits:", "bf16 dot peak", "fp32 FMA peak", "int8 VNNI peak", "read bandwidth", "GB/s"):
            self.assertIn(text, result.stdout)
        self.assert_error(self.run_tool("info", "--limits", "--threads", "0"), e2e.EXIT_USAGE, "--threads")
        self.assert_error(self.run_tool("info", "--threads", "2"), e2e.EXIT_USAGE, "--limits")

    def test_threads_follow_omp_num_threads(self):
        # ctest sets OMP_NUM_THREADS=2; libtorch's intra-op pool follows it.
        if os.environ.get("OMP_NUM_THREADS") != "2":
            self.skipTest("OMP_NUM_THREADS is not 2 in this environment")
        info = self.tool_json("info", "--json")
        self.assertEqual(info["threads"], 2)


if __name__ == "__main__":
    e2e.main()
