#!/usr/bin/python3
"""DLRM-style models (tests/fixtures/make_recsys_fixtures.py), scripted and traced: optimize merges
the EmbeddingBag tables into one ipex::merged_embedding_bag and the dot interaction into one
ipex::interaction (op counts before and after), the outputs equal the eager model's in fp32
(<= 1e-5 relative) and stay close in bf16; --embedding-int8 stores the tables as uint8 rows (the
report's table bytes, verify's note and tolerance); a model that already calls aten's byte
row-wise op merges as it is; crafted inputs (offsets that decrease, an index past its table)
exit 3 naming the op."""

import json
import os
import subprocess
import textwrap

import e2e_common as e2e

RECSYS = os.path.join(e2e.FIXTURES, "recsys")
INPUTS = ("dense.pt", "indices.pt", "offsets.pt")
FP32_RELATIVE = 1e-5
BF16_MIN_COSINE = "0.999"

# The optimized model's output against the eager model's (saved by the fixture); prints the
# largest error relative to the largest output.
AGAINST_EAGER = textwrap.dedent("""
    import sys, torch
    torch.ops.load_library(sys.argv[1])
    model, expected, inputs = sys.argv[2], sys.argv[3], sys.argv[4:]
    got = torch.jit.load(model)(*[torch.load(f) for f in inputs])
    want = torch.load(expected)
    print(((got - want).abs().max() / want.abs().max()).item())
""")


# Scripted models that call the ops with a crafted argument (what a damaged or hand-edited
# optimized model would hold), and their inputs, written to argv[2].
CRAFTED = textwrap.dedent("""
    import os, sys, torch
    from typing import List, Optional
    torch.ops.load_library(sys.argv[1])
    out = sys.argv[2]

    class Bags(torch.nn.Module):
        def __init__(self, mode: int, padding: int):
            super().__init__()
            self.mode, self.padding = mode, padding
            self.table = torch.nn.Parameter(torch.randn(10, 4))

        def forward(self, indices, offsets):
            weights: List[Optional[torch.Tensor]] = [None]
            return torch.ops.ipex.merged_embedding_bag([self.table], [indices], [offsets], weights, [self.padding],
                                                       self.mode, False, None)[0]

    class Pairs(torch.nn.Module):
        def forward(self, x, y):
            return torch.ops.ipex.interaction([x, y], None, torch.tensor([1, 2]), torch.tensor([0, 0]), 0, None)

    torch.jit.script(Bags(2, -1)).save(os.path.join(out, "bad_mode.pt"))
    torch.jit.script(Bags(0, 99)).save(os.path.join(out, "bad_padding.pt"))
    torch.jit.script(Pairs()).save(os.path.join(out, "bad_pairs.pt"))
    torch.save(torch.tensor([1, 2, 3]), os.path.join(out, "indices.pt"))
    torch.save(torch.tensor([0, 1]), os.path.join(out, "offsets.pt"))
    torch.save(torch.randn(2, 4), os.path.join(out, "features.pt"))
""")


def manifest() -> dict:
    with open(os.path.join(RECSYS, "recsys_fixtures.json")) as f:
        return json.load(f)


def inputs(*names) -> list:
    args = []
    for name in names:
        args += ["--input", os.path.join(RECSYS, name)]
    return args


class Recsys(e2e.ToolTestCase):
    def relative_error_to_eager(self, model: str, name: str) -> float:
        proc = subprocess.run([e2e.PYTHON, "-c", AGAINST_EAGER, e2e.OPS_LIBRARY, model,
                               os.path.join(RECSYS, f"{name}.expected.pt"), *[os.path.join(RECSYS, f) for f in INPUTS]],
                              capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        return float(proc.stdout.strip())

    def fused(self, name: str, *flags) -> str:
        """Optimizes; checks the passes' counts and the op histogram; returns the output path."""
        return self.fused_with_report(name, *flags)[0]

    def fused_with_report(self, name: str, *flags):
        src = os.path.join(RECSYS, f"{name}.pt")
        out = self.path(f"{name}.opt.pt")
        _, report = self.optimize(src, out, *flags)
        self.assertEqual(self.pass_entry(report, "merge_embedding_bags")["count"], 1, report)
        self.assertEqual(self.pass_entry(report, "merge_embedding_bags")["details"]["tables"],
                         manifest()[name]["tables"])
        self.assertEqual(self.pass_entry(report, "fuse_interaction")["count"], 1, report)
        before = self.inspect(src)["op_histogram"]
        after = self.inspect(out)["op_histogram"]
        bags = before.get("quantized::embedding_bag_byte_rowwise_offsets", 0) + e2e.count_aten(before, ("embedding_bag",))
        self.assertEqual(bags, manifest()[name]["tables"], before)
        self.assertEqual(e2e.count_aten(after, ("embedding_bag", "bmm", "index")), 0, after)
        self.assertNotIn("quantized::embedding_bag_byte_rowwise_offsets", after)
        self.assertEqual(after.get("ipex::merged_embedding_bag"), 1, after)
        self.assertEqual(after.get("ipex::interaction"), 1, after)
        return out, report

    def test_scripted_dlrm_fp32(self):
        out = self.fused("dlrm_scripted")
        self.assertLessEqual(self.relative_error_to_eager(out, "dlrm_scripted"), FP32_RELATIVE)

    def test_traced_dlrm_fp32(self):
        out = self.fused("dlrm_traced")
        self.assertLessEqual(self.relative_error_to_eager(out, "dlrm_traced"), FP32_RELATIVE)

    def test_other_forms(self):
        """Scripted stack + bmm + index tensors and stack + tril_indices fuse; the traced loop of dot
        products merges its tables, and the report says why its interaction stays."""
        for name in ("dlrm_scripted_stack", "dlrm_scripted_tril"):
            with self.subTest(model=name):
                out = self.fused(name)
                self.assertLessEqual(self.relative_error_to_eager(out, name), FP32_RELATIVE)
        src = os.path.join(RECSYS, "dlrm_traced_loop.pt")
        out = self.path("dlrm_traced_loop.opt.pt")
        _, report = self.optimize(src, out)
        self.assertEqual(self.pass_entry(report, "merge_embedding_bags")["count"], 1, report)
        fuse = self.pass_entry(report, "fuse_interaction")
        self.assertEqual(fuse["count"], 0, report)
        self.assertTrue(any("one dot product a pair" in why for why in fuse["skipped"]), fuse)
        self.assertLessEqual(self.relative_error_to_eager(out, "dlrm_traced_loop"), FP32_RELATIVE)

    def test_bf16(self):
        for name in ("dlrm_scripted", "dlrm_traced"):
            with self.subTest(model=name):
                out = self.fused(name, "--dtype", "bf16")
                self.tool("verify", os.path.join(RECSYS, f"{name}.pt"), out, *inputs(*INPUTS),
                          "--min-cosine", BF16_MIN_COSINE)

    def test_embedding_int8(self):
        for name in ("dlrm_scripted", "dlrm_traced"):
            with self.subTest(model=name):
                out, report = self.fused_with_report(name, "--embedding-int8")
                details = self.pass_entry(report, "merge_embedding_bags")["details"]
                self.assertEqual(details["uint8_tables"], manifest()[name]["tables"], details)
                # dim 16: 4 * 16 bytes a row in fp32, 16 + 8 in uint8.
                self.assertEqual(details["table_bytes_after"] * 64, details["table_bytes_before"] * 24, details)
                result = self.tool("verify", os.path.join(RECSYS, f"{name}.pt"), out, *inputs(*INPUTS), "--json")
                self.assertIn("uint8 rows", result.json()["note"])
                self.assertEqual(result.json()["tolerance"]["min_cosine"], 0.999)

    def test_byte_rowwise_model(self):
        out = self.fused("dlrm_byte")
        self.assertLessEqual(self.relative_error_to_eager(out, "dlrm_byte"), FP32_RELATIVE)

    def test_portable_keeps_aten(self):
        out = self.path("portable.pt")
        _, report = self.optimize(os.path.join(RECSYS, "dlrm_scripted.pt"), out, "--portable")
        self.assertEqual(self.pass_entry(report, "merge_embedding_bags")["status"], "disabled")
        self.assertEqual(self.inspect(out)["op_histogram"].get("aten::embedding_bag"), 4)

    def test_crafted_inputs_exit_3(self):
        out = self.fused("dlrm_traced")
        cases = (("offsets_decreasing.pt", "indices.pt", "offsets must not decrease"),
                 ("offsets.pt", "indices_outside.pt", "index 999"))
        for offsets, indices, mention in cases:
            with self.subTest(offsets=offsets, indices=indices):
                result = self.run_tool("verify", out, out, *inputs("dense.pt", indices, offsets))
                self.assert_error(result, e2e.EXIT_BAD_INPUT, "merged_embedding_bag", mention)

    def test_crafted_op_arguments_exit_3(self):
        script = self.path("craft.py")  # torch.jit.script reads the classes' source from a file
        with open(script, "w") as f:
            f.write(CRAFTED)
        proc = subprocess.run([e2e.PYTHON, script, e2e.OPS_LIBRARY, self.tmp], capture_output=True, text=True,
                              timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        bags = ("--input", self.path("indices.pt"), "--input", self.path("offsets.pt"))
        features = ("--input", self.path("features.pt"), "--input", self.path("features.pt"))
        cases = (("bad_mode.pt", bags, "merged_embedding_bag", "mode must be 0 (sum) or 1 (mean)"),
                 ("bad_padding.pt", bags, "merged_embedding_bag", "padding_idx 99"),
                 ("bad_pairs.pt", features, "interaction", "rows[1] = 2"))
        for model, args, op, mention in cases:
            with self.subTest(model=model):
                path = self.path(model)
                self.assert_error(self.run_tool("verify", path, path, *args), e2e.EXIT_BAD_INPUT, op, mention)


if __name__ == "__main__":
    e2e.main()
