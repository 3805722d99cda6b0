#!/usr/bin/python3
"""torchvision's detection ops and detectors (tests/fixtures/make_detection_fixtures.py): the
ops against torchvision's own kernels over odd cases (in a Python process that loaded
torchvision first, whose kernels must stay torchvision's), the ops in a process without
torchvision (batched_nms as scripted), scripted detectors optimized onto the prepacked path and
verified (boxes, labels and scores in fp32), FrozenBatchNorm2d folded in scripted and traced
models, and crafted RoIAlign arguments refused with exit 3."""

import json
import os
import subprocess
import textwrap

import e2e_common as e2e

DET = os.path.join(e2e.FIXTURES, "detection")
FP32_MIN_COSINE = "0.99999"

# Compares ipex:: ops with torchvision::'s kernels; prints "ok" or raises.
AGAINST_TORCHVISION = textwrap.dedent("""
    import sys, torch, torchvision
    torch.ops.load_library(sys.argv[1])
    dump = torch._C._dispatch_dump("torchvision::roi_align")
    assert "torchvision/csrc" in dump and "detection_register" not in dump, dump
    tv, ipex = torch.ops.torchvision, torch.ops.ipex
    torch.manual_seed(0)
    def boxes(k, n, h, w):
        b = torch.rand(k, 4) * torch.tensor([w, h, w, h]) * 1.4 - 4  # some past the borders
        b[:, 2:] = b[:, :2] + torch.rand(k, 2) * 30
        b[: k // 8, 2:] = b[: k // 8, :2]  # empty boxes
        b[k // 8 : k // 4, :2] = 0  # on the top-left border
        return torch.cat([torch.randint(0, n, (k, 1)).float(), b], 1)
    for n, c, h, w, k in ((2, 37, 25, 31, 60), (1, 64, 7, 9, 5), (3, 130, 12, 10, 0), (1, 1, 1, 1, 3)):
        x = torch.randn(n, c, h, w)
        rois = boxes(k, n, h, w)
        for sr in (0, 1, 2, 3):
            for aligned in (False, True):
                for scale in (1.0, 0.25, 0.6):
                    want = tv.roi_align(x, rois, scale, 7, 5, sr, aligned)
                    for layout in (torch.contiguous_format, torch.channels_last):
                        got = ipex.roi_align(x.contiguous(memory_format=layout), rois, scale, 7, 5, sr, aligned)
                        assert got.shape == want.shape, (got.shape, want.shape)
                        if want.numel():
                            err = (got - want).abs().max().item()
                            assert err <= 1e-5 * (1 + want.abs().max().item()), \\
                                (n, c, h, w, k, sr, aligned, scale, layout, err)
                    # bf16 data: fp32 arithmetic on the bf16 values, one rounding of each output.
                    xb = x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
                    ref = tv.roi_align(xb.float(), rois, scale, 7, 5, sr, aligned)
                    got = ipex.roi_align(xb, rois, scale, 7, 5, sr, aligned).float()
                    assert ((got - ref).abs() <= 2 ** -8 * ref.abs() + 1e-6).all(), (sr, aligned, scale)
                ps_x = torch.randn(n, 2 * 3 * 3, h, w)
                a, am = tv.ps_roi_align(ps_x, rois, 0.5, 3, 3, sr)
                b, bm = ipex.ps_roi_align(ps_x, rois, 0.5, 3, 3, sr)
                assert torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True) and torch.equal(am, bm), sr
        a, am = tv.roi_pool(x, rois, 0.5, 4, 3)
        b, bm = ipex.roi_pool(x, rois, 0.5, 4, 3)
        assert torch.equal(a, b) and torch.equal(am, bm)
        xd = x.double()
        assert torch.equal(tv.roi_align(xd, rois.double(), 0.5, 3, 3, 0, True),
                           ipex.roi_align(xd, rois.double(), 0.5, 3, 3, 0, True))
    for trial in range(6):
        b = torch.rand(500, 4) * 100
        b[:, 2:] += b[:, :2]
        s = torch.rand(500)
        s[1::3] = s[0::3][: s[1::3].numel()]  # ties
        b[::7] = b[1::7][: b[::7].shape[0]]  # identical boxes
        for t in (0.0, 0.3, 0.5, 0.7, 1.0):
            for dtype in (torch.float32, torch.float64):
                want = tv.nms(b.to(dtype), s.to(dtype), t)
                got = ipex.nms(b.to(dtype), s.to(dtype), t)
                assert torch.equal(want, got), (trial, t, dtype)
    assert ipex.nms(torch.zeros(0, 4), torch.zeros(0), 0.5).shape == (0,)
    print("ok")
""")

# The torchvision:: names in a process without torchvision: scripted batched_nms runs on them.
WITHOUT_TORCHVISION = textwrap.dedent("""
    import sys, torch
    torch.ops.load_library(sys.argv[1])
    assert "torchvision" not in sys.modules
    assert "detection_register" in torch._C._dispatch_dump("torchvision::nms")
    nms = torch.jit.load(sys.argv[2] + "/batched_nms.pt")
    boxes, scores, idxs = torch.load(sys.argv[2] + "/nms_inputs.pt")
    assert torch.equal(nms(boxes, scores, idxs), torch.load(sys.argv[2] + "/nms_keep.pt"))
    print("ok")
""")


def manifest() -> dict:
    with open(os.path.join(DET, "detection_fixtures.json")) as f:
        return json.load(f)


class Detection(e2e.ToolTestCase):
    def python(self, script: str, *args) -> None:
        proc = subprocess.run([e2e.PYTHON, "-c", script, e2e.OPS_LIBRARY, *args], capture_output=True, text=True,
                              timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        self.assertEqual(proc.stdout.strip(), "ok", proc.stderr[-4000:])

    def test_ops_match_torchvision_kernels(self):
        self.python(AGAINST_TORCHVISION)

    def test_ops_without_torchvision(self):
        self.python(WITHOUT_TORCHVISION, DET)

    def optimized(self, name: str, image: str) -> dict:
        """Optimizes, verifies in fp32 and returns the report."""
        src = os.path.join(DET, f"{name}.pt")
        out = self.path(f"{name}.opt.pt")
        _, report = self.optimize(src, out)
        self.tool("verify", src, out, "--input", os.path.join(DET, image), "--min-cosine", FP32_MIN_COSINE)
        histogram = self.inspect(out)["op_histogram"]
        self.assertEqual(e2e.count_aten(histogram, ("conv2d", "_convolution")), 0, histogram)
        return report

    def test_mobilenet_detector_on_the_prepacked_path(self):
        report = self.optimized("mobilenet", "image320.pt")
        self.assertGreater(self.pass_entry(report, "fold_conv_bn")["count"], 0)
        self.assertGreaterEqual(self.pass_entry(report, "weights_prepack")["count"], manifest()["mobilenet"]["convs"])

    def test_frozen_batch_norm_folds_scripted(self):
        report = self.optimized("frozen_bn", "image256.pt")
        fold = self.pass_entry(report, "fold_conv_frozen_bn")
        self.assertEqual(fold["count"], 2 * manifest()["frozen_bn"]["frozen_bn"], fold)  # a mul and an add each
        self.assertEqual(fold["skipped"], [], fold)

    def test_frozen_batch_norm_folds_traced(self):
        report = self.optimized("frozen_bn_traced", "image64.pt")
        fold = self.pass_entry(report, "fold_conv_frozen_bn")
        self.assertEqual(fold["count"], 2 * manifest()["frozen_bn_traced"]["frozen_bn"], fold)

    def test_no_conv_bn_folding_keeps_frozen_batch_norm(self):
        out = self.path("kept.pt")
        _, report = self.optimize(os.path.join(DET, "frozen_bn_traced.pt"), out, "--no-conv-bn-folding")
        self.assertEqual(self.pass_entry(report, "fold_conv_frozen_bn")["status"], "disabled")

    def test_crafted_roi_align_arguments_exit_3(self):
        x = os.path.join(DET, "roi_input.pt")
        ok = os.path.join(DET, "roi_ok.pt")
        self.tool("verify", ok, ok, "--input", x, "--input", os.path.join(DET, "roi_rois.pt"))
        cases = (("roi_bad_sampling.pt", "roi_rois.pt", "sampling_ratio"),
                 ("roi_ok.pt", "roi_rois_rank.pt", "rois must be [K, 5]"),
                 ("roi_ok.pt", "roi_rois_batch.pt", "batch index"))
        for model, rois, mention in cases:
            with self.subTest(model=model, rois=rois):
                path = os.path.join(DET, model)
                result = self.run_tool("verify", path, path, "--input", x, "--input", os.path.join(DET, rois))
                self.assert_error(result, e2e.EXIT_BAD_INPUT, "roi_align", mention)


if __name__ == "__main__":
    e2e.main()
