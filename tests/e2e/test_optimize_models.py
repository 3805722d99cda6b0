#!/usr/bin/python3
"""`ipex-tool optimize` (fp32, default level) on every fixture model, in the default prepacked
mode and with --portable: op counts before and after from `inspect --json`, numerical match in
PyTorch (check_in_python.py; prepacked models load libipex_ops.so there, portable ones nothing)
and with `ipex-tool verify`, the input untouched, only OUT (and the report) written."""

import os

import e2e_common as e2e


class OptimizeFp32(e2e.ToolTestCase):
    portable = False

    def _model(self, name: str):
        entry = e2e.MODELS[name]
        expect = entry["expect"]
        src = self.copy_model(name)
        inputs = self.copy_input(name)
        digest = e2e.sha256(src)
        out = self.path(f"{name}.opt.pt")

        before = self.inspect(src)
        flags = ["--portable"] if self.portable else []
        if entry["needs_shapes"]:
            for spec in entry["inputs"]:
                flags += ["--sample-input", spec]
        result, report = self.optimize(src, out, *flags)
        self.assertEqual(e2e.sha256(src), digest, "IN was modified")
        self.assert_no_stray_files(self.tmp, [os.path.basename(p) for p in
                                              (src, inputs, out, out + ".report.json")])

        if entry["training"]:
            warnings = " ".join(result.warnings()).lower()
            self.assertIn("training", warnings, result.describe())
            self.assertIn("eval", warnings, result.describe())
            self.assertTrue(any("training" in w.lower() for w in report["warnings"]),
                            report["warnings"])

        after = self.inspect(out)
        bn_before = e2e.count_ops(before["op_histogram"], e2e.BATCH_NORM_OPS)
        bn_after = e2e.count_ops(after["op_histogram"], e2e.BATCH_NORM_OPS)
        self.assertEqual(bn_after, expect["batch_norm_after"],
                         f"batch_norm left: before {bn_before}, after {after['op_histogram']}")
        self.assertEqual(e2e.count_ops(after["op_histogram"], e2e.DROPOUT_OPS), 0,
                         f"dropout left: {after['op_histogram']}")
        if expect["dropout_before"]:
            self.assertGreater(e2e.count_ops(before["op_histogram"], e2e.DROPOUT_OPS), 0)
        self.assertIs(after["training"], False)
        self.assertIs(after["frozen"], True)
        prepacked = self.pass_entry(report, "weights_prepack")["count"]
        conv_linear_before = e2e.count_aten(before["op_histogram"], e2e.CONV_LINEAR_OPS)
        conv_linear_after = e2e.count_aten(after["op_histogram"], e2e.CONV_LINEAR_OPS)
        if self.portable:
            self.assertEqual(report["mode"], "portable")
            self.assertEqual(self.pass_entry(report, "weights_prepack")["status"], "disabled")
            self.assertEqual(prepacked, 0)
        else:
            # Every conv/linear with a constant weight became an ipex op.
            self.assertEqual(report["mode"], "prepacked")
            self.assertEqual(conv_linear_after, expect["linear_computed_weight"], after["op_histogram"])
            self.assertEqual(prepacked > 0, conv_linear_before > 0, self.pass_entry(report, "weights_prepack"))
        self.assertEqual(e2e.count_ipex(after["op_histogram"]) > 0, prepacked > 0, after["op_histogram"])
        self.assertIs(after["needs_ops_library"], prepacked > 0)
        self.assertEqual(after["runs_on"], "ipex_ops" if prepacked else "stock")
        self.assertIsInstance(after["ipex"], dict, "optimized model carries no ipex metadata")
        self.assertEqual(after["ipex"].get("dtype"), "fp32", after["ipex"])

        # The report agrees with inspect on what is left.
        report_after = report["op_histogram"]["after"]
        self.assertEqual(e2e.count_ops(report_after, e2e.BATCH_NORM_OPS), bn_after)
        self.assertEqual(e2e.count_ops(report_after, e2e.DROPOUT_OPS), 0)
        folded = (self.pass_entry(report, "fold_conv_bn")["count"]
                  + self.pass_entry(report, "fold_linear_bn")["count"])
        self.assertEqual(folded, expect["batch_norm_modules"] - expect["batch_norm_after"],
                         "folds reported")

        self.check_in_python(src, out, inputs, "fp32", e2e.OPS_LIBRARY if prepacked else None)
        if entry["training"]:
            return  # verify of a training-mode original: see test_verify_training_mode
        verify = self.tool_json("verify", src, out, "--input", inputs, "--json")
        self.assertIs(verify["ok"], True, verify)
        self.assertEqual(len(verify["outputs"]), self._output_count(name), verify)

    def test_check_in_python_script(self):
        """check_in_python.py as users run it: exit 0 on a match, 1 on a mismatch."""
        src = self.copy_model("conv_bn_relu_2d")
        other = self.copy_model("conv_bn_traced_2d")
        inputs = self.copy_input("conv_bn_relu_2d")
        out = self.path("opt.pt")
        self.optimize(src, out)
        proc = self.run_check_in_python(src, out, inputs, ops_library=e2e.OPS_LIBRARY)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("match", proc.stdout)
        proc = self.run_check_in_python(src, other, inputs)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("MISMATCH", proc.stdout)

    def test_verify_training_mode(self):
        """verify compares inference behaviour: a model saved in training mode is run in eval
        mode (as optimize does), so it matches its optimized version."""
        src = self.copy_model("training_mode")
        inputs = self.copy_input("training_mode")
        out = self.path("training_mode.opt.pt")
        self.optimize(src, out)
        verify = self.tool_json("verify", src, out, "--input", inputs, "--json")
        self.assertIs(verify["ok"], True, verify)

    @staticmethod
    def _output_count(name: str) -> int:
        return {"tensor": 1, "tuple": 2, "dict": 2, "list": 3}[e2e.MODELS[name]["outputs"]]


class OptimizeFp32Portable(OptimizeFp32):
    """The per-model checks with --portable (the other tests above run once)."""
    portable = True
    test_check_in_python_script = test_verify_training_mode = None

    def test_portable_runs_without_the_library(self):
        """A portable model runs in a fresh PyTorch process with nothing loaded; the default
        (prepacked) model does not, and does with libipex_ops.so."""
        src = self.copy_model("resnet18")
        inputs = self.copy_input("resnet18")
        portable, prepacked = self.path("portable.pt"), self.path("prepacked.pt")
        self.optimize(src, portable, "--portable")
        self.optimize(src, prepacked)
        proc = self.run_check_in_python(src, portable, inputs)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        proc = self.run_check_in_python(src, prepacked, inputs)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("ipex", proc.stderr)
        proc = self.run_check_in_python(src, prepacked, inputs, ops_library=e2e.OPS_LIBRARY)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


e2e.add_per_model_tests(OptimizeFp32, sorted(e2e.MODELS), "_model")
e2e.add_per_model_tests(OptimizeFp32Portable, sorted(e2e.MODELS), "_model")


if __name__ == "__main__":
    e2e.main()
