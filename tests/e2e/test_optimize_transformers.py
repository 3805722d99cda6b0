#!/usr/bin/python3
"""optimize on traced transformers (tests/fixtures/make_transformer_fixtures.py): PyTorch's fused
inference ops (encoder layer, nested-tensor encoder, multi-head attention, ViT) are decomposed,
hand-written attention (BERT, GPT-2 with Conv1D addmm and a causal where, einsum) loses every
aten matmul; the result matches the original (fp32 cosine >= 0.99999, bf16 >= 0.999) and
reloads in Python with the ops library."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common as e2e  # noqa: E402

FIXTURE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                              "make_transformer_fixtures.py")
MIN_COSINE = {"fp32": 0.99999, "bf16": 0.999}

PYTHON_RELOAD = r"""
import sys, torch
torch.ops.load_library(sys.argv[1])
original, optimized = torch.jit.load(sys.argv[2]), torch.jit.load(sys.argv[3])
inputs = torch.load(sys.argv[4])
def flat(v):
    return [t for x in v for t in flat(x)] if isinstance(v, (tuple, list)) else [v]
with torch.no_grad():
    want, got = flat(original(*inputs)), flat(optimized(*inputs))
cos = min(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0).item()
          for a, b in zip(want, got))
print(cos)
"""

_fixtures = None
# Fixtures whose attention stays unfused: need_weights returns the weights.
UNFUSED = {"mha_need_weights"}


def fixtures() -> dict:
    global _fixtures
    if _fixtures is None:
        out = tempfile.mkdtemp(prefix="ipex-transformers-")
        subprocess.run([e2e.PYTHON, FIXTURE_SCRIPT, out], check=True, capture_output=True, timeout=600)
        with open(os.path.join(out, "transformers.json")) as f:
            _fixtures = json.load(f)
    return _fixtures


class OptimizeTransformers(e2e.ToolTestCase):
    def optimize_and_check(self, name: str, dtype: str):
        spec = fixtures()[name]
        src = spec["file"]
        before = self.inspect(src)["op_histogram"]
        for op in spec["fused_before"]:
            self.assertIn(op, before)
        out = self.path(f"{name}.{dtype}.pt")
        _, report = self.optimize(src, out, "--dtype", dtype)
        info = self.inspect(out)
        after = info["op_histogram"]
        # inspect shows what optimize rewrote, as the report counted it, and the ipex ops.
        for entry in report["passes"]:
            if entry["status"] == "applied" and entry["count"] > 0:
                self.assertEqual(info["rewrites"].get(entry["name"]), entry["count"], info["rewrites"])
        self.assertEqual(info["ipex_ops"], {op: n for op, n in after.items() if op.startswith("ipex::")})
        for op in spec["absent_after"]:
            self.assertNotIn(op, after, f"{name} {dtype}: {op} left; {after}")
        fused = self.pass_entry(report, "fuse_attention")
        if name in UNFUSED:
            # The weights are returned too: the products run as
            # ipex::matmul and the report says why the softmax stayed.
            self.assertNotIn("ipex::attention", after)
            self.assertGreaterEqual(after.get("ipex::matmul", 0), 2, after)
            self.assertTrue(fused["skipped"], fused)
        else:
            # Every attention becomes one ipex::attention: no softmax or product of
            # activations left.
            self.assertGreater(after.get("ipex::attention", 0), 0, after)
            for op in ("aten::softmax", "aten::matmul", "aten::bmm"):
                self.assertNotIn(op, after, f"{name} {dtype}: {op} left; {after}")
            # ipex::matmul only for linears whose weight is computed at run time (the decoder's
            # cross-attention splits its in-projection by the query's size).
            prepack = self.pass_entry(report, "weights_prepack")
            moved = (prepack.get("details") or {}).get("non_constant_weights_to_ipex_matmul", 0)
            self.assertEqual(after.get("ipex::matmul", 0), moved, prepack)
            self.assertEqual(fused["count"], after["ipex::attention"], fused)
        # Every layer norm runs as the fused op (with its residual add where there is one).
        norms = self.pass_entry(report, "fuse_layer_norm")
        self.assertNotIn("aten::layer_norm", after, f"{name} {dtype}: aten::layer_norm left; {after}")
        self.assertEqual(after.get("ipex::layer_norm", 0) + after.get("ipex::add_layer_norm", 0),
                         norms["count"], norms)
        if spec["fused_before"]:
            entry = self.pass_entry(report, "decompose_transformer_layer")
            self.assertGreater(entry["count"], 0, entry)
            self.assertEqual(entry["skipped"], [], entry)
        self.assertEqual(self.pass_entry(report, "replace_matmul")["status"], "applied")
        verify = self.tool_json("verify", src, out, "--input", spec["input_file"], "--min-cosine",
                                str(MIN_COSINE[dtype]), "--json")
        self.assertTrue(verify["ok"], verify)
        return src, out, spec

    def test_models(self):
        for name in fixtures():
            for dtype in ("fp32", "bf16"):
                with self.subTest(model=name, dtype=dtype):
                    if dtype == "bf16" and not e2e.ONEDNN_BF16:
                        self.skipTest(e2e.NO_ONEDNN_BF16)
                    self.optimize_and_check(name, dtype)

    def test_inspect_text_lists_rewrites(self):
        src, out, _ = self.optimize_and_check("encoder_padded", "fp32")
        text = self.tool("inspect", out).stdout
        line = [l for l in text.splitlines() if l.startswith("rewrites:")]
        self.assertEqual(len(line), 1, text)
        for name in ("decompose_transformer_layer", "fuse_attention", "weights_prepack"):
            self.assertIn(name, line[0])
        self.assertNotIn("rewrites:", self.tool("inspect", src).stdout)

    def test_reloads_in_python(self):
        src, out, spec = self.optimize_and_check("encoder_padded", "bf16")
        proc = subprocess.run([e2e.PYTHON, "-c", PYTHON_RELOAD, e2e.OPS_LIBRARY, src, out, spec["input_file"]],
                              capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertGreater(float(proc.stdout.strip().splitlines()[-1]), MIN_COSINE["bf16"])

    def test_portable_keeps_aten_matmuls(self):
        spec = fixtures()["bert_attention"]
        out = self.path("portable.pt")
        _, report = self.optimize(spec["file"], out, "--dtype", "bf16", "--portable")
        self.assertEqual(self.pass_entry(report, "replace_matmul")["status"], "disabled")
        self.assertEqual(self.pass_entry(report, "fuse_attention")["status"], "disabled")
        after = self.inspect(out)["op_histogram"]
        self.assertNotIn("ipex::matmul", after)
        self.assertNotIn("ipex::attention", after)

    def test_no_fuse_attention_keeps_products_on_onednn(self):
        spec = fixtures()["gpt2_block"]
        out = self.path("unfused.pt")
        _, report = self.optimize(spec["file"], out, "--dtype", "bf16", "--no-fuse-attention")
        self.assertEqual(self.pass_entry(report, "fuse_attention")["status"], "disabled")
        after = self.inspect(out)["op_histogram"]
        self.assertNotIn("ipex::attention", after)
        self.assertGreaterEqual(after.get("ipex::matmul", 0), 2, after)
        verify = self.tool_json("verify", spec["file"], out, "--input", spec["input_file"], "--min-cosine",
                                str(MIN_COSINE["bf16"]), "--json")
        self.assertTrue(verify["ok"], verify)


if __name__ == "__main__":
    e2e.main()
