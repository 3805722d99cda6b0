#!/usr/bin/python3
"""`ipex-tool optimize` options: the report JSON, --level, each --[no-]KNOB, --sample-input,
--report -, --quiet, overwriting OUT."""

import json
import os

import e2e_common as e2e


class OptimizeOptions(e2e.ToolTestCase):
    def _run(self, model: str, *flags, out_name: str = "out.pt"):
        src = self.path(e2e.MODELS[model]["file"])
        if not os.path.exists(src):
            self.copy_model(model)
        out = self.path(out_name)
        result, report = self.optimize(src, out, *flags)
        return src, out, result, report

    def _ops(self, path: str, names) -> int:
        """aten ops by base name; prepacked linears count as linear (whatever they fused)."""
        histogram = self.inspect(path)["op_histogram"]
        total = e2e.count_ops(histogram, names)
        if "linear" in names:
            total += histogram.get("ipex::linear_binary", 0)
        return total

    # -- report

    def test_report_fields(self):
        src, out, _, report = self._run("conv_bn_relu_2d")
        for key in ("input", "output", "dtype", "level", "passes", "op_histogram", "bytes",
                    "elapsed_ms", "warnings"):
            self.assertIn(key, report)
        self.assertTrue(report["input"].endswith("conv_bn_relu_2d.pt"), report["input"])
        self.assertTrue(report["output"].endswith("out.pt"), report["output"])
        self.assertEqual(report["dtype"], "fp32")
        self.assertEqual(report["level"], "O1")
        names = [p["name"] for p in report["passes"]]
        for name in e2e.PASS_NAMES:
            self.assertIn(name, names)
        for entry in report["passes"]:
            with self.subTest(pass_name=entry["name"]):
                self.assertIn(entry["status"], e2e.PASS_STATUSES)
                self.assertIsInstance(entry["changed"], bool)
                self.assertIsInstance(entry["count"], int)
                self.assertIsInstance(entry["modules"], list)
                self.assertIsInstance(entry["skipped"], list)
                if entry["status"] != "applied":
                    self.assertIs(entry["changed"], False)
        fold = self.pass_entry(report, "fold_conv_bn")
        self.assertEqual(fold["status"], "applied")
        self.assertIs(fold["changed"], True)
        self.assertEqual(fold["count"], 3)
        self.assertTrue(fold["modules"], "folded module names missing")
        for module in fold["modules"]:
            self.assertIsInstance(module, str)
        self.assertIsInstance(report["op_histogram"]["before"], dict)
        self.assertIsInstance(report["op_histogram"]["after"], dict)
        self.assertGreater(e2e.count_ops(report["op_histogram"]["before"], e2e.BATCH_NORM_OPS), 0)
        self.assertEqual(e2e.count_ops(report["op_histogram"]["after"], e2e.BATCH_NORM_OPS), 0)
        self.assertIsInstance(report["bytes"]["before"], int)
        self.assertIsInstance(report["bytes"]["after"], int)
        self.assertGreater(report["bytes"]["before"], 0)
        self.assertGreater(report["bytes"]["after"], 0)
        self.assertIsInstance(report["elapsed_ms"], (int, float))
        self.assertGreaterEqual(report["elapsed_ms"], 0)
        self.assertIsInstance(report["warnings"], list)
        for warning in report["warnings"]:
            self.assertIsInstance(warning, str)

    def test_report_module_names(self):
        _, _, _, report = self._run("control_flow")
        modules = " ".join(self.pass_entry(report, "fold_conv_bn")["modules"])
        self.assertIn("stem", modules, "folded modules should be named after the user's modules")

    def test_report_to_stdout(self):
        src = self.copy_model("conv_bn_relu_2d")
        result = self.tool("optimize", src, self.path("out.pt"), "--report", "-")
        report = json.loads(result.stdout)
        self.assertEqual(report["dtype"], "fp32")
        self.assertTrue(os.path.isfile(self.path("out.pt")))

    def test_quiet(self):
        src = self.copy_model("conv_bn_relu_2d")
        result = self.tool("optimize", src, self.path("out.pt"), "--quiet")
        self.assertEqual(result.stdout, "")
        # Warnings may still be printed; nothing else.
        self.assertEqual(result.lines("stderr"), result.warnings(), result.describe())

    def test_bn_two_users_skip_reported(self):
        src, out, _, report = self._run("bn_two_users")
        fold = self.pass_entry(report, "fold_conv_bn")
        self.assertEqual(fold["count"], 0, fold)
        self.assertTrue(fold["skipped"], "the BN that could not be folded is not reported")
        self.assertEqual(self._ops(out, e2e.BATCH_NORM_OPS), 1)
        self.check_in_python(src, out, self.copy_input("bn_two_users"))

    # -- levels and knobs

    def test_level_o0_unchanged(self):
        src, out, _, report = self._run("conv_bn_relu_2d", "--level", "O0")
        self.assertEqual(report["level"], "O0")
        before, after = self.inspect(src), self.inspect(out)
        self.assertEqual(after["op_histogram"], before["op_histogram"])
        self.assertEqual(after["parameters"], before["parameters"])
        self.assertIs(after["frozen"], before["frozen"])
        for name in ("remove_dropout", "fold_conv_bn", "fold_linear_bn", "concat_linear",
                     "to_channels_last", "cast_to_lowp"):
            entry = self.pass_entry(report, name)
            self.assertIs(entry["changed"], False, entry)
        self.assertEqual(self.pass_entry(report, "fold_conv_bn")["status"], "disabled")
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_level_o0_dropout_kept(self):
        src, out, _, _ = self._run("dropout_all", "--level", "O0")
        self.assertEqual(self._ops(out, e2e.DROPOUT_OPS), self._ops(src, e2e.DROPOUT_OPS))

    def test_level_o0_knob_overrides(self):
        src, out, _, report = self._run("conv_bn_relu_2d", "--level", "O0", "--conv-bn-folding")
        self.assertEqual(self.pass_entry(report, "fold_conv_bn")["status"], "applied")
        self.assertEqual(self._ops(out, e2e.BATCH_NORM_OPS), 0)
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_no_conv_bn_folding(self):
        src, out, _, report = self._run("conv_bn_relu_2d", "--no-conv-bn-folding")
        entry = self.pass_entry(report, "fold_conv_bn")
        self.assertEqual(entry["status"], "disabled")
        self.assertIs(entry["changed"], False)
        self.assertEqual(self._ops(out, e2e.BATCH_NORM_OPS), 3)
        # kept norms run as one scale-and-shift op each, with the ReLU after them
        norms = self.pass_entry(report, "fuse_norm_relu")
        self.assertEqual((norms["status"], norms["count"]), ("applied", 3), norms)
        self.assertEqual(self._ops(out, ("norm_relu",)), 3)
        self.assertEqual(norms["details"]["norm_relu"], 3, norms)
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_linear_bn_without_shapes(self):
        """Without --sample-input the rank is unknown: folding may be guarded by the rank,
        but the result must match and the folds be reported."""
        src, out, _, report = self._run("linear_bn")
        entry = self.pass_entry(report, "fold_linear_bn")
        self.assertEqual(entry["status"], "applied")
        self.assertEqual(entry["count"], 2, entry)
        self.check_in_python(src, out, self.copy_input("linear_bn"))

    def test_no_linear_bn_folding(self):
        src, out, _, report = self._run("linear_bn", "--no-linear-bn-folding")
        self.assertEqual(self.pass_entry(report, "fold_linear_bn")["status"], "disabled")
        self.assertEqual(self._ops(out, e2e.BATCH_NORM_OPS), 2)
        self.check_in_python(src, out, self.copy_input("linear_bn"))

    def test_no_replace_dropout(self):
        src, out, _, report = self._run("dropout_all", "--no-replace-dropout")
        self.assertEqual(self.pass_entry(report, "remove_dropout")["status"], "disabled")
        self.assertGreater(self._ops(out, e2e.DROPOUT_OPS), 0)
        self.check_in_python(src, out, self.copy_input("dropout_all"))

    def test_remove_dropout_counts(self):
        _, out, _, report = self._run("dropout_traced")
        entry = self.pass_entry(report, "remove_dropout")
        self.assertEqual(entry["status"], "applied")
        self.assertGreaterEqual(entry["count"], 8, entry)
        self.assertEqual(self._ops(out, e2e.DROPOUT_OPS), 0)

    def test_concat_linear(self):
        src, out, _, report = self._run("concat_linear", "--concat-linear")
        entry = self.pass_entry(report, "concat_linear")
        self.assertEqual(entry["status"], "applied")
        self.assertIs(entry["changed"], True)
        self.assertEqual(self._ops(out, ("linear",)),
                         e2e.MODELS["concat_linear"]["expect"]["linear_after_concat"])
        self.check_in_python(src, out, self.copy_input("concat_linear"))

    def test_no_concat_linear(self):
        src, out, _, report = self._run("concat_linear", "--no-concat-linear")
        self.assertEqual(self.pass_entry(report, "concat_linear")["status"], "disabled")
        self.assertEqual(self._ops(out, ("linear",)), 3)
        self.check_in_python(src, out, self.copy_input("concat_linear"))

    def test_channels_last(self):
        src, out, _, report = self._run("conv_bn_relu_2d", "--channels-last")
        entry = self.pass_entry(report, "to_channels_last")
        self.assertEqual(entry["status"], "applied")
        self.assertIs(entry["changed"], True)
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_channels_last_3d(self):
        """5-D convolutions go channels-last-3d, or -- where this libtorch's conv3d does not
        keep that layout -- each one is reported as skipped with the reason."""
        src, out, _, report = self._run("conv_bn_relu_3d", "--channels-last")
        entry = self.pass_entry(report, "to_channels_last")
        if not entry["changed"]:
            self.assertEqual(len(entry["skipped"]), 3, entry)
            for reason in entry["skipped"]:
                self.assertIn("conv3d", reason)
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_3d"))

    def test_channels_last_without_convs(self):
        _, _, _, report = self._run("linear_bn", "--channels-last")
        self.assertIs(self.pass_entry(report, "to_channels_last")["changed"], False)

    def test_no_channels_last(self):
        _, _, _, report = self._run("conv_bn_relu_2d", "--no-channels-last")
        entry = self.pass_entry(report, "to_channels_last")
        self.assertEqual(entry["status"], "disabled")
        self.assertIs(entry["changed"], False)

    def test_optimize_lstm_on_at_o1(self):
        src = self.copy_model("lstm")
        result, report = self.optimize(src, self.path("out.pt"))
        entry = self.pass_entry(report, "optimize_lstm")
        self.assertEqual((entry["status"], entry["count"]), ("applied", 1), entry)
        self.assertEqual(self.inspect(self.path("out.pt"))["op_histogram"].get("ipex::lstm"), 1)
        self.assertEqual(result.warnings(), [], result.describe())

    def test_optimize_lstm_off_silent(self):
        src = self.copy_model("lstm")
        result, report = self.optimize(src, self.path("out.pt"), "--no-optimize-lstm")
        self.assertEqual(self.pass_entry(report, "optimize_lstm")["status"], "disabled")
        self.assertEqual(self.inspect(self.path("out.pt"))["op_histogram"].get("aten::lstm"), 1)
        self.assertEqual(result.warnings(), [], result.describe())

    # -- inputs and outputs

    def test_sample_input(self):
        src, out, _, _ = self._run("conv_bn_relu_2d", "--sample-input", "2x3x32x32")
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_sample_input_files(self):
        for name in ("input.npy", "input.pt"):
            with self.subTest(file=name):
                path = self.copy_fixture(name)
                src, out, _, _ = self._run("conv_bn_relu_2d", "--sample-input", path,
                                           out_name=f"out-{name}.pt")
                self.check_in_python(src, out, self.copy_fixture("input.pt"))

    def test_sample_input_two_inputs(self):
        src, out, _, _ = self._run("two_in_two_out", "--sample-input", "2x3x16x16",
                                   "--sample-input", "2x8")
        self.check_in_python(src, out, self.copy_input("two_in_two_out"))

    def test_overwrite_existing_out(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("out.pt")
        with open(out, "wb") as f:
            f.write(b"old contents")
        self.optimize(src, out)
        self.check_in_python(src, out, self.copy_input("conv_bn_relu_2d"))

    def test_optimize_twice(self):
        src, out, _, _ = self._run("resnet18")
        again = self.path("again.pt")
        _, report = self.optimize(out, again)
        self.assertEqual(e2e.count_ops(report["op_histogram"]["after"], e2e.BATCH_NORM_OPS), 0)
        self.check_in_python(src, again, self.copy_input("resnet18"))

    def test_relative_paths(self):
        self.copy_model("conv_bn_relu_2d")
        self.tool("optimize", "conv_bn_relu_2d.pt", "rel.pt")
        self.assertTrue(os.path.isfile(self.path("rel.pt")))


if __name__ == "__main__":
    e2e.main()
