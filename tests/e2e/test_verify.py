#!/usr/bin/python3
"""`ipex-tool verify A B`: JSON fields, per-dtype default tolerances, exit 1 when two models
disagree, inputs from shapes, integer SPECs, .npy and tuple files."""

import math

import e2e_common as e2e

FP32_MIN_COSINE = 0.99999
LOWP_MIN_COSINE = 0.999


class Verify(e2e.ToolTestCase):
    def test_same_model_json(self):
        model = self.copy_model("linear_bn")
        result = self.tool("verify", model, model, "--input", "4x16", "--json")
        data = result.json()
        for key in ("ok", "dtype", "tolerance", "outputs"):
            self.assertIn(key, data)
        self.assertIs(data["ok"], True)
        self.assertEqual(data["dtype"], "fp32")
        self.assertAlmostEqual(data["tolerance"]["min_cosine"], FP32_MIN_COSINE)
        self.assertIn("atol", data["tolerance"])
        self.assertIn("rtol", data["tolerance"])
        self.assertEqual(len(data["outputs"]), 1)
        out = data["outputs"][0]
        for key in ("name", "shape", "max_abs_err", "max_rel_err", "cosine",
                    "argmax_agreement", "ok"):
            self.assertIn(key, out)
        self.assertIsInstance(out["name"], str)
        self.assertEqual(out["shape"], [4, 8])
        self.assertEqual(out["max_abs_err"], 0)
        self.assertEqual(out["max_rel_err"], 0)
        self.assertAlmostEqual(out["cosine"], 1.0, places=6)
        self.assertEqual(out["argmax_agreement"], 1.0)  # 2-D output
        self.assertIs(out["ok"], True)

    def test_argmax_null_for_4d(self):
        model = self.copy_model("conv_bn_relu_2d")
        data = self.tool_json("verify", model, model, "--input", "2x3x32x32", "--json")
        self.assertEqual(data["outputs"][0]["shape"], [2, 4, 32, 32])
        self.assertIsNone(data["outputs"][0]["argmax_agreement"])

    def test_human_output(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.tool("verify", model, model, "--input", "2x3x32x32")
        self.assertTrue(result.stdout.strip())
        self.assertIn("cosine", result.stdout.lower())

    def test_different_models_fail(self):
        a = self.copy_model("conv_bn_relu_2d")
        b = self.copy_model("conv_bn_traced_2d")  # same shapes, other weights
        result = self.tool("verify", a, b, "--input", "2x3x32x32", "--json",
                           expect=e2e.EXIT_CHECK_FAILED)
        data = result.json()
        self.assertIs(data["ok"], False)
        self.assertIs(data["outputs"][0]["ok"], False)
        self.assertLess(data["outputs"][0]["cosine"], FP32_MIN_COSINE)
        self.assertGreater(data["outputs"][0]["max_abs_err"], 0)

    def test_different_models_fail_human(self):
        a = self.copy_model("conv_bn_relu_2d")
        b = self.copy_model("conv_bn_traced_2d")
        result = self.run_tool("verify", a, b, "--input", "2x3x32x32")
        self.assertEqual(result.code, e2e.EXIT_CHECK_FAILED, result.describe())
        self.assertNotEqual(result.stdout.strip() + result.stderr.strip(), "")

    def test_different_output_shapes_fail(self):
        a = self.copy_model("conv_bn_relu_2d")  # 4 output channels
        b = self.copy_model("bn_two_users")     # 6 output channels
        result = self.run_tool("verify", a, b, "--input", "2x3x32x32")
        self.assertEqual(result.code, e2e.EXIT_CHECK_FAILED, result.describe())

    def test_different_output_structure_fail(self):
        a = self.copy_model("dict_out")
        b = self.copy_model("list_out")
        result = self.run_tool("verify", a, b, "--input", "2x3x16x16")
        self.assertEqual(result.code, e2e.EXIT_CHECK_FAILED, result.describe())

    def test_min_cosine_option(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("bf16.pt")
        self.optimize(src, out, "--dtype", "bf16")
        data = self.tool_json("verify", src, out, "--input", "2x3x32x32", "--json")
        self.assertIs(data["ok"], True)
        self.assertEqual(data["dtype"], "bf16")
        self.assertAlmostEqual(data["tolerance"]["min_cosine"], LOWP_MIN_COSINE)
        cosine = data["outputs"][0]["cosine"]
        self.assertLess(cosine, 1.0)
        stricter = 1.0 - (1.0 - cosine) / 2
        data = self.tool_json("verify", src, out, "--input", "2x3x32x32", "--json",
                              "--min-cosine", repr(stricter), expect=e2e.EXIT_CHECK_FAILED)
        self.assertIs(data["ok"], False)
        self.assertAlmostEqual(data["tolerance"]["min_cosine"], stricter)

    def test_atol_option(self):
        src = self.copy_model("conv_bn_relu_2d")
        out = self.path("bf16.pt")
        self.optimize(src, out, "--dtype", "bf16")
        data = self.tool_json("verify", src, out, "--input", "2x3x32x32", "--json",
                              "--atol", "1e-9", "--rtol", "0", expect=e2e.EXIT_CHECK_FAILED)
        self.assertIs(data["ok"], False)
        self.assertAlmostEqual(data["tolerance"]["atol"], 1e-9)
        self.assertEqual(data["tolerance"]["rtol"], 0)
        loose = self.tool_json("verify", src, out, "--input", "2x3x32x32", "--json",
                               "--atol", "10", "--rtol", "1")
        self.assertIs(loose["ok"], True)

    def test_fp32_optimized_passes_default(self):
        src = self.copy_model("resnet18")
        out = self.path("resnet18.opt.pt")
        self.optimize(src, out)
        data = self.tool_json("verify", src, out, "--input", "1x3x64x64", "--json")
        self.assertIs(data["ok"], True)
        out0 = data["outputs"][0]
        self.assertEqual(out0["shape"], [1, 1000])
        self.assertGreaterEqual(out0["cosine"], FP32_MIN_COSINE)
        self.assertEqual(out0["argmax_agreement"], 1.0)
        self.assertTrue(math.isfinite(out0["max_rel_err"]))

    def test_two_inputs_from_specs(self):
        model = self.copy_model("two_in_two_out")
        data = self.tool_json("verify", model, model, "--input", "2x3x16x16", "--input", "2x8",
                              "--json")
        self.assertEqual([o["shape"] for o in data["outputs"]], [[2, 8, 16, 16], [2, 5]])

    def test_tuple_input_file(self):
        model = self.copy_model("two_in_two_out")
        inputs = self.copy_input("two_in_two_out")
        data = self.tool_json("verify", model, model, "--input", inputs, "--json")
        self.assertEqual(len(data["outputs"]), 2)

    def test_dict_and_list_outputs(self):
        for name, count in (("dict_out", 2), ("list_out", 3)):
            with self.subTest(model=name):
                model = self.copy_model(name)
                data = self.tool_json("verify", model, model, "--input", "2x3x16x16", "--json")
                self.assertEqual(len(data["outputs"]), count)
                names = [o["name"] for o in data["outputs"]]
                self.assertEqual(len(set(names)), count, f"output names not distinct: {names}")
                if name == "dict_out":
                    self.assertTrue(any("features" in n for n in names), names)
                    self.assertTrue(any("logits" in n for n in names), names)

    def test_int64_spec(self):
        model = self.copy_model("tiny_transformer")
        data = self.tool_json("verify", model, model, "--input", "2x16:int64:1000", "--json")
        self.assertIs(data["ok"], True)
        self.assertEqual(data["outputs"][0]["shape"], [2, 10])

    def test_int64_out_of_vocabulary_is_model_error(self):
        model = self.copy_model("tiny_transformer")
        result = self.run_tool("verify", model, model, "--input", "2x16:int64:5000")
        self.assertNotIn(result.code, (e2e.EXIT_OK, e2e.EXIT_INTERNAL), result.describe())
        self.assert_error(result, (e2e.EXIT_BAD_INPUT, e2e.EXIT_UNSUPPORTED))

    def test_npy_and_pt_inputs_agree(self):
        model = self.copy_model("conv_bn_relu_2d")
        npy = self.copy_fixture("input.npy")
        pt = self.copy_fixture("input.pt")
        for path in (npy, pt):
            with self.subTest(input=path):
                data = self.tool_json("verify", model, model, "--input", path, "--json")
                self.assertEqual(data["outputs"][0]["shape"], [2, 4, 32, 32])

    def test_control_flow_model(self):
        model = self.copy_model("control_flow")
        for spec in ("2x3x16x16", "1x3x8x8", "3x3x20x12"):
            with self.subTest(spec=spec):
                data = self.tool_json("verify", model, model, "--input", spec, "--json")
                self.assertIs(data["ok"], True)


if __name__ == "__main__":
    e2e.main()
