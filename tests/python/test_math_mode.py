"""ipex_tool.set_fp32_math_mode / get_fp32_math_mode / FP32MathMode: the process's mode, used by
the models optimize writes afterwards."""

import warnings

import torch

from py_common import HAS_AVX512, ConvBnRelu, TestCase, ipex, main


def prepack_math(optimized) -> str:
    return next(p for p in optimized.ipex_tool_report["passes"] if p["name"] == "weights_prepack")["fp32_math_mode"]


class MathMode(TestCase):
    def tearDown(self):
        ipex.set_fp32_math_mode(ipex.FP32MathMode.FP32)
        super().tearDown()

    def test_default_is_fp32_and_set_get_round_trip(self):
        self.assertEqual(ipex.get_fp32_math_mode(), ipex.FP32MathMode.FP32)
        ipex.set_fp32_math_mode(mode=ipex.FP32MathMode.BF32)
        self.assertEqual(ipex.get_fp32_math_mode(), ipex.FP32MathMode.BF32)
        ipex.set_fp32_math_mode()  # IPEX's default argument: FP32
        self.assertEqual(ipex.get_fp32_math_mode(device="cpu"), ipex.FP32MathMode.FP32)

    def test_bad_modes(self):
        with self.assertRaisesRegex(ValueError, "TF32 is a GPU mode"):
            ipex.set_fp32_math_mode(ipex.FP32MathMode.TF32)
        with self.assertRaisesRegex(ValueError, "not an FP32MathMode"):
            ipex.set_fp32_math_mode(7)
        with self.assertRaisesRegex(ValueError, "device 'xpu'"):
            ipex.set_fp32_math_mode(ipex.FP32MathMode.BF32, device="xpu")
        self.assertEqual(ipex.get_fp32_math_mode(), ipex.FP32MathMode.FP32)

    def test_optimize_uses_the_mode(self):
        model = ConvBnRelu().eval()
        x = torch.randn(2, 3, 16, 16)
        self.assertEqual(prepack_math(ipex.optimize(model, sample_input=x)), "fp32")
        ipex.set_fp32_math_mode(ipex.FP32MathMode.BF32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimized = ipex.optimize(model, sample_input=x)
        with torch.no_grad():
            self.assert_close(optimized(x), model(x), dtype="bf16")
        if HAS_AVX512:
            self.assertEqual(prepack_math(optimized), "bf32")
        else:  # oneDNN 2.6 has no bf32 here: strict fp32, said in a warning
            self.assertEqual(prepack_math(optimized), "fp32")
            self.assertTrue(any("bf32" in w for w in self.ipex_warnings(caught)), caught)


if __name__ == "__main__":
    main()
