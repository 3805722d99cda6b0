#!/usr/bin/python3
"""`ipex-tool bench`: JSON fields, latency statistics, --baseline stock|FILE and the ratio,
--json FILE, --duration, --threads, --check-isa."""

import json
import os

import e2e_common as e2e

LATENCY_KEYS = ("min", "mean", "median", "p90", "p99", "max")


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def expected_bf16_isa(flags):
    """The ISA oneDNN dispatches bf16 convolutions to on a CPU with these /proc/cpuinfo flags
    (read here, not from the tool): AMX where the CPU has AMX tiles with bf16, else the
    best AVX-512 level, else AVX2 (oneDNN emulates bf16 there)."""
    if {"amx_tile", "amx_bf16"} <= flags:
        return "avx512_core_amx"
    if "avx512_bf16" in flags:
        return "avx512_core_bf16"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512_core"
    return "avx2"  # oneDNN 2.6 has no bf16 convolution there: optimize keeps them aten


class Bench(e2e.ToolTestCase):
    def _bench(self, *args, expect=e2e.EXIT_OK) -> dict:
        result = self.tool("bench", *args, "--json", "-", expect=expect)
        try:
            return result.json()
        except ValueError as e:
            self.fail(f"bench --json - did not print JSON ({e})\n{result.describe()}")

    def _check_latency(self, latency: dict):
        for key in LATENCY_KEYS:
            self.assertIsInstance(latency[key], (int, float), key)
            self.assertGreater(latency[key], 0, key)
        self.assertLessEqual(latency["min"], latency["median"])
        self.assertLessEqual(latency["median"], latency["p90"])
        self.assertLessEqual(latency["p90"], latency["p99"])
        self.assertLessEqual(latency["p99"], latency["max"])
        self.assertLessEqual(latency["min"], latency["mean"])
        self.assertLessEqual(latency["mean"], latency["max"])

    def test_json_fields(self):
        model = self.copy_model("conv_bn_relu_2d")
        data = self._bench(model, "--input", "2x3x32x32", "--iterations", "20", "--warmup", "3")
        for key in ("model", "inputs", "threads", "iterations", "warmup", "batch", "latency_ms",
                    "throughput_per_s", "peak_rss_mb", "baseline", "ratio", "isa"):
            self.assertIn(key, data)
        self.assertTrue(data["model"].endswith("conv_bn_relu_2d.pt"))
        self.assertEqual(data["iterations"], 20)
        self.assertEqual(data["warmup"], 3)
        self.assertEqual(data["batch"], 2)
        self.assertIsInstance(data["threads"], int)
        self.assertGreaterEqual(data["threads"], 1)
        self._check_latency(data["latency_ms"])
        # Throughput comes from the batch dimension and the latency (mean or median).
        per_s = [2 * 1000.0 / data["latency_ms"][k] for k in ("mean", "median")]
        self.assertGreaterEqual(data["throughput_per_s"], min(per_s) * 0.5)
        self.assertLessEqual(data["throughput_per_s"], max(per_s) * 2.0)
        self.assertGreater(data["peak_rss_mb"], 1)
        self.assertLess(data["peak_rss_mb"], 64 * 1024)
        self.assertIsNone(data["baseline"])
        self.assertIsNone(data["ratio"])
        self.assertIsNone(data["isa"])
        self.assertIn("2x3x32x32", json.dumps(data["inputs"]))

    def test_human_output(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.tool("bench", model, "--input", "2x3x32x32", "--iterations", "5")
        self.assertIn("ms", result.stdout)

    def test_json_file(self):
        model = self.copy_model("linear_bn")
        path = self.path("bench.json")
        self.tool("bench", model, "--input", "4x16", "--iterations", "5", "--json", path)
        with open(path) as f:
            data = json.load(f)
        self.assertEqual(data["iterations"], 5)
        self.assertEqual(data["batch"], 4)

    def test_threads(self):
        model = self.copy_model("conv_bn_relu_2d")
        data = self._bench(model, "--input", "2x3x32x32", "--iterations", "3", "--threads", "1")
        self.assertEqual(data["threads"], 1)

    def test_duration(self):
        model = self.copy_model("linear_bn")
        data = self._bench(model, "--input", "4x16", "--duration", "0.5")
        self.assertGreaterEqual(data["iterations"], 1)
        total_ms = data["latency_ms"]["mean"] * data["iterations"]
        self.assertLess(total_ms, 10000, "bench ran far longer than --duration")

    def test_percentiles(self):
        model = self.copy_model("linear_bn")
        data = self._bench(model, "--input", "4x16", "--iterations", "10",
                           "--percentiles", "50,90,99")
        self._check_latency(data["latency_ms"])

    def test_baseline_stock(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("opt.pt")
        self.optimize(src, out)
        data = self._bench(out, "--input", "2x3x32x32", "--iterations", "10",
                           "--baseline", "stock")
        base = data["baseline"]
        self.assertIsInstance(base, dict)
        # "stock" plus the variant: fp32 frozen, or autocast-bf16 for a bf16 candidate.
        self.assertTrue(base["kind"].startswith("stock"), base["kind"])
        self.assertIn("model", base)
        self._check_latency(base["latency_ms"])
        self.assertIsInstance(data["ratio"], (int, float))
        self.assertGreater(data["ratio"], 0)
        expected = base["latency_ms"]["median"] / data["latency_ms"]["median"]
        self.assertAlmostEqual(data["ratio"], expected, delta=0.02 * expected)

    def test_baseline_stock_bf16(self):
        src = self.copy_model("resnet18")
        out = self.path("bf16.pt")
        self.optimize(src, out, "--dtype", "bf16")
        data = self._bench(out, "--input", "1x3x64x64", "--iterations", "5", "--warmup", "2",
                           "--baseline", "stock")
        self.assertTrue(data["baseline"]["kind"].startswith("stock"), data["baseline"]["kind"])
        self.assertIn("bf16", data["baseline"]["kind"], "a bf16 candidate runs against autocast-bf16")
        self.assertGreater(data["ratio"], 0)

    def test_baseline_file(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("opt.pt")
        self.optimize(src, out)
        data = self._bench(out, "--input", "2x3x32x32", "--iterations", "10", "--baseline", src)
        base = data["baseline"]
        self.assertEqual(base["kind"], "file")
        self.assertTrue(base["model"].endswith("conv_bn_relu_2d.pt"), base)
        self._check_latency(base["latency_ms"])
        self.assertGreater(data["ratio"], 0)

    def test_baseline_bad_file(self):
        model = self.copy_model("conv_bn_relu_2d")
        empty = self.copy_fixture("empty.pt")
        result = self.run_tool("bench", model, "--input", "2x3x32x32", "--iterations", "1",
                               "--baseline", empty)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "empty.pt")

    def test_multi_input_and_int_spec(self):
        for name in ("two_in_two_out", "tiny_transformer"):
            with self.subTest(model=name):
                model = self.copy_model(name)
                specs = []
                for spec in e2e.MODELS[name]["inputs"]:
                    specs += ["--input", spec]
                data = self._bench(model, *specs, "--iterations", "3")
                self.assertEqual(data["batch"], 2)

    def test_tuple_input_file(self):
        model = self.copy_model("two_in_two_out")
        data = self._bench(model, "--input", self.copy_input("two_in_two_out"),
                           "--iterations", "3")
        self.assertEqual(data["batch"], 2)

    def test_check_isa_amx_fails_without_amx(self):
        if {"amx_tile", "amx_bf16"} <= cpu_flags():
            self.skipTest("this CPU has AMX (/proc/cpuinfo): --check-isa amx is met here")
        model = self.copy_model("conv_bn_relu_2d")
        src = model
        out = self.path("bf16.pt")
        self.optimize(src, out, "--dtype", "bf16")
        result = self.run_tool("bench", out, "--input", "2x3x32x32", "--iterations", "2",
                               "--check-isa", "amx", "--json", "-")
        self.assertEqual(result.code, e2e.EXIT_CHECK_FAILED, result.describe())
        data = result.json()
        # The asked ISA may be reported under oneDNN's name (avx512_core_amx).
        self.assertIn("amx", data["isa"]["asked"])
        self.assertIs(data["isa"]["ok"], False)
        self.assertIsInstance(data["isa"]["compute_isas"], list)

    def test_check_isa_prepacked_bf16(self):
        """A prepacked bf16 model's convolutions run on the best ISA oneDNN dispatches here:
        the ISA /proc/cpuinfo's flags call for (expected_bf16_isa)."""
        expected = expected_bf16_isa(cpu_flags())
        out = self.path("bf16.pt")
        self.optimize(self.copy_model("conv_bn_relu_2d"), out, "--dtype", "bf16")
        if expected == "avx2":
            # No oneDNN bf16 convolution below AVX-512: the model's convolutions stayed aten, so
            # no oneDNN convolution ran and the check fails, saying so.
            result = self.tool("bench", out, "--input", "2x3x32x32", "--iterations", "2", "--check-isa", expected,
                               "--json", "-", expect=1)
            self.assertIs(result.json()["isa"]["ok"], False)
            self.assertEqual(result.json()["isa"]["compute_isas"], [])
            self.assertIn("did not run on avx2", result.stderr)
            return
        data = self._bench(out, "--input", "2x3x32x32", "--iterations", "2", "--check-isa", expected)
        self.assertIs(data["isa"]["ok"], True, data["isa"])
        self.assertTrue(any(i.startswith(expected) for i in data["isa"]["compute_isas"]), data["isa"])

    def test_check_isa_avx512(self):
        if "avx512f" not in cpu_flags():
            self.skipTest("no AVX-512 on this machine")
        model = self.copy_model("conv_bn_relu_2d")
        for isa in ("avx512_core", "avx512"):
            with self.subTest(isa=isa):
                data = self._bench(model, "--input", "2x3x32x32", "--iterations", "2",
                                   "--check-isa", isa)
                self.assertIn(isa, data["isa"]["asked"])
                self.assertIs(data["isa"]["ok"], True, data["isa"])
                self.assertTrue(data["isa"]["compute_isas"], data["isa"])
                self.assertTrue(any("avx512" in i for i in data["isa"]["compute_isas"]),
                                data["isa"])

    def test_nothing_written_without_json_file(self):
        model = self.copy_model("linear_bn")
        self.tool("bench", model, "--input", "4x16", "--iterations", "2")
        self.assert_no_stray_files(self.tmp, [os.path.basename(model)])


if __name__ == "__main__":
    e2e.main()
