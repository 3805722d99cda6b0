"""ipex-tool import: GPTQ (v1/v2, sym/asym, act-order, 8-bit, sharded) and AWQ GEMM checkpoints
written by the independent reference in tests/fixtures/make_woq_fixtures.py; the imported
weights must equal the reference's dequantized weights exactly. Bad checkpoints: exit code,
one error line naming the problem, nothing written, input untouched."""

import json
import os
import shutil
import unittest

import torch

import e2e_common as e2e
from woq_files import WOQ_FIXTURES, dequantize_layers, read_safetensors, woq_manifest

MANIFEST = woq_manifest()


class ImportTest(e2e.ToolTestCase):
    def copy_checkpoint(self, rel: str) -> str:
        dst = self.path(os.path.basename(rel))
        shutil.copytree(os.path.join(WOQ_FIXTURES, rel), dst)
        return dst

    def test_imported_weights_equal_the_reference_exactly(self):
        for name, case in MANIFEST["checkpoints"].items():
            with self.subTest(checkpoint=name):
                src = self.copy_checkpoint(case["dir"])
                before = e2e.sha256(src)
                out = self.path(name + ".woq.safetensors")
                summary = self.tool_json("import", "auto", src, out, "--json")
                self.assertEqual(e2e.sha256(src), before, "import modified its input")
                self.assertEqual(summary["layers"], len(case["layers"]))
                self.assertEqual(summary["bits"], case["bits"])
                self.assertEqual(summary["source_format"], case["source_format"])
                self.assertEqual(summary["method"], case["format"])
                want_gs = case["group_size"]
                if want_gs != -1:
                    self.assertEqual(summary["group_size"], want_gs)
                self.assertEqual(summary["act_order_layers"] > 0, bool(case.get("act_order")))
                self.assertEqual(summary["bytes_out"] > 0, True)
                got = dequantize_layers(out)
                reference, _ = read_safetensors(os.path.join(WOQ_FIXTURES, case["reference"]))
                self.assertEqual(sorted(got), sorted(reference))
                for tensor, want in reference.items():
                    self.assertTrue(torch.equal(got[tensor], want),
                                    f"{name}: {tensor} differs from the reference "
                                    f"(max abs diff {(got[tensor] - want).abs().max().item()})")

    def test_explicit_format_and_text_summary(self):
        src = self.copy_checkpoint("gptq_actorder_g32")
        out = self.path("out.safetensors")
        result = self.tool("import", "gptq", src, out)
        self.assertIn("imported 3 layers", result.stdout)
        self.assertIn("act-order   3 layers", result.stdout)
        _, metadata = read_safetensors(out)
        layers = json.loads(metadata["layers"])
        self.assertTrue(all(layer["act_order"] for layer in layers))
        self.assertEqual(json.loads(metadata["full_precision"]), ["lm_head"])

    def test_flags_override_the_config(self):
        # The v1 checkpoint read as v2: zeros are off by one, so the weights must differ.
        src = self.copy_checkpoint("gptq_v1_asym_g64")
        out = self.path("out.safetensors")
        summary = self.tool_json("import", "auto", src, out, "--json", "--checkpoint-format", "gptq_v2")
        self.assertEqual(summary["source_format"], "gptq_v2")
        got = dequantize_layers(out)
        reference, _ = read_safetensors(os.path.join(WOQ_FIXTURES, "gptq_v1_asym_g64.reference.safetensors"))
        name = "model.layers.0.self_attn.q_proj.weight"
        self.assertFalse(torch.equal(got[name], reference[name]))

    def test_wrong_format_named_is_bad_input(self):
        src = self.copy_checkpoint("awq_gemm_g32")
        out = self.path("out.safetensors")
        result = self.run_tool("import", "gptq", src, out)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "model.layers")
        self.assertFalse(os.path.exists(out))

    def test_bad_checkpoints(self):
        for name, case in MANIFEST["bad"].items():
            with self.subTest(bad=name):
                src = self.copy_checkpoint(case["dir"])
                before = e2e.sha256(src)
                out = self.path(name + ".out.safetensors")
                result = self.run_tool("import", "auto", src, out)
                self.assert_error(result, case["code"], *case["words"])
                self.assertFalse(os.path.exists(out), f"{name}: output written on error")
                self.assertEqual(e2e.sha256(src), before)
        self.assert_no_stray_files(self.tmp, [os.path.basename(c["dir"]) for c in MANIFEST["bad"].values()])

    def test_usage_errors(self):
        src = self.copy_checkpoint("gptq_v1_sym_g32")
        self.assert_error(self.run_tool("import", "exl2", src, self.path("o")), e2e.EXIT_USAGE, "exl2")
        self.assert_error(self.run_tool("import", "auto", src, self.tmp), e2e.EXIT_USAGE, "directory")
        self.assert_error(self.run_tool("import", "auto", self.path("nope"), self.path("o")),
                          e2e.EXIT_BAD_INPUT, "nope")
        # A normalized checkpoint is not imported twice.
        out = self.path("once.safetensors")
        self.tool("import", "auto", src, out)
        self.assert_error(self.run_tool("import", "auto", out, self.path("twice.safetensors")),
                          e2e.EXIT_USAGE, "already")


if __name__ == "__main__":
    unittest.main()
