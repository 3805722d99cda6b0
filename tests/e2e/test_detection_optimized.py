#!/usr/bin/python3
"""An optimized torchvision detector (tests/fixtures/make_detection_fixtures.py) calls the ops
library's ipex:: detection ops, not torchvision::'s names: in a Python process that imported
torchvision first (whose kernels own those names) it still runs ours, with torchvision's results;
optimize --sample-input runs a detector (its image as the one-image list); with --dtype bf16
RoIAlign takes the bf16 feature maps as they are (cast_to_lowp keeps no fp32 cast for it)."""

import json
import os
import subprocess
import textwrap

import e2e_common as e2e

DET = os.path.join(e2e.FIXTURES, "detection")
TORCHVISION_OPS = ("roi_align", "nms", "ps_roi_align", "roi_pool")

# The optimized detector against the original, both in a process where torchvision's library
# defines torchvision::'s names; prints "ok" or raises.
UNDER_TORCHVISION = textwrap.dedent("""
    import sys, torch, torchvision
    torch.ops.load_library(sys.argv[1])
    assert "torchvision/csrc" in torch._C._dispatch_dump("torchvision::roi_align")
    original, optimized = torch.jit.load(sys.argv[2]), torch.jit.load(sys.argv[3])
    graph = optimized.graph
    assert graph.findAllNodes("ipex::roi_align", True) and graph.findAllNodes("ipex::nms", True)
    for op in ("roi_align", "nms", "ps_roi_align", "roi_pool"):
        assert not graph.findAllNodes("torchvision::" + op, True), op
    image = torch.load(sys.argv[4])
    with torch.no_grad():
        want, got = original([image])[1][0], optimized([image])[1][0]
    assert torch.equal(want["labels"], got["labels"]), (want["labels"][:10], got["labels"][:10])
    assert torch.allclose(want["boxes"], got["boxes"], rtol=1e-4, atol=1e-3)
    assert torch.allclose(want["scores"], got["scores"], rtol=1e-4, atol=1e-5)
    print("ok")
""")


class DetectionOptimized(e2e.ToolTestCase):
    def torchvision_ops(self, histogram: dict) -> int:
        return sum(histogram.get(f"torchvision::{op}", 0) for op in TORCHVISION_OPS)

    def test_optimized_detector_runs_ipex_ops_under_torchvision(self):
        src = os.path.join(DET, "mobilenet.pt")
        out = self.path("mobilenet.opt.pt")
        image = os.path.join(DET, "image320.pt")
        _, report = self.optimize(src, out, "--sample-input", image)
        before, after = self.inspect(src)["op_histogram"], self.inspect(out)["op_histogram"]
        replaced = self.pass_entry(report, "replace_torchvision_ops")["count"]
        self.assertGreater(replaced, 0, report)
        self.assertEqual(replaced, self.torchvision_ops(before), before)
        self.assertEqual(self.torchvision_ops(after), 0, after)
        self.assertEqual(after.get("ipex::roi_align"), before.get("torchvision::roi_align"), after)
        self.assertEqual(after.get("ipex::nms"), before.get("torchvision::nms"), after)
        proc = subprocess.run([e2e.PYTHON, "-c", UNDER_TORCHVISION, e2e.OPS_LIBRARY, src, out, image],
                              capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        self.assertEqual(proc.stdout.strip(), "ok", proc.stderr[-4000:])

    def test_sample_input_of_two_images(self):
        out = self.path("mobilenet.opt.pt")
        image = os.path.join(DET, "image320.pt")
        self.optimize(os.path.join(DET, "mobilenet.pt"), out, "--sample-input", image, "--sample-input", image)

    def test_portable_keeps_torchvision_names(self):
        out = self.path("portable.pt")
        _, report = self.optimize(os.path.join(DET, "mobilenet.pt"), out, "--portable")
        self.assertEqual(self.pass_entry(report, "replace_torchvision_ops")["status"], "disabled")
        self.assertGreater(self.torchvision_ops(self.inspect(out)["op_histogram"]), 0)

    def test_bf16_roi_align_reads_bf16_feature_maps(self):
        out = self.path("mobilenet.bf16.pt")
        _, report = self.optimize(os.path.join(DET, "mobilenet.pt"), out, "--dtype", "bf16")
        self.assertGreater(self.pass_entry(report, "replace_torchvision_ops")["count"], 0)
        cast = self.pass_entry(report, "cast_to_lowp")
        self.assertGreater(cast["count"], 0, cast)
        kept_fp32 = [note for note in cast["skipped"] if "roi_align" in note]
        self.assertEqual(kept_fp32, [], cast["skipped"])


if __name__ == "__main__":
    e2e.main()
