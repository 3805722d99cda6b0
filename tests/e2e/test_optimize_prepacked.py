#!/usr/bin/python3
"""`ipex-tool optimize` in its default, prepacked mode: --weights-prepack against --portable,
--auto-kernel-selection, --fp32-math-mode bf32 (optimize and bench), the report's fusion
entries, and the optimized model in Python with libipex_ops.so giving ipex-tool's outputs."""

import json
import os
import subprocess
import unittest

import e2e_common as e2e

# Runs an original and an optimized model in a fresh Python process with libipex_ops.so and
# prints cosine and max |a - b| of the (single tensor) outputs, computed as verify does (fp64).
PYTHON_COMPARE = r"""
import json, sys
import torch
torch.ops.load_library(sys.argv[1])
x = torch.load(sys.argv[4])
inputs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
a = torch.jit.load(sys.argv[2]).eval()
b = torch.jit.load(sys.argv[3])
with torch.no_grad():
    ra, rb = a(*inputs).double().flatten(), b(*inputs).double().flatten()
cos = torch.nn.functional.cosine_similarity(ra, rb, dim=0).item()
print(json.dumps({"cosine": cos, "max_abs_err": (ra - rb).abs().max().item(),
                  "dtype": str(b(*inputs).dtype)}))
"""

# The scripted encoder fixture, original and optimized, in a fresh Python process: the
# optimized graph's fast-path ops and prepacked linears (over all blocks), and the cosine of
# the outputs at the positions a padding mask keeps, with no mask and with one.
PYTHON_ENCODER = r"""
import collections, json, sys
import torch
torch.ops.load_library(sys.argv[1])
a = torch.jit.load(sys.argv[2]).eval()
b = torch.jit.load(sys.argv[3])
ops = collections.Counter()
def walk(block):
    for node in block.nodes():
        ops[node.kind()] += 1
        for inner in node.blocks():
            walk(inner)
walk(b.graph)
torch.manual_seed(0)
x = torch.randn(3, 10, 32)
padding = torch.zeros(3, 10, dtype=torch.bool)
padding[1, 7:] = True
padding[2, 4:] = True
cosines = []
with torch.no_grad():
    for args, keep in (((x,), torch.ones(3, 10, 1, dtype=torch.bool)), ((x, padding), ~padding.unsqueeze(-1))):
        ra, rb = a(*args), b(*args)
        ra = ra.to_padded_tensor(0.0) if ra.is_nested else ra
        ra, rb = (ra * keep).double().flatten(), (rb * keep).double().flatten()
        cosines.append(torch.nn.functional.cosine_similarity(ra, rb, dim=0).item())
print(json.dumps({"ops": ops, "cosines": cosines}))
"""


class OptimizePrepacked(e2e.ToolTestCase):
    def test_scripted_encoder_takes_the_plain_path(self):
        """A scripted nn.TransformerEncoder picks its fused fast path at run time, which hid its
        linears from every pass: optimize keeps the plain branch, whose linears are prepacked,
        and the model still takes an optional padding mask."""
        src = self.copy_model("scripted_encoder")
        for dtype in ("fp32", "bf16"):
            with self.subTest(dtype=dtype):
                if dtype == "bf16" and not e2e.ONEDNN_BF16:
                    self.skipTest(e2e.NO_ONEDNN_BF16)
                out = self.path(f"enc.{dtype}.pt")
                _, report = self.optimize(src, out, "--dtype", dtype, "--sample-input", "2x12x32")
                entry = self.pass_entry(report, "decompose_transformer_layer")
                taken_out = [m for m in entry["modules"] if "branch not taken" in m]
                self.assertEqual(len(taken_out), 5, entry)  # 2 layers, 2 attentions, the nested-tensor step
                proc = subprocess.run([e2e.PYTHON, "-c", PYTHON_ENCODER, e2e.OPS_LIBRARY, src, out],
                                      capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                result = json.loads(proc.stdout)
                ops = result["ops"]
                for fused in ("aten::_transformer_encoder_layer_fwd", "aten::_native_multi_head_attention",
                              "aten::_nested_tensor_from_mask"):
                    self.assertNotIn(fused, ops)
                # Per layer: the merged q/k/v and out projections, two feed-forward linears; and the head.
                prepacked = ops.get("ipex::linear", 0) + ops.get("ipex::linear_binary", 0)
                self.assertGreaterEqual(prepacked, 9, ops)
                for cosine in result["cosines"]:
                    self.assertGreater(cosine, 0.99999 if dtype == "fp32" else 0.999)

    @unittest.skipUnless(e2e.ONEDNN_BF16, e2e.NO_ONEDNN_BF16)
    def test_report_and_fusions(self):
        src = self.copy_model("resnet18")
        out = self.path("r18.pt")
        _, report = self.optimize(src, out, "--dtype", "bf16")
        self.assertEqual(report["mode"], "prepacked")
        prepack = self.pass_entry(report, "weights_prepack")
        self.assertEqual(prepack["status"], "applied")
        self.assertEqual(prepack["count"], 21)  # 20 convolutions + the classifier
        self.assertEqual(prepack["fp32_math_mode"], "fp32")
        # resnet18: every conv but the last of each block is followed by relu; 8 residual adds,
        # each with the block's relu after it.
        self.assertEqual(self.pass_entry(report, "fuse_conv_sum")["count"], 8)
        self.assertEqual(self.pass_entry(report, "fuse_eltwise")["count"], 17)
        self.assertEqual(self.pass_entry(report, "restore_output_layout")["count"], 1)
        after = report["op_histogram"]["after"]
        # Every residual operand is dead after its add (the block input, or the downsample
        # conv's output), so all 8 sums write into it.
        sums = self.pass_entry(report, "fuse_conv_sum")["modules"]
        self.assertEqual(sum("+sum(in place)" in m for m in sums), 8, sums)
        # The stem's convolution runs with the max pooling after it; the other 19 convolutions,
        # the 8 with a sum among them, as one group of residual blocks.
        self.assertEqual(after.get("ipex::convolution_max_pool", 0), 1)
        self.assertEqual(after.get("ipex::convolution_graph", 0), 1)
        for op in ("ipex::convolution", "ipex::convolution_sum_", "ipex::convolution_sum", "ipex::max_pool2d"):
            self.assertEqual(after.get(op, 0), 0, after)
        chains = self.pass_entry(report, "chain_convolutions")
        self.assertEqual(chains["details"]["pooled"], 1, chains)
        self.assertEqual(chains["modules"], ["conv1+maxpool"], chains)
        group = self.pass_entry(report, "group_convolutions")
        self.assertEqual(group["details"], {"graphs": 1, "convolutions": 19, "sums": 8}, group)
        self.assertEqual(group["modules"], ["layer1.0.conv1..layer4.1.conv2 (19 convolutions)"], group)
        for op in ("aten::conv2d", "aten::relu_", "aten::add_", "aten::linear"):
            self.assertEqual(after.get(op, 0), 0, after)
        meta = self.inspect(out)
        self.assertIs(meta["needs_ops_library"], True)
        self.assertEqual(meta["ipex"]["portable"], False)
        self.assertIn("bf16", meta["parameters"]["by_dtype"], meta["parameters"])

    def test_no_weights_prepack_is_portable(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("out.pt")
        _, report = self.optimize(src, out, "--no-weights-prepack")
        self.assertEqual(report["mode"], "portable")
        self.assertEqual(self.pass_entry(report, "weights_prepack")["status"], "disabled")
        self.assertIs(self.inspect(out)["needs_ops_library"], False)

    def test_portable_and_weights_prepack_conflict(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("out.pt")
        result = self.run_tool("optimize", src, out, "--portable", "--weights-prepack")
        self.assert_error(result, e2e.EXIT_USAGE, "--portable", "--weights-prepack")
        self.assertFalse(os.path.exists(out))

    def test_auto_kernel_selection(self):
        src = self.copy_model("concat_linear")
        out = self.path("out.pt")
        specs = e2e.MODELS["concat_linear"]["inputs"]
        flags = ["--auto-kernel-selection"]
        for spec in specs:
            flags += ["--sample-input", spec]
        _, report = self.optimize(src, out, *flags)
        prepack = self.pass_entry(report, "weights_prepack")
        choices = prepack["details"]["kernel_choices"]
        self.assertGreater(len(choices), 0)
        for c in choices:
            self.assertIn(c["choice"], ("aten", "onednn"), c)
            self.assertGreater(c["onednn_ms"], 0)
            self.assertGreater(c["aten_ms"], 0)
            self.assertEqual(c["rows_from"], "sample input")
            self.assertEqual(c["choice"], "aten" if c["aten_ms"] < c["onednn_ms"] else "onednn", c)
        onednn = sum(1 for c in choices if c["choice"] == "onednn")
        after = report["op_histogram"]["after"]
        self.assertEqual(after.get("ipex::linear", 0) + after.get("ipex::linear_binary", 0), onednn, after)
        self.assertEqual(after.get("aten::linear", 0), len(choices) - onednn, after)
        entry = self.pass_entry(report, "auto_kernel_selection")
        self.assertEqual(entry["status"], "applied")
        self.assertEqual(entry["count"], len(choices))
        self.check_in_python(src, out, self.copy_input("concat_linear"))

    def test_auto_kernel_selection_records_convolution_kernels(self):
        """The depthwise and 1x1 convolutions have own kernels beside oneDNN's: with a sample input,
        each is timed both ways at the shape the sample input gives it and the faster is saved
        in the model; without one nothing is recorded and the report says why."""
        src, inputs, out, batch, entry = self.select_conv_kernels("depthwise_conv_bn", "dw.pt")
        self.assertEqual(entry["status"], "applied")
        choices = entry["details"]["conv_kernel_choices"]
        # The depthwise and 1x1 convolutions on 8 channels at the input's 16x16, then the
        # depthwise one on the 16 channels the 1x1 convolution makes.
        self.assertEqual([(c["input"], c["kernel"]) for c in choices],
                         [(f"{batch}x8x16x16", "own depthwise convolution"),
                          (f"{batch}x8x16x16", "own pointwise convolution"),
                          (f"{batch}x16x16x16", "own depthwise convolution")], choices)
        self.assertEqual(entry["count"], 3)
        self.assertEqual(entry["skipped"], [])
        for c in choices:
            self.assertGreater(c["own_ms"], 0)
            self.assertGreater(c["onednn_ms"], 0)
            self.assertEqual(c["choice"], "own" if c["own_ms"] < c["onednn_ms"] else "onednn", c)
        want = sorted([1 if c["choice"] == "own" else 0] + [int(d) for d in c["input"].split("x")] for c in choices)
        self.assertEqual(self.saved_kernel_choices(out), want)
        self.check_in_python(src, out, inputs)

        out = self.path("dw_no_sample.pt")
        result, report = self.optimize(src, out, "--auto-kernel-selection")
        entry = self.pass_entry(report, "auto_kernel_selection")
        self.assertNotIn("conv_kernel_choices", entry.get("details") or {})
        self.assertEqual(len(entry["skipped"]), 3, entry)
        for line in entry["skipped"]:
            self.assertIn("no --sample-input", line)
        self.assertTrue(any("records no convolution kernel choice" in w for w in result.warnings()),
                        result.describe())
        self.assertEqual(self.saved_kernel_choices(out), [])

    def test_auto_kernel_selection_records_grouped_convolution_kernels(self):
        """A grouped convolution with 16 output channels per group has the own grouped kernel beside
        oneDNN's: timed both ways at the sample input's shape, the faster saved in the model."""
        src, inputs, out, batch, entry = self.select_conv_kernels("grouped_conv_bn", "grouped.pt")
        choices = entry["details"]["conv_kernel_choices"]
        # The 1x1 expansion at the input's 16x16, then the grouped 3x3 on its 32 channels.
        self.assertEqual([(c["input"], c["kernel"]) for c in choices],
                         [(f"{batch}x8x16x16", "own pointwise convolution"),
                          (f"{batch}x32x16x16", "own grouped convolution")], choices)
        for c in choices:
            self.assertEqual(c["choice"], "own" if c["own_ms"] < c["onednn_ms"] else "onednn", c)
        want = sorted([1 if c["choice"] == "own" else 0] + [int(d) for d in c["input"].split("x")] for c in choices)
        self.assertEqual(self.saved_kernel_choices(out), want)
        self.check_in_python(src, out, inputs)

    def test_auto_kernel_selection_records_residual_sum_convolutions(self):
        """A 1x1 convolution with the residual add folded in (a sum first in its post-ops) has the
        own pointwise kernel beside oneDNN's too: timed both ways, the faster saved in the model."""
        src, inputs, out, batch, entry = self.select_conv_kernels("bottleneck_sum", "bottleneck.pt")
        choices = entry["details"]["conv_kernel_choices"]
        self.assertEqual([(c["input"], c["kernel"]) for c in choices],
                         [(f"{batch}x32x12x12", "own pointwise convolution"),
                          (f"{batch}x8x12x12", "own pointwise convolution")], choices)
        self.assertNotIn("+sum", choices[0]["conv"])
        self.assertIn("+sum+relu", choices[1]["conv"])
        for c in choices:
            self.assertEqual(c["choice"], "own" if c["own_ms"] < c["onednn_ms"] else "onednn", c)
        want = sorted([1 if c["choice"] == "own" else 0] + [int(d) for d in c["input"].split("x")] for c in choices)
        self.assertEqual(self.saved_kernel_choices(out), want)
        self.check_in_python(src, out, inputs)

    def select_conv_kernels(self, model: str, out_name: str):
        """Optimizes a fixture with --auto-kernel-selection at its first input's shape (skipping
        without AVX-512): its source, inputs, output path, batch and auto_kernel_selection entry."""
        features = self.tool_json("info", "--json")["features"]
        if not all(features.get(f) for f in ("avx512f", "avx512bw", "avx512vl")):
            self.skipTest("the own convolution kernels need AVX-512")
        src = self.copy_model(model)
        inputs = self.copy_input(model)
        spec = e2e.MODELS[model]["inputs"][0]
        out = self.path(out_name)
        _, report = self.optimize(src, out, "--auto-kernel-selection", "--sample-input", spec)
        return src, inputs, out, spec.split(":")[0].split("x")[0], self.pass_entry(report, "auto_kernel_selection")

    def saved_kernel_choices(self, model: str):
        """The kernel choices saved in a model's convolution contexts, read back in Python."""
        code = ("import json, sys, torch\n"
                "torch.ops.load_library(sys.argv[1])\n"
                "m = torch.jit.load(sys.argv[2])\n"
                "found = []\n"
                "for node in m.graph.findAllNodes('prim::Constant'):\n"
                "    if node.output().type().kind() == 'ClassType':\n"
                "        ctx = node.output().toIValue()\n"
                "        if hasattr(ctx, 'kernel_choices'):\n"
                "            found += [list(c) for c in ctx.kernel_choices()]\n"
                "print(json.dumps(sorted(found)))\n")
        proc = subprocess.run([e2e.PYTHON, "-c", code, e2e.OPS_LIBRARY, model], capture_output=True, text=True,
                              timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def test_bf32(self):
        src = self.copy_model("conv_bn_relu_2d")
        inputs = self.copy_input("conv_bn_relu_2d")
        out = self.path("bf32.pt")
        result, report = self.optimize(src, out, "--fp32-math-mode", "bf32")
        if not e2e.ONEDNN_BF16:
            # No bf16 products here: strict fp32, prepacked, said so, and recorded as what ran.
            self.assertTrue(any("bf32" in w and "strict fp32" in w for w in result.warnings()), result.describe())
            self.assertEqual(self.pass_entry(report, "weights_prepack")["fp32_math_mode"], "fp32")
            self.assertEqual(self.pass_entry(report, "weights_prepack")["skipped"], [])
            self.assertEqual(self.pass_entry(report, "chain_bf32_outputs")["status"], "disabled")
            self.assertEqual(self.inspect(out)["ipex"]["fp32_math_mode"], "fp32")
            verify = self.tool_json("verify", src, out, "--input", inputs, "--min-cosine", "0.99999", "--json")
            self.assertIs(verify["ok"], True, verify)
            return
        self.assertEqual(self.pass_entry(report, "weights_prepack")["fp32_math_mode"], "bf32")
        self.assertEqual(self.pass_entry(report, "chain_bf32_outputs")["status"], "applied")
        meta = self.inspect(out)
        self.assertEqual(meta["ipex"]["fp32_math_mode"], "bf32")
        self.assertEqual(meta["ipex"]["dtype"], "fp32")
        verify = self.tool_json("verify", src, out, "--input", inputs, "--json")
        self.assertIs(verify["ok"], True, verify)
        self.assertEqual(verify["dtype"], "bf16", "bf32 is held to the bf16 tolerance")
        # fp32 in, fp32 out; the arithmetic is bf16-rounded, so not bit-equal to fp32.
        self.assertLess(verify["outputs"][0]["cosine"], 1.0)
        self.check_in_python(src, out, inputs, "bf16")

    def test_bf32_portable_warns(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("out.pt")
        result, report = self.optimize(src, out, "--fp32-math-mode", "bf32", "--portable")
        self.assertTrue(any("bf32" in w for w in result.warnings()), result.describe())
        self.assertEqual(self.inspect(out)["ipex"]["fp32_math_mode"], "fp32")

    def test_bench_fp32_math_mode(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("bf32.pt")
        self.optimize(src, out, "--fp32-math-mode", "bf32")
        report = self.tool_json("bench", out, "--input", "2x3x16x16", "--iterations", "3", "--warmup", "1",
                                "--fp32-math-mode", "bf32", "--json", "-")
        self.assertEqual(report["fp32_math_mode"], "bf32")
        result = self.run_tool("bench", out, "--input", "2x3x16x16", "--fp32-math-mode", "tf32")
        self.assert_error(result, e2e.EXIT_USAGE, "--fp32-math-mode")

    def test_python_gets_ipex_tool_outputs(self):
        """The optimized model in /usr/bin/python3 with torch.ops.load_library gives what
        ipex-tool computes: the same cosine and max error against the original. The kernel
        choices are saved in the model (--auto-kernel-selection): timed in each process
        instead, a convolution with an own kernel (resnet18's stem) may run the other way in
        one of them and round differently."""
        for name, dtype in (("resnet18", "bf16"), ("conv_bn_relu_1d", "fp32"), ("tiny_transformer", "bf16")):
            with self.subTest(model=name, dtype=dtype):
                src = self.copy_model(name)
                inputs = self.copy_input(name)
                out = self.path(f"{name}.{dtype}.pt")
                self.optimize(src, out, "--dtype", dtype, "--auto-kernel-selection", "--sample-input", inputs)
                verify = self.tool_json("verify", src, out, "--input", inputs, "--json")
                proc = subprocess.run([e2e.PYTHON, "-c", PYTHON_COMPARE, e2e.OPS_LIBRARY, src, out, inputs],
                                      capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                py = json.loads(proc.stdout)
                self.assertEqual(py["dtype"], "torch.float32", "outputs come back as fp32")
                ours = verify["outputs"][0]
                self.assertAlmostEqual(py["cosine"], ours["cosine"], places=6)
                self.assertAlmostEqual(py["max_abs_err"], ours["max_abs_err"],
                                       delta=1e-6 * max(1.0, ours["max_abs_err"]))


if __name__ == "__main__":
    e2e.main()
