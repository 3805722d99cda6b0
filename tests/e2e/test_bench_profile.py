#!/usr/bin/python3
"""`ipex-tool bench --profile`: the per-op rows of a conv + linear model optimized to bf16 and
fp32 (left as it is, and quantized to int8), their FLOPs against the fixture's analytic count
(tests/fixtures/make_profile_fixtures.py), shares, the measured limits, and the errors;
--profile-layers' per-layer rows; bench's report of the caching CPU allocator."""

import json
import math
import os
import re
import subprocess

import torch

import e2e_common as e2e

PROFILE = os.path.join(e2e.FIXTURES, "profile")
with open(os.path.join(PROFILE, "profile_fixtures.json")) as f:
    FIXTURE = json.load(f)["conv_linear"]
MODEL = os.path.join(PROFILE, FIXTURE["file"])
INPUT = FIXTURE["input"]
FLOPS = FIXTURE["flops"]
ITERATIONS = ["--iterations", "3", "--warmup", "1"]
LIMIT_KEYS = ("threads", "bf16_dot_gflops", "fp32_fma_gflops", "int8_vnni_gops", "read_gbs")
ROW_KEYS = ("op", "kind", "dtype", "calls", "calls_per_iteration", "total_ms", "ms_per_iteration", "share",
            "flops_per_iteration", "gflops_per_s", "peak_gflops", "share_of_peak", "layer")


class BenchProfile(e2e.ToolTestCase):
    def optimized(self, dtype: str) -> str:
        out = self.path(f"conv_linear_{dtype}.pt")
        self.tool("optimize", MODEL, out, "--dtype", dtype, "--sample-input", INPUT)
        return out

    def profile(self, model: str, *args) -> dict:
        return self.tool_json("bench", model, "--profile", *ITERATIONS, *args, "--json", "-")

    def check_profile(self, data: dict, prefix: str, dtype: str):
        for key in LIMIT_KEYS:
            self.assertIn(key, data["limits"])
        self.assertEqual(data["limits"]["threads"], data["threads"])
        self.assertEqual(data["iterations"], 3)
        rows = data["rows"]
        for row in rows:
            self.assertEqual(sorted(row), sorted(ROW_KEYS), row["op"])
            self.assertGreaterEqual(row["total_ms"], 0)
        times = [r["total_ms"] for r in rows]
        self.assertEqual(times, sorted(times, reverse=True), "rows not sorted by time")
        self.assertAlmostEqual(sum(r["share"] for r in rows), 1.0, delta=0.01)
        totals = data["totals"]
        self.assertAlmostEqual(totals["compute_share"] + totals["outside_share"], 1.0, delta=1e-6)
        # Exact FLOPs per op kind: each row's count is per forward.
        conv_ops = (f"{prefix}::convolution", f"{prefix}::conv2d", f"{prefix}::convolution_chain")
        for kind, op_names in (("conv", conv_ops),
                               ("linear", (f"{prefix}::linear",))):
            kind_rows = [r for r in rows if r["kind"] == kind]
            self.assertTrue(kind_rows, f"no {kind} row in {[r['op'] for r in rows]}")
            self.assertTrue(all(r["op"] in op_names for r in kind_rows), [r["op"] for r in kind_rows])
            self.assertEqual(sum(r["flops_per_iteration"] for r in kind_rows), FLOPS[kind], kind)
            for r in kind_rows:
                self.assertEqual(r["dtype"], dtype)
                self.assertIsInstance(r["flops_per_iteration"], int)
                self.assertGreater(r["gflops_per_s"], 0)
                peak = data["limits"]["bf16_dot_gflops" if dtype == "bf16" else "fp32_fma_gflops"]
                if peak:
                    self.assertEqual(r["peak_gflops"], peak)
                    self.assertTrue(math.isclose(r["share_of_peak"], r["gflops_per_s"] / peak, rel_tol=1e-9))
        self.assertEqual(totals["compute_flops_per_iteration"], FLOPS["conv"] + FLOPS["linear"])
        for r in rows:
            if r["kind"] == "other":
                self.assertIsNone(r["flops_per_iteration"], r["op"])

    def test_optimized_bf16_and_fp32(self):
        for dtype in ("bf16", "fp32"):
            with self.subTest(dtype=dtype):
                if dtype == "bf16" and not e2e.ONEDNN_BF16:
                    self.skipTest(e2e.NO_ONEDNN_BF16)
                self.check_profile(self.profile(self.optimized(dtype)), "ipex", dtype)

    def test_unoptimized_model_counts_aten_ops(self):
        data = self.profile(MODEL, "--input", INPUT)
        self.check_profile(data, "aten", "fp32")

    def test_int8_ops_count_as_conv_and_linear(self):
        data = self.path("calib")
        os.makedirs(data)
        gen = torch.Generator().manual_seed(0)
        for i in range(2):
            torch.save(torch.randn([int(d) for d in INPUT.split("x")], generator=gen), os.path.join(data, f"{i}.pt"))
        qconfig, out = self.path("qconfig.json"), self.path("conv_linear_int8.pt")
        self.tool("calibrate", MODEL, "--data", data, "--out", qconfig)
        self.tool("quantize", MODEL, out, "--qconfig", qconfig)
        rows = self.profile(out, "--input", INPUT)["rows"]
        for kind in ("conv", "linear"):
            kind_rows = [r for r in rows if r["kind"] == kind]
            self.assertEqual([(r["op"], r["dtype"]) for r in kind_rows], [("ipex::int8_op", "int8")], kind)
            self.assertEqual(kind_rows[0]["flops_per_iteration"], FLOPS[kind], kind)

    def test_human_table_and_json_file(self):
        model = self.optimized("bf16" if e2e.ONEDNN_BF16 else "fp32")
        out = self.path("profile.json")
        result = self.tool("bench", model, "--profile", *ITERATIONS, "--json", out)
        self.assertIn("ipex::convolution", result.stderr)
        self.assertIn("outside conv/linear/matmul/attention", result.stderr)
        with open(out) as f:
            self.assertTrue(json.load(f)["rows"])
        text = self.tool("bench", model, "--profile", *ITERATIONS).stdout
        for word in ("GFLOP/s", "% peak", "ipex::linear", "(between ops)"):
            self.assertIn(word, text)

    def test_profile_layers_splits_rows_by_signature(self):
        for dtype in ("bf16", "fp32"):
            with self.subTest(dtype=dtype):
                if dtype == "bf16" and not e2e.ONEDNN_BF16:
                    self.skipTest(e2e.NO_ONEDNN_BF16)
                data = self.tool_json("bench", self.optimized(dtype), "--profile-layers", *ITERATIONS, "--json", "-")
                self.assertTrue(data["by_layer"])
                self.check_profile(data, "ipex", dtype)
                convs = {r["layer"]: r for r in data["rows"] if r["kind"] == "conv"}
                # conv1 3->16 k3 s2 p1 on 2x3x32x32, then conv2 16->32 k3 p2 d2 groups 2 on its 16x16
                # output: conv2 alone reads conv1's output, so the two are one chain, one row naming both.
                patterns = [r"2x3x32x32( \[cl\])? w 16x3x3x3 s2 p1 d1 g1 -> w 32x8x3x3 s1 p2 d2 g2"]
                self.assertEqual(len(convs), 1, list(convs))
                for pattern in patterns:
                    hits = [layer for layer in convs if re.fullmatch(pattern, layer)]
                    self.assertEqual(len(hits), 1, f"{pattern} in {list(convs)}")
                    self.assertEqual(convs[hits[0]]["calls_per_iteration"], 1)
                linears = [r["layer"] for r in data["rows"] if r["kind"] == "linear"]
                self.assertEqual(linears, ["2x512 w 10x512"])
                # Other ops carry their tensor sizes.
                others = [r for r in data["rows"] if r["kind"] == "other"]
                self.assertTrue(any(r["layer"] for r in others), others)
        text = self.tool("bench", self.optimized("fp32"), "--profile-layers", *ITERATIONS).stdout
        self.assertRegex(text, r"ipex::convolution_chain 2x3x32x32( \[cl\])? "
                               r"w 16x3x3x3 s2 p1 d1 g1 -> w 32x8x3x3 s1 p2 d2 g2")
        plain = self.profile(self.optimized("fp32"))
        self.assertFalse(plain["by_layer"])
        self.assertTrue(all(r["layer"] is None for r in plain["rows"]))

    def test_no_conv_chains_gives_a_row_per_convolution(self):
        out = self.path("conv_linear_unchained.pt")
        report = self.tool_json("optimize", MODEL, out, "--sample-input", INPUT, "--no-conv-chains", "--report", "-")
        entry = next(p for p in report["passes"] if p["name"] == "chain_convolutions")
        self.assertEqual(entry["status"], "disabled")
        self.assertEqual(report["op_histogram"]["after"].get("ipex::convolution"), 2)
        self.assertNotIn("ipex::convolution_chain", report["op_histogram"]["after"])
        data = self.tool_json("bench", out, "--profile-layers", *ITERATIONS, "--json", "-")
        self.check_profile(data, "ipex", "fp32")
        convs = sorted(r["layer"] for r in data["rows"] if r["kind"] == "conv")
        self.assertEqual(len(convs), 2, convs)
        self.assertRegex(convs[0], r"^2x16x16x16( \[cl\])? w 32x8x3x3 s1 p2 d2 g2$")
        self.assertRegex(convs[1], r"^2x3x32x32( \[cl\])? w 16x3x3x3 s2 p1 d1 g1$")
        # Asked for where the prepacked ops are off: a warning, the model written without them.
        result = self.tool("optimize", MODEL, self.path("portable.pt"), "--portable", "--conv-chains")
        self.assertIn("--conv-chains needs the prepacked ops", result.stderr)

    def run_with_cache(self, value):
        env = dict(os.environ)
        if value is None:
            env.pop("IPEX_CPU_CACHE_MB", None)
        else:
            env["IPEX_CPU_CACHE_MB"] = value
        # 8x64x64x64 fp32 activations: 8 MiB blocks, cached when the allocator is on.
        argv = [e2e.TOOL, "bench", MODEL, "--input", "8x3x128x128", *ITERATIONS, "--json", "-"]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=self.tmp,
                              stdin=subprocess.DEVNULL, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)["cpu_cache"]

    def test_bench_reports_the_cpu_cache(self):
        cache = self.run_with_cache(None)
        self.assertEqual(cache["limit_mb"], 1024)
        # Every call after the first finds its large blocks freed by the call before.
        self.assertGreater(cache["hits"], cache["misses"])
        self.assertGreater(cache["peak_cached_mb"], 0)
        self.assertLessEqual(cache["peak_cached_mb"], 1024)
        self.assertEqual(self.run_with_cache("64")["limit_mb"], 64)
        self.assertIsNone(self.run_with_cache("0"))

    def test_errors(self):
        bad = self.copy_fixture("random_bytes.pt")
        self.assert_error(self.run_tool("bench", bad, "--profile", "--input", INPUT), e2e.EXIT_BAD_INPUT, bad)
        self.assert_error(self.run_tool("bench", MODEL, "--profile", "--llm"), e2e.EXIT_USAGE, "--profile")
        self.assert_error(self.run_tool("bench", MODEL, "--profile", "--baseline", "stock", "--input", INPUT),
                          e2e.EXIT_USAGE, "--profile")
        self.assert_error(self.run_tool("bench", MODEL, "--profile-layers", "--baseline", "stock", "--input", INPUT),
                          e2e.EXIT_USAGE, "--profile-layers")


if __name__ == "__main__":
    e2e.main()
