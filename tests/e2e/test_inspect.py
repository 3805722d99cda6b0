#!/usr/bin/python3
"""`ipex-tool inspect`: JSON fields on every fixture, checked against what PyTorch itself
says about the same file."""

import torch

import e2e_common as e2e

KEYS = ("file", "methods", "forward_schema", "op_histogram", "parameters", "submodules",
        "frozen", "training", "custom_ops", "needs_ops_library", "runs_on", "ipex")


def python_facts(path: str) -> dict:
    module = torch.jit.load(path)
    params = list(module.parameters())
    buffers = list(module.buffers())
    return {
        "param_elements": sum(p.numel() for p in params),
        "all_elements": sum(t.numel() for t in params + buffers),
        "training": module.training,
        "has_forward": hasattr(module, "forward"),
    }


class Inspect(e2e.ToolTestCase):
    def _model(self, name: str):
        entry = e2e.MODELS[name]
        path = self.copy_model(name)
        info = self.inspect(path)
        facts = python_facts(path)
        for key in KEYS:
            self.assertIn(key, info)
        self.assertTrue(info["file"].endswith(entry["file"]), info["file"])
        self.assertIn("forward", info["methods"])
        self.assertIsInstance(info["forward_schema"], str)
        self.assertIn("forward", info["forward_schema"])

        hist = info["op_histogram"]
        self.assertIsInstance(hist, dict)
        self.assertTrue(hist, "empty op histogram")
        for op, count in hist.items():
            self.assertIsInstance(count, int, op)
            self.assertGreater(count, 0, op)
        expect = entry["expect"]
        if expect["batch_norm_modules"]:
            self.assertGreaterEqual(e2e.count_ops(hist, e2e.BATCH_NORM_OPS),
                                    expect["batch_norm_modules"], "batch_norm ops in histogram")
        if expect["dropout_before"]:
            self.assertGreaterEqual(e2e.count_ops(hist, e2e.DROPOUT_OPS), 1,
                                    "dropout ops in histogram")
        if expect["conv_before"]:
            self.assertGreaterEqual(
                e2e.count_ops(hist, ("conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                     "conv_transpose2d", "conv_transpose3d", "_convolution")),
                1, "convolutions in histogram")

        params = info["parameters"]
        self.assertIsInstance(params["count"], int)
        self.assertIsInstance(params["bytes"], int)
        by_dtype = params["by_dtype"]
        self.assertEqual(sum(v["count"] for v in by_dtype.values()), params["count"])
        self.assertEqual(sum(v["bytes"] for v in by_dtype.values()), params["bytes"])
        self.assertGreaterEqual(params["count"], facts["param_elements"])
        # Buffers may be counted, and tensor constants a trace captured (a few scalars).
        self.assertLessEqual(params["count"], facts["all_elements"] + 16)
        if facts["param_elements"]:
            self.assertIn("fp32", by_dtype)
            self.assertEqual(by_dtype["fp32"]["bytes"], 4 * by_dtype["fp32"]["count"])

        self.assertIsInstance(info["submodules"], dict)
        self.assertIs(info["frozen"], False)
        self.assertIs(info["training"], facts["training"])
        self.assertIs(info["training"], entry["training"])
        self.assertEqual(info["custom_ops"], [])
        self.assertIs(info["needs_ops_library"], False)
        self.assertEqual(info["runs_on"], "stock")
        self.assertIsNone(info["ipex"])

    @staticmethod
    def _by_class(submodules: dict) -> dict:
        counts = {}
        for key, n in submodules.items():
            name = key.rsplit(".", 1)[-1]
            counts[name] = counts.get(name, 0) + n
        return counts

    def test_submodule_types(self):
        info = self.inspect(self.copy_model("conv_bn_relu_2d"))
        names = self._by_class(info["submodules"])
        self.assertEqual(names.get("Conv2d"), 3, info["submodules"])
        self.assertEqual(names.get("BatchNorm2d"), 3, info["submodules"])

    def test_nested_submodules(self):
        info = self.inspect(self.copy_model("control_flow"))
        names = self._by_class(info["submodules"])
        self.assertEqual(names.get("Residual"), 2, info["submodules"])
        self.assertEqual(names.get("BatchNorm2d"), 3, info["submodules"])

    def test_submodule_type_names_unmangled(self):
        """Types are named as the user wrote them: TorchScript's ___torch_mangle_N
        variants of one class are one type."""
        info = self.inspect(self.copy_model("conv_bn_relu_2d"))
        mangled = [k for k in info["submodules"] if "___torch_mangle" in k]
        self.assertEqual(mangled, [], info["submodules"])

    def test_schema_two_inputs(self):
        info = self.inspect(self.copy_model("two_in_two_out"))
        schema = info["forward_schema"]
        self.assertIn("x", schema)
        self.assertIn("y", schema)
        self.assertIn("Tensor", schema)

    def test_schema_dict_output(self):
        info = self.inspect(self.copy_model("dict_out"))
        self.assertIn("Dict(str, Tensor)", info["forward_schema"])

    def test_human_output(self):
        result = self.tool("inspect", self.copy_model("conv_bn_relu_2d"))
        self.assertIn("forward", result.stdout)
        self.assertIn("batch_norm", result.stdout)

    def test_resnet18_parameter_count(self):
        info = self.inspect(self.copy_model("resnet18"))
        # torchvision resnet18: 11,689,512 parameters; BN buffers may be counted too.
        self.assertGreaterEqual(info["parameters"]["count"], 11689512)
        self.assertLess(info["parameters"]["count"], 11800000)


e2e.add_per_model_tests(Inspect, sorted(e2e.MODELS), "_model", "test_model_")


if __name__ == "__main__":
    e2e.main()
