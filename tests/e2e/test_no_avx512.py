#!/usr/bin/python3
"""ipex-tool on a CPU without AVX-512: the real binary runs under qemu-user emulating a
Haswell (AVX2, no AVX-512), so an AVX-512 instruction anywhere on the paths below is a
SIGILL. optimize (fp32 and bf16), verify, calibrate + quantize and weight-only models run
there, and their outputs meet the same tolerances as on this machine; the weight-only
kernels' portable path agrees with the AVX-512 one. The unit tests of
the own kernels with AVX2 builds (depthwise, grouped, interleave, pooling, norm) and of the int8
glue ops (quantize, dequantize, lookups, max pooling, cat-norm, gates) run there too, so those
builds and portable loops are checked whichever CPU the suite runs on. On a CPU without AVX-512
every case skips: the native suite already runs there without it."""

import os
import shutil
import subprocess
import sys

import e2e_common as e2e
from woq_files import WOQ_FIXTURES, woq_manifest

QEMU = shutil.which("qemu-x86_64")
EMULATED_CPU = "Haswell"
DECODER = woq_manifest()["decoder"]


class NoAvx512(e2e.ToolTestCase):
    host_has_avx512 = None  # read once per process from `info --json`

    def setUp(self):
        super().setUp()
        if not QEMU:
            self.skipTest("qemu-x86_64 (Debian package qemu-user) is not installed")
        if NoAvx512.host_has_avx512 is None:
            NoAvx512.host_has_avx512 = bool(self.tool_json("info", "--json")["features"].get("avx512f"))
        if not NoAvx512.host_has_avx512:
            self.skipTest("this CPU has no AVX-512: the whole suite already runs natively on the paths checked here")

    def emulated(self, *args, expect=e2e.EXIT_OK) -> e2e.Result:
        """ipex-tool ARGS on the emulated CPU: never a signal, the expected exit code."""
        cmd = [QEMU, "-cpu", EMULATED_CPU, e2e.TOOL, *args]
        proc = subprocess.run(cmd, cwd=self.tmp, capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
        # qemu warns about host CPU features its emulator leaves out (tsx, x2apic...).
        proc.stderr = "\n".join(l for l in proc.stderr.splitlines() if not l.startswith("qemu-x86_64: warning"))
        result = e2e.Result(cmd, proc)
        self.assertGreaterEqual(proc.returncode, 0, f"killed by signal {-proc.returncode}\n{result.describe()}")
        self.assertEqual(proc.returncode, expect, result.describe())
        return result

    def cosine(self, result: e2e.Result) -> float:
        return min(o["cosine"] for o in result.json()["outputs"])

    def emulated_unit_tests(self, folder: str, names: tuple):
        """The unit test binaries tests/unit/FOLDER/NAME on the emulated CPU: all pass."""
        unit = os.path.join(os.environ.get("IPEX_BUILD_DIR", ""), "tests", "unit", folder)
        for name in names:
            binary = os.path.join(unit, name)
            if not os.path.exists(binary):
                self.skipTest(f"{binary} is not built (IPEX_BUILD_TESTS=ON builds it)")
            with self.subTest(binary=name):
                proc = subprocess.run([QEMU, "-cpu", EMULATED_CPU, binary], capture_output=True, text=True,
                                      timeout=e2e.RUN_TIMEOUT, env={**os.environ, "OMP_NUM_THREADS": "2"})
                self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr[-2000:])
                self.assertIn("[  PASSED  ]", proc.stdout)

    def test_own_kernels_avx2_builds(self):
        # Their native run takes the AVX-512 builds here; under the emulated CPU the AVX2 ones.
        # (Only these binaries: oneDNN's own AVX2 JIT tanh/GELU comes out wrong under qemu.)
        names = ("own_kernels", "grouped_kernel", "shuffle_op", "pool_op", "norm_op", "conv_chain", "conv_trim")
        self.emulated_unit_tests("ops", tuple(f"ops_{n}_test" for n in names))

    def test_int8_glue_ops_portable_loops(self):
        # quantize, dequantize, the lookups, int8 max pooling, the cat-norm op and the gates
        # against their naive references with the loops a CPU without AVX-512 runs.
        names = ("quantize_op", "int8_map", "int8_pool", "int8_gate")
        self.emulated_unit_tests("quant", tuple(f"quant_{n}_test" for n in names))

    def test_the_emulated_cpu_has_no_avx512(self):
        info = self.emulated("info", "--json").json()
        self.assertTrue(info["features"]["avx2"])
        for name in ("avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile"):
            self.assertFalse(info["features"][name], name)
        self.assertNotIn("avx512", info["onednn"]["isa"])

    def test_limits_measure_only_what_the_cpu_has(self):
        limits = self.emulated("info", "--limits", "--threads", "1", "--json").json()["limits"]
        self.assertIsNone(limits["bf16_dot_gflops"])
        self.assertIsNone(limits["int8_vnni_gops"])
        self.assertGreater(limits["fp32_fma_gflops"], 0)  # AVX2 FMA on ymm
        self.assertGreater(limits["read_gbs"], 0)

    def test_bench_profile(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("conv_bf16.pt")
        self.emulated("optimize", src, out, "--dtype", "bf16", "--sample-input", "2x3x32x32")
        data = self.emulated("bench", out, "--profile", "--iterations", "1", "--warmup", "0", "--json", "-").json()
        convs = [r for r in data["rows"] if r["kind"] == "conv"]
        self.assertTrue(convs, data["rows"])
        for row in convs:
            self.assertGreater(row["flops_per_iteration"], 0)
            self.assertIsNone(row["share_of_peak"])  # no bf16 dot-product peak without AVX512-BF16

    def test_optimize_and_verify(self):
        # Each emulated run costs seconds: both dtypes on the convolution, one each on the others.
        bounds = {"fp32": "0.99999", "bf16": "0.999"}
        for model, spec, dtypes in (("conv_bn_relu_2d", "2x3x32x32", ("fp32", "bf16")), ("linear_bn", None, ("bf16",)),
                                    ("two_in_two_out", None, ("fp32",))):
            src = self.copy_model(model)
            inputs = ["--input", spec] if spec else ["--input", self.copy_input(model)]
            for dtype in dtypes:
                bound = bounds[dtype]
                with self.subTest(model=model, dtype=dtype):
                    out = self.path(f"{model}_{dtype}.pt")
                    optimized = self.emulated("optimize", src, out, "--dtype", dtype)
                    # bf16 layers oneDNN cannot take here run on reference code: optimize says so.
                    slow = [w for w in optimized.warnings() if "--dtype bf16: oneDNN has no bf16" in w]
                    self.assertEqual(len(slow), 1 if dtype == "bf16" else 0, optimized.describe())
                    result = self.emulated("verify", src, out, *inputs, "--min-cosine", bound, "--json")
                    self.assertGreaterEqual(self.cosine(result), float(bound))

    def test_calibrate_quantize_verify(self):
        src = self.copy_model("conv_bn_relu_2d")
        calib = self.path("calib")
        os.mkdir(calib)
        subprocess.run([e2e.PYTHON, "-c", "import sys, torch\ntorch.manual_seed(0)\n"
                        "for i in range(2): torch.save(torch.randn(2, 3, 32, 32), f'{sys.argv[1]}/b{i}.pt')", calib],
                       check=True)
        qconfig, emulated_q, native_q = self.path("q.json"), self.path("int8_emulated.pt"), self.path("int8.pt")
        self.emulated("calibrate", src, "--data", calib, "--out", qconfig)
        self.emulated("quantize", src, emulated_q, "--qconfig", qconfig)
        self.tool("quantize", src, native_q, "--qconfig", qconfig)
        data = os.path.join(calib, "b1.pt")
        for model in (emulated_q, native_q):
            with self.subTest(model=os.path.basename(model)):
                emulated = self.cosine(self.emulated("verify", src, model, "--input", data, "--json"))
                native = self.cosine(self.tool("verify", src, model, "--input", data, "--json"))
                self.assertGreaterEqual(emulated, 0.99)
                # oneDNN's AVX2 and VNNI int8 kernels round alike: the same agreement with fp32.
                self.assertAlmostEqual(emulated, native, delta=1e-3)

    def test_weight_only_models(self):
        def copy(rel):
            src, dst = os.path.join(WOQ_FIXTURES, rel), self.path(os.path.basename(rel))
            (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, dst)
            return dst
        fp, ref, ids, ckpt = (copy(DECODER[k]) for k in ("fp", "reference", "input", "checkpoint"))
        native = self.path("decoder_native.pt")
        self.tool("optimize", fp, native, "--low-precision-checkpoint", ckpt)
        # Decode-sized (the ids) and prefill-sized inputs (2 x 40 tokens: the large-batch path).
        vocab_spec = "2x40:int64:128"
        # bf16 on both sizes; int8 and fp32 (other kernels, the same dispatch) on one each.
        for mode, specs in (("bf16", (ids, vocab_spec)), ("int8", (vocab_spec,)), ("fp32", (ids,))):
            with self.subTest(lowp_mode=mode):
                out = self.path(f"decoder_{mode}.pt")
                self.emulated("optimize", fp, out, "--low-precision-checkpoint", ckpt, "--lowp-mode", mode)
                for spec in specs:
                    result = self.emulated("verify", out, ref, "--input", spec, "--min-cosine", "0.999", "--json")
                    self.assertGreaterEqual(self.cosine(result), 0.999)
        # The model written on this machine runs there too, on the portable kernels, and agrees
        # with its AVX-512 run.
        for spec in (ids, vocab_spec):
            emulated = self.emulated("verify", native, ref, "--input", spec, "--json").json()["outputs"][0]
            here = self.tool_json("verify", native, ref, "--input", spec, "--json")["outputs"][0]
            self.assertGreaterEqual(emulated["cosine"], 0.999)
            self.assertAlmostEqual(emulated["cosine"], here["cosine"], delta=5e-4)


if __name__ == "__main__":
    e2e.main()
