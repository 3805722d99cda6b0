#!/usr/bin/python3
"""Argument handling shared by every subcommand: usage errors (exit 2), malformed SPECs,
unknown subcommands and flags, bad flag values."""

import os

import e2e_common as e2e

MALFORMED_SPECS = (
    "2x",            # trailing separator
    "2xx3",          # empty dimension
    "0x3x32x32",     # zero dimension
    "2x3x32x32:bf17",   # unknown dtype
    "2x3x32x32:fp32:10",  # upper bound on a float dtype
    "2x16:int64:0",  # empty integer range
    "2x16:int64:-5",  # negative bound
    "2x3x32x32:",    # empty dtype
)


class Cli(e2e.ToolTestCase):
    def test_help(self):
        result = self.tool("--help")
        for sub in ("info", "inspect", "optimize", "verify", "bench"):
            self.assertIn(sub, result.stdout)

    def test_subcommand_help(self):
        result = self.tool("optimize", "--help")
        for flag in ("--dtype", "--level", "--report", "--sample-input", "--conv-bn-folding"):
            self.assertIn(flag, result.stdout)

    def test_no_subcommand_is_usage_error(self):
        result = self.run_tool()
        self.assertEqual(result.code, e2e.EXIT_USAGE, result.describe())

    def test_unknown_subcommand_suggests(self):
        result = self.run_tool("optimise", "a.pt", "b.pt")
        self.assert_error(result, e2e.EXIT_USAGE, "optimise", "did you mean", "optimize")

    def test_unknown_subcommand_suggests_inspect(self):
        result = self.run_tool("inspcet", "a.pt")
        self.assert_error(result, e2e.EXIT_USAGE, "did you mean", "inspect")

    def test_unknown_flag(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.run_tool("optimize", model, self.path("out.pt"), "--frobnicate")
        self.assert_error(result, e2e.EXIT_USAGE, "--frobnicate")
        self.assertFalse(os.path.exists(self.path("out.pt")))

    def test_unknown_dtype(self):
        model = self.copy_model("conv_bn_relu_2d")
        before = e2e.sha256(model)
        result = self.run_tool("optimize", model, self.path("out.pt"), "--dtype", "fp8")
        self.assert_error(result, e2e.EXIT_USAGE, "--dtype", "fp8")
        self.assertFalse(os.path.exists(self.path("out.pt")))
        self.assertEqual(e2e.sha256(model), before)
        self.assert_no_stray_files(self.tmp, ["conv_bn_relu_2d.pt"])

    def test_unknown_level(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.run_tool("optimize", model, self.path("out.pt"), "--level", "O3")
        self.assert_error(result, e2e.EXIT_USAGE, "--level", "O3")
        self.assertFalse(os.path.exists(self.path("out.pt")))

    def test_missing_positional(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.run_tool("optimize", model)
        self.assertEqual(result.code, e2e.EXIT_USAGE, result.describe())
        self.assertEqual(len(result.errors()), 1, result.describe())

    def test_malformed_spec_verify(self):
        model = self.copy_model("conv_bn_relu_2d")
        for spec in MALFORMED_SPECS:
            with self.subTest(spec=spec):
                result = self.run_tool("verify", model, model, "--input", spec)
                self.assert_error(result, e2e.EXIT_USAGE, spec)

    def test_malformed_spec_bench(self):
        model = self.copy_model("conv_bn_relu_2d")
        for spec in ("2xx3", "2x3x32x32:bf17", "0x3x32x32"):
            with self.subTest(spec=spec):
                result = self.run_tool("bench", model, "--input", spec, "--iterations", "1")
                self.assert_error(result, e2e.EXIT_USAGE, spec)

    def test_malformed_spec_optimize(self):
        model = self.copy_model("conv_bn_relu_2d")
        out = self.path("out.pt")
        for spec in ("2xx3", "2x3x32x32:bf17"):
            with self.subTest(spec=spec):
                result = self.run_tool("optimize", model, out, "--sample-input", spec)
                self.assert_error(result, e2e.EXIT_USAGE, spec)
                self.assertFalse(os.path.exists(out))

    def test_bad_numeric_flag_values(self):
        model = self.copy_model("conv_bn_relu_2d")
        cases = (
            ("bench", model, "--input", "2x3x32x32", "--iterations", "abc"),
            ("bench", model, "--input", "2x3x32x32", "--iterations", "0"),
            ("bench", model, "--input", "2x3x32x32", "--threads", "-1"),
            ("bench", model, "--input", "2x3x32x32", "--percentiles", "50,abc"),
            ("verify", model, model, "--input", "2x3x32x32", "--min-cosine", "abc"),
            ("verify", model, model, "--input", "2x3x32x32", "--atol", "-1"),
        )
        for args in cases:
            with self.subTest(args=" ".join(args[2:])):
                result = self.run_tool(*args)
                self.assert_error(result, e2e.EXIT_USAGE)

    def test_check_isa_unknown_name(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.run_tool("bench", model, "--input", "2x3x32x32", "--iterations", "1",
                               "--check-isa", "avx9000")
        self.assert_error(result, e2e.EXIT_USAGE, "avx9000")


if __name__ == "__main__":
    e2e.main()
