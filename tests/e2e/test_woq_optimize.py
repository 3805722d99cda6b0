"""optimize --low-precision-checkpoint / --woq-dtype: the tiny Llama-style decoder end to end
(import -> optimize -> outputs match the decoder holding the dequantized weights), the report's
replaced/missing/mismatched/unused/kept lists, partial checkpoints, round-to-nearest
quantization without a checkpoint, and the optimized model in Python with libipex_ops.so."""

import json
import os
import shutil
import subprocess
import unittest

import e2e_common as e2e
from woq_files import WOQ_FIXTURES, woq_manifest

DECODER = woq_manifest()["decoder"]
MIN_COSINE = "0.999"
OPS_LIB = os.environ.get("IPEX_OPS_LIB", "")


class WoqOptimizeTest(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.fp = self.copy_woq(DECODER["fp"])
        self.ref = self.copy_woq(DECODER["reference"])
        self.ids = self.copy_woq(DECODER["input"])
        self.ckpt = self.copy_woq(DECODER["checkpoint"])

    def copy_woq(self, rel: str) -> str:
        src, dst = os.path.join(WOQ_FIXTURES, rel), self.path(os.path.basename(rel))
        (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, dst)
        return dst

    def verify(self, model: str, reference: str, min_cosine: str = MIN_COSINE) -> float:
        report = self.tool_json("verify", model, reference, "--input", self.ids, "--min-cosine", min_cosine,
                                "--json")
        return report["outputs"][0]["cosine"]

    def test_import_then_optimize_matches_the_dequantized_decoder(self):
        normalized = self.path("decoder.woq.safetensors")
        self.tool("import", "auto", self.ckpt, normalized)
        fp_hash = e2e.sha256(self.fp)
        out = self.path("decoder_int4.pt")
        _, report = self.optimize(self.fp, out, "--low-precision-checkpoint", normalized)
        self.assertEqual(e2e.sha256(self.fp), fp_hash)
        woq = report["woq"]
        self.assertEqual(len(woq["replaced"]), DECODER["linears"])
        self.assertIn("model.layers.1.mlp.down_proj", woq["replaced"])
        self.assertEqual(woq["kept"], ["lm_head"])
        self.assertEqual((woq["missing"], woq["mismatched"], woq["unused"]), ([], [], []))
        self.assertEqual(self.pass_entry(report, "replace_woq_linear")["count"], DECODER["linears"])
        after = report["op_histogram"]["after"]
        self.assertEqual(after.get("ipex::woq_linear"), DECODER["linears"])
        # lm_head stays in full precision (a prepacked oneDNN linear, or aten's when not prepacked)
        full_precision = sum(after.get(op, 0) for op in ("aten::linear", "ipex::linear", "ipex::linear_binary"))
        self.assertEqual(full_precision, 1, after)
        self.assertGreater(self.verify(out, self.ref), 0.999)
        # The original fp weights are not the checkpoint's: the comparison can fail.
        result = self.run_tool("verify", self.fp, self.ref, "--input", self.ids, "--min-cosine", "0.9999")
        self.assertEqual(result.code, e2e.EXIT_CHECK_FAILED, result.describe())
        inspect = self.inspect(out)
        self.assertIn("ipex::woq_linear", json.dumps(inspect))

    def test_gptq_directory_directly_and_every_lowp_mode(self):
        for mode in ("fp32", "bf16", "int8", "auto"):
            with self.subTest(mode=mode):
                out = self.path(f"decoder_{mode}.pt")
                _, report = self.optimize(self.fp, out, "--low-precision-checkpoint", self.ckpt, "--lowp-mode", mode)
                self.assertIn(report["woq"]["lowp_mode"], ("fp32", "bf16", "int8"))
                if mode != "auto":
                    self.assertEqual(report["woq"]["lowp_mode"], mode)
                self.assertGreater(self.verify(out, self.ref), 0.999)

    def test_bf16_model_with_checkpoint(self):
        out = self.path("decoder_bf16.pt")
        _, report = self.optimize(self.fp, out, "--low-precision-checkpoint", self.ckpt, "--dtype", "bf16")
        self.assertEqual(report["woq"]["lowp_mode"], "bf16")
        self.assertGreater(self.verify(out, self.ref, "0.99"), 0.99)

    def test_checkpoint_of_another_model_is_an_error_unless_partial(self):
        other = self.copy_woq("gptq_v1_sym_g32")
        out = self.path("o.pt")
        result = self.run_tool("optimize", self.fp, out, "--low-precision-checkpoint", other)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "does not fit", "model.layers.0.self_attn.k_proj",
                          "--allow-partial")
        self.assertFalse(os.path.exists(out))
        self.assert_no_stray_files(self.tmp, os.listdir(self.tmp))
        _, report = self.optimize(self.fp, out, "--low-precision-checkpoint", other, "--allow-partial")
        woq = report["woq"]
        # Same module paths, other shapes (q_proj is [64, 64] here, [64, 128] there).
        self.assertEqual(sorted(m.split(":")[0] for m in woq["mismatched"]),
                         ["model.layers.0.mlp.down_proj", "model.layers.0.self_attn.q_proj",
                          "model.layers.1.mlp.up_proj"])
        self.assertIn("model.layers.0.self_attn.k_proj", woq["missing"])
        self.assertEqual((woq["replaced"], woq["unused"], woq["kept"]), ([], [], ["lm_head"]))
        self.assertNotIn("ipex::woq_linear", report["op_histogram"]["after"])

    def test_checkpoint_layers_no_linear_uses_are_listed(self):
        model = self.copy_model("concat_linear")
        out = self.path("o.pt")
        result = self.run_tool("optimize", model, out, "--low-precision-checkpoint", self.ckpt)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "no Linear uses", "model.layers.0.mlp.down_proj")
        self.assertFalse(os.path.exists(out))
        _, report = self.optimize(model, out, "--low-precision-checkpoint", self.ckpt, "--allow-partial")
        self.assertEqual(len(report["woq"]["unused"]), DECODER["linears"])
        self.assertEqual(report["woq"]["replaced"], [])
        self.assertGreater(len(report["woq"]["missing"]), 0)

    def test_round_to_nearest_without_checkpoint(self):
        for dtype, group, min_cos in (("int4", "32", "0.97"), ("int8", "-1", "0.999")):
            with self.subTest(dtype=dtype):
                out = self.path(f"rtn_{dtype}.pt")
                _, report = self.optimize(self.fp, out, "--woq-dtype", dtype, "--group-size", group)
                self.assertEqual(len(report["woq"]["replaced"]), DECODER["linears"] + 1)  # with lm_head
                self.assertNotIn("aten::linear", report["op_histogram"]["after"])
                self.assertGreater(self.verify(out, self.fp, min_cos), float(min_cos))
        # A group size that divides no Linear's input channels leaves every Linear alone.
        out = self.path("rtn_48.pt")
        _, report = self.optimize(self.fp, out, "--woq-dtype", "int4", "--group-size", "48")
        self.assertEqual(report["woq"]["replaced"], [])
        self.assertEqual(len(report["woq"]["skipped"]), DECODER["linears"] + 1)

    def test_flag_errors(self):
        out = self.path("o.pt")
        cases = [
            (("--lowp-mode", "int8"), e2e.EXIT_USAGE, "--lowp-mode"),
            (("--group-size", "32"), e2e.EXIT_USAGE, "--group-size"),
            (("--allow-partial",), e2e.EXIT_USAGE, "--allow-partial"),
            (("--woq-dtype", "int4", "--low-precision-checkpoint", self.ckpt), e2e.EXIT_USAGE, "--woq-dtype"),
            (("--woq-dtype", "int2"), e2e.EXIT_USAGE, "int2"),
            (("--woq-dtype", "int4", "--portable"), e2e.EXIT_USAGE, "--portable"),
            (("--low-precision-checkpoint", self.path("missing.safetensors")), e2e.EXIT_BAD_INPUT, "missing"),
            (("--low-precision-checkpoint", self.ids), e2e.EXIT_BAD_INPUT, "safetensors"),
        ]
        for flags, code, word in cases:
            with self.subTest(flags=flags):
                self.assert_error(self.run_tool("optimize", self.fp, out, *flags), code, word)
                self.assertFalse(os.path.exists(out))

    def test_runs_in_python_with_the_ops_library(self):
        self.assertTrue(os.path.isfile(OPS_LIB), f"IPEX_OPS_LIB ({OPS_LIB!r}) names no file: run through ctest")
        out = self.path("decoder_int4.pt")
        self.optimize(self.fp, out, "--low-precision-checkpoint", self.ckpt)
        script = (
            "import sys, torch\n"
            "torch.ops.load_library(sys.argv[1])\n"
            "m = torch.jit.load(sys.argv[2]); ref = torch.jit.load(sys.argv[3]); ids = torch.load(sys.argv[4])\n"
            "with torch.no_grad():\n"
            "    a, b = m(ids).flatten(), ref(ids).flatten()\n"
            "cos = torch.nn.functional.cosine_similarity(a, b, dim=0).item()\n"
            "print(cos); sys.exit(0 if cos > 0.999 else 1)\n")
        proc = subprocess.run([e2e.PYTHON, "-c", script, OPS_LIB, out, self.ref, self.ids],
                              capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
