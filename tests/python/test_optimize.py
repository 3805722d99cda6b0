"""ipex_tool.optimize for inference: eager models traced with sample_input or at their first
call, ScriptModules as they are; outputs against the eager model, the ops of the optimized
graph, the knobs, and the same graph as `ipex-tool optimize`."""

import io
import json
import os
import subprocess
import warnings

import torch

from py_common import HAS_AVX512, ConvBnRelu, TestCase, TinyEncoder, ipex, ipex_ops, main, op_counts


class OptimizeEager(TestCase):
    def setUp(self):
        super().setUp()
        self.model = ConvBnRelu().eval()
        self.x = torch.randn(2, 3, 16, 16)
        with torch.no_grad():
            self.want = self.model(self.x)

    def test_sample_input_gives_prepacked_script_module(self):
        optimized = ipex.optimize(self.model, sample_input=self.x)
        self.assertIsInstance(optimized, torch.jit.ScriptModule)
        with torch.no_grad():
            self.assert_close(optimized(self.x), self.want)
        ops = op_counts(optimized)
        convolutions = sum(n for kind, n in ops.items() if kind.startswith("ipex::conv"))
        self.assertGreaterEqual(convolutions, 1, ops)  # one op per conv, or a residual block in one
        self.assertEqual(ops["ipex::linear"], 1, ops)
        for gone in ("aten::batch_norm", "aten::dropout", "aten::_convolution", "aten::conv2d", "aten::linear"):
            self.assertEqual(ops[gone], 0, f"{gone} left: {ops}")
        applied = {p["name"]: p["count"] for p in optimized.ipex_tool_report["passes"] if p["status"] == "applied"}
        self.assertEqual(applied.get("fold_conv_bn"), 2, applied)
        self.assertEqual(applied.get("remove_dropout"), 1, applied)
        self.assertEqual(optimized.ipex_tool_report["sample_inputs"], "2x3x16x16:fp32")

    def test_the_model_itself_is_not_modified(self):
        before = {k: v.clone() for k, v in self.model.state_dict().items()}
        ipex.optimize(self.model, sample_input=self.x)
        for k, v in self.model.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        self.assertIsInstance(self.model.bn1, torch.nn.BatchNorm2d)

    def test_without_sample_input_optimizes_at_the_first_call(self):
        optimized = ipex.optimize(self.model)
        self.assertIsNone(optimized.optimized)
        self.assertIsNone(optimized.ipex_tool_report)
        with self.assertRaisesRegex(RuntimeError, "first call"):
            torch.jit.save(optimized, self.path("early.pt"))
        with torch.no_grad():
            self.assert_close(optimized(self.x), self.want)
            self.assert_close(optimized(x=self.x), self.want, what="keyword call")
            other = torch.randn(3, 3, 20, 20)  # other shapes run too
            self.assert_close(optimized(other), self.model(other), what="other shape")
        self.assertGreaterEqual(ipex_ops(optimized.optimized)["ipex::linear"], 1)
        torch.jit.save(optimized, self.path("lazy.pt"))
        with torch.no_grad():
            self.assert_close(torch.jit.load(self.path("lazy.pt"))(self.x), self.want, what="saved")

    def test_traced_and_frozen_after_optimize(self):
        """IPEX's TorchScript example: optimize, then torch.jit.trace and torch.jit.freeze."""
        optimized = ipex.optimize(self.model)
        with torch.no_grad():
            traced = torch.jit.freeze(torch.jit.trace(optimized, self.x))
            self.assert_close(traced(self.x), self.want)
        self.assertGreaterEqual(ipex_ops(traced)["ipex::linear"], 1, op_counts(traced))
        buffer = io.BytesIO()
        torch.jit.save(traced, buffer)
        buffer.seek(0)
        with torch.no_grad():
            self.assert_close(torch.jit.load(buffer)(self.x), self.want, what="saved trace")

    def test_script_modules_go_straight_in(self):
        for name, script in (("traced", torch.jit.trace(self.model, self.x)), ("scripted", torch.jit.script(self.model))):
            with self.subTest(name):
                optimized = ipex.optimize(script)
                with torch.no_grad():
                    self.assert_close(optimized(self.x), self.want, what=name)
                self.assertEqual(ipex_ops(optimized)["ipex::linear"], 1, op_counts(optimized))

    def test_training_mode_is_optimized_for_inference_with_a_warning(self):
        self.model.train()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimized = ipex.optimize(self.model, sample_input=self.x)
        self.assertTrue(any("training mode" in w for w in self.ipex_warnings(caught)), caught)
        self.assertTrue(self.model.training, "the caller's model keeps its mode")
        with torch.no_grad():
            self.assert_close(optimized(self.x), self.want)

    def test_saved_model_loads_in_a_process_with_only_libipex_ops(self):
        optimized = ipex.optimize(self.model, sample_input=self.x)
        torch.jit.save(optimized, self.path("m.pt"))
        torch.save(self.x, self.path("x.pt"))
        torch.save(self.want, self.path("want.pt"))
        script = ("import sys, torch\n"
                  "torch.ops.load_library(sys.argv[1])\n"
                  "m = torch.jit.load(sys.argv[2])\n"
                  "got = m(torch.load(sys.argv[3]))\n"
                  "print(float((got - torch.load(sys.argv[4])).abs().max()))\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run(["/usr/bin/python3", "-c", script, ipex.ops_library_path(), self.path("m.pt"),
                              self.path("x.pt"), self.path("want.pt")], capture_output=True, text=True, env=env,
                             timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertLess(float(out.stdout), 1e-4)


class OptimizeKnobs(TestCase):
    def setUp(self):
        super().setUp()
        self.model = ConvBnRelu().eval()
        self.x = torch.randn(2, 3, 16, 16)
        with torch.no_grad():
            self.want = self.model(self.x)

    def optimize(self, **kwargs):
        optimized = ipex.optimize(self.model, sample_input=self.x, **kwargs)
        with torch.no_grad():
            self.assert_close(optimized(self.x), self.want)
        return optimized, op_counts(optimized)

    def status(self, optimized, name):
        return next(p["status"] for p in optimized.ipex_tool_report["passes"] if p["name"] == name)

    def test_level_o0_leaves_the_graph(self):
        optimized, ops = self.optimize(level="O0")
        self.assertEqual(sum(ipex_ops(optimized).values()), 0, ops)
        self.assertEqual(ops["aten::batch_norm"], 2, ops)
        self.assertEqual(self.status(optimized, "fold_conv_bn"), "disabled")

    def test_level_o0_with_a_knob_runs_that_knob(self):
        optimized, ops = self.optimize(level="O0", conv_bn_folding=True)
        self.assertEqual(ops["aten::batch_norm"], 0, ops)
        self.assertEqual(sum(ipex_ops(optimized).values()), 0, ops)

    def test_weights_prepack_off_keeps_aten_ops(self):
        optimized, ops = self.optimize(weights_prepack=False)
        self.assertEqual(sum(ipex_ops(optimized).values()), 0, ops)
        self.assertEqual(ops["aten::batch_norm"], 0, ops)
        self.assertEqual(self.status(optimized, "weights_prepack"), "disabled")

    def test_weights_prepack_on_is_an_inference_knob(self):
        # weights_prepack also chooses TrainingLinear when an optimizer is given; for inference it
        # is the prepacking knob and draws no "applies to training" warning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimized, _ = self.optimize(weights_prepack=True)
        self.assertFalse(any("training" in w for w in self.ipex_warnings(caught)), caught)
        self.assertGreater(sum(ipex_ops(optimized).values()), 0)

    def test_conv_bn_folding_off_keeps_the_norms(self):
        optimized, ops = self.optimize(conv_bn_folding=False, weights_prepack=False)
        self.assertEqual(ops["aten::batch_norm"], 2, ops)
        self.assertEqual(self.status(optimized, "fold_conv_bn"), "disabled")

    def test_replace_dropout_off_keeps_dropout(self):
        optimized, ops = self.optimize(replace_dropout_with_identity=False, weights_prepack=False)
        self.assertEqual(self.status(optimized, "remove_dropout"), "disabled")
        self.assertEqual(ops["aten::dropout"], 1, ops)

    def test_cli_knobs_and_options_as_keywords(self):
        optimized, ops = self.optimize(channels_last=False, portable=True)
        self.assertEqual(sum(ipex_ops(optimized).values()), 0, ops)
        self.assertEqual(self.status(optimized, "to_channels_last"), "disabled")
        self.assertEqual(optimized.ipex_tool_report["mode"], "portable")


class OptimizeModels(TestCase):
    def test_transformer_encoder_keeps_its_output_structure(self):
        model = TinyEncoder().eval()
        ids = torch.randint(100, (2, 12))
        mask = torch.ones(2, 12, dtype=torch.long)
        mask[1, 8:] = 0
        with torch.no_grad():
            want = model(ids, mask)
        optimized = ipex.optimize(model, sample_input=(ids, mask))
        with torch.no_grad():
            got = optimized(ids, mask)
        self.assertIsInstance(got, tuple)
        self.assert_close(got, want)
        ops = op_counts(optimized)
        self.assertEqual(ops["ipex::attention"], 2, ops)  # one blocked attention op per layer
        self.assertEqual(ops["ipex::layer_norm"], 4, ops)
        self.assertEqual(ops["aten::linear"] + ops["aten::_transformer_encoder_layer_fwd"], 0, ops)

    def test_dict_output(self):
        class Heads(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(8, 3)
                self.b = torch.nn.Linear(8, 2)

            def forward(self, x):
                return {"a": self.a(x), "b": torch.relu(self.b(x))}

        model = Heads().eval()
        x = torch.randn(4, 8)
        optimized = ipex.optimize(model, sample_input=x)
        with torch.no_grad():
            got, want = optimized(x), model(x)
        self.assertEqual(sorted(got), ["a", "b"])
        self.assert_close(got, want)

    def test_bf16_is_fp32_in_and_out(self):
        model = ConvBnRelu().eval()
        x = torch.randn(2, 3, 16, 16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimized = ipex.optimize(model, dtype=torch.bfloat16, sample_input=x)
        with torch.no_grad():
            self.assert_close(optimized(x), model(x), dtype="bf16")
        self.assertEqual(optimized.ipex_tool_report["dtype"], "bf16")
        if not HAS_AVX512:  # the driver's warning, as a Python warning
            self.assertTrue(any("bf16" in w for w in self.ipex_warnings(caught)), caught)

    def test_same_graph_as_the_cli(self):
        tool = os.environ.get("IPEX_TOOL")
        if not tool:
            self.skipTest("IPEX_TOOL is not set (run through ctest)")
        model = ConvBnRelu().eval()
        x = torch.randn(2, 3, 16, 16)
        traced = torch.jit.trace(model, x)
        torch.jit.save(traced, self.path("in.pt"))
        torch.save(x, self.path("x.pt"))
        run = subprocess.run([tool, "optimize", self.path("in.pt"), self.path("cli.pt"), "--sample-input",
                              self.path("x.pt"), "--no-concat-linear", "--report", self.path("report.json")],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        optimized = ipex.optimize(traced, sample_input=x, concat_linear=False)
        with open(self.path("report.json")) as f:
            cli_report = json.load(f)
        self.assertEqual(optimized.ipex_tool_report["op_histogram"], cli_report["op_histogram"])
        self.assertEqual([(p["name"], p["status"], p.get("count")) for p in optimized.ipex_tool_report["passes"]],
                         [(p["name"], p["status"], p.get("count")) for p in cli_report["passes"]])
        cli = torch.jit.load(self.path("cli.pt"))
        with torch.no_grad():
            self.assertTrue(torch.equal(optimized(x), cli(x)), "the same model computes the same bits")


if __name__ == "__main__":
    main()
