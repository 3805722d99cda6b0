"""IPEX's published inference examples with only the import line changed
(`import ipex_tool as ipex` for `import intel_extension_for_pytorch as ipex`): ResNet-50 and a
BERT-shaped encoder in fp32 and bf16, with and without sample_input, TorchScript first or
after; outputs within the CLI's verify tolerances of the eager model. The weights are random
(torchvision's ResNets, no downloads); transformers is not a dependency, so the BERT examples
use a small encoder with the same calling convention (ids in, hidden states out)."""

import torch
import torchvision

from py_common import HAS_AVX512, NO_AVX512_REASON, TestCase, TinyEncoder, ipex, main, op_counts

import unittest


def resnet(name: str):
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


class Bert(TinyEncoder):
    """BertModel's convention for the examples: forward(input_ids) -> (last hidden state, pooled)."""

    def forward(self, ids):
        return super().forward(ids, torch.ones_like(ids))


class ImportOrder(TestCase):
    def test_torchvision_after_ipex_tool(self):
        """A script that imports ipex_tool before torchvision (IPEX's examples import it first)
        runs: the package loads torchvision's library before its own."""
        import os
        import subprocess
        import sys
        code = ("import ipex_tool, torchvision, torch\n"
                "assert 'torchvision' in torch._C._dispatch_dump('torchvision::nms')\n"
                "print('ok')")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok")


class ResNetExamples(TestCase):
    def test_resnet50_fp32_imperative(self):
        model = resnet("resnet50")
        data = torch.rand(1, 3, 224, 224)
        with torch.no_grad():
            want = model(data)
        #################### code changes ####################
        model = ipex.optimize(model)
        ######################################################
        with torch.no_grad():
            got = model(data)
        self.assert_close(got, want)
        ops = op_counts(model.optimized)
        self.assertEqual(ops["aten::_convolution"] + ops["aten::conv2d"] + ops["aten::batch_norm"], 0, ops)

    def test_resnet18_fp32_torchscript_after_optimize(self):
        model = resnet("resnet18")
        data = torch.rand(1, 3, 224, 224)
        with torch.no_grad():
            want = model(data)
        model = ipex.optimize(model)
        with torch.no_grad():
            d = torch.rand(1, 3, 224, 224)
            model = torch.jit.trace(model, d)
            model = torch.jit.freeze(model)
            got = model(data)
        self.assert_close(got, want)
        self.assertGreater(sum(n for k, n in op_counts(model).items() if k.startswith("ipex::conv")), 0)

    def test_resnet18_torchscript_first_with_sample_input(self):
        model = resnet("resnet18")
        data = torch.rand(2, 3, 224, 224)
        with torch.no_grad():
            want = model(data)
            model = torch.jit.trace(model, data)
        model = ipex.optimize(model, sample_input=data)
        with torch.no_grad():
            self.assert_close(model(data), want)

    @unittest.skipUnless(HAS_AVX512, NO_AVX512_REASON)
    def test_resnet50_bf16_torchscript(self):
        model = resnet("resnet50")
        data = torch.rand(1, 3, 224, 224)
        with torch.no_grad():
            want = model(data)
        model = ipex.optimize(model, dtype=torch.bfloat16)
        with torch.no_grad(), torch.cpu.amp.autocast():
            model = torch.jit.trace(model, torch.rand(1, 3, 224, 224))
            model = torch.jit.freeze(model)
            got = model(data)
        self.assert_close(got.float(), want, dtype="bf16")

    def test_resnet18_bf32_math_mode(self):
        ipex.set_fp32_math_mode(mode=ipex.FP32MathMode.BF32)
        try:
            model = resnet("resnet18")
            data = torch.rand(1, 3, 224, 224)
            with torch.no_grad():
                want = model(data)
            model = ipex.optimize(model, sample_input=data)
            with torch.no_grad():
                got = model(data)
        finally:
            ipex.set_fp32_math_mode(mode=ipex.FP32MathMode.FP32)
        self.assert_close(got, want, dtype="bf16")


class BertExamples(TestCase):
    def setUp(self):
        super().setUp()
        self.model = Bert(vocab=1000, hidden=64, heads=4, layers=2).eval()
        self.data = torch.randint(1000, size=[1, 64])
        with torch.no_grad():
            self.want = self.model(self.data)

    def test_bert_fp32_torchscript_after_optimize(self):
        model = ipex.optimize(self.model)
        with torch.no_grad():
            d = torch.randint(1000, size=[1, 64])
            model = torch.jit.trace(model, (d,), check_trace=False, strict=False)
            model = torch.jit.freeze(model)
            got = model(self.data)
        self.assert_close(got, self.want)
        self.assertEqual(op_counts(model)["ipex::attention"], 2)

    def test_bert_fp32_imperative_with_sample_input(self):
        model = ipex.optimize(self.model, sample_input=(self.data,))
        with torch.no_grad():
            self.assert_close(model(self.data), self.want)

    def test_bert_bf16_with_autocast(self):
        model = ipex.optimize(self.model, dtype=torch.bfloat16)
        with torch.no_grad(), torch.cpu.amp.autocast():
            d = torch.randint(1000, size=[1, 64])
            model = torch.jit.trace(model, (d,), check_trace=False, strict=False)
            model = torch.jit.freeze(model)
            got = model(self.data)
        self.assert_close(tuple(t.float() for t in got), self.want, dtype="bf16")


if __name__ == "__main__":
    main()
