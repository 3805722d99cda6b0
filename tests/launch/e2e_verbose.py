"""--onednn-verbose and --require-isa: a live bf16 matmul on this machine, and recorded
verbose logs replayed by `cat` through the whole binary (for AMX, absent here)."""
import os
import unittest

from launch_e2e import LaunchTest, run, online_cpus, prefixed_lines, cpu_flags, MATMUL, DATA

FLAGS = cpu_flags()
HAS_AMX = "amx_bf16" in FLAGS
HAS_BF16 = "avx512_bf16" in FLAGS or HAS_AMX


class Canned(LaunchTest):
    def replay(self, log, *args):
        return run("--ninstances", "1", *args, "--", "/bin/cat", os.path.join(DATA, log))

    def test_amx_is_detected_in_a_oneDNN2_log(self):
        r = self.replay("onednn2_amx.log", "--onednn-verbose", "--require-isa", "amx")
        self.assertExit(r, 0)
        self.assertIn("oneDNN, instance 0: AMX: yes; oneDNN v2.7.3", r.err)
        self.assertIn("brgconv:avx512_core_amx", r.err)
        self.assertIn("--require-isa avx512_core_amx: 91.5% of convolution/matmul time (needs 90.0%): ok", r.err)
        # Program output stays on the console; verbose lines only in the table.
        self.assertEqual(prefixed_lines(r.out, 0), ["model loaded", "top-1: 281"])

    def test_threshold_on_a_oneDNN3_log(self):
        r = self.replay("onednn3_amx.log", "--require-isa", "amx")  # implies --onednn-verbose
        self.assertExit(r, 1)
        self.assertIn("ipex-launch: error: --require-isa avx512_core_amx not met", r.err)
        self.assertIn("instance 0 ran 85.0% on it (avx512_core_amx, gemm:jit)", r.err)
        r = self.replay("onednn3_amx.log", "--require-isa", "amx", "--require-isa-share", "0.8")
        self.assertExit(r, 0)

    def test_v1_log_json_report(self):
        r = self.replay("onednn3_v1.log", "--onednn-verbose", "--json")
        self.assertExit(r, 0)
        onednn = r.json()["instances"][0]["onednn"]
        self.assertTrue(onednn["amx"])
        self.assertEqual(onednn["exec_lines"], 4)
        self.assertEqual(onednn["version"], "v3.5.3")
        kinds = {(p["kind"], p["impl"]): p["count"] for p in onednn["primitives"]}
        self.assertEqual(kinds[("convolution", "brg_conv_fwd:avx512_core_amx")], 2)

    def test_no_compute_fails_the_requirement(self):
        r = run("--require-isa", "avx512_core", "--", "/bin/echo", "no onednn here")
        self.assertExit(r, 1)
        self.assertIn("ran no oneDNN convolution/matmul", r.err)
        self.assertIn("no oneDNN primitive ran", r.err)


@unittest.skipUnless(MATMUL and os.path.exists(MATMUL), "bf16 matmul helper not built")
class Live(LaunchTest):
    def launch(self, *args):
        n = str(min(2, len(online_cpus())))
        return run("--ninstances", n, "--log-dir", self.tmp, "--onednn-verbose", *args, "--", MATMUL)

    def test_verbose_table_per_instance(self):
        r = self.launch()
        self.assertExit(r, 0)
        n = min(2, len(online_cpus()))
        for i in range(n):
            self.assertIn(f"oneDNN, instance {i}: AMX: {'yes' if HAS_AMX else 'no'}", r.err)
            self.assertEqual(len(prefixed_lines(r.out, i)), 1)  # only the program's own line
            # bf16 where the CPU has AVX-512 (oneDNN has no bf16 matmul below), else f32.
            marker = "bf16 matmul done" if HAS_BF16 or "avx512f" in FLAGS else "matmul done"
            self.assertIn(marker, prefixed_lines(r.out, i)[0])
        # The logs keep the verbose lines and the program's output, intact.
        for name in os.listdir(self.tmp):
            if name.endswith(".log"):
                text = open(os.path.join(self.tmp, name)).read()
                self.assertIn("onednn_verbose,", text)
                self.assertIn(",exec,cpu,matmul,", text)
                self.assertIn("matmul done", text)

    @unittest.skipUnless(HAS_BF16, "CPU without avx512_bf16")
    def test_bf16_requirement_is_met(self):
        r = self.launch("--require-isa", "avx512_core_bf16")
        self.assertExit(r, 0)
        self.assertIn("100.0% of convolution/matmul time", r.err)

    def test_amx_requirement_matches_the_hardware(self):
        r = self.launch("--require-isa", "amx")
        if HAS_AMX:
            self.assertExit(r, 0)
        else:
            self.assertExit(r, 1)
            self.assertIn("--require-isa avx512_core_amx not met", r.err)
            self.assertIn("AMX: no", r.err)


if __name__ == "__main__":
    unittest.main()
