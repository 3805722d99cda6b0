"""ipex_tool.quantization: IPEX's static INT8 flow (prepare, calibrate on the user's batches,
convert, trace and freeze), the dynamic and SmoothQuant mappings, and the qconfig summary saved
and loaded; outputs against the eager model at the CLI's int8 tolerance."""

import json
import warnings

import torch
from torch.ao.quantization import MinMaxObserver, QConfig, QConfigMapping

from py_common import ConvBnRelu, TestCase, ipex, main, op_counts
from ipex_tool.quantization import convert, prepare


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def outlier_batch():
    """Activations with one channel 20x the others: what SmoothQuant is for."""
    scale = torch.ones(32)
    scale[3] = 20.0
    return torch.randn(8, 32) * scale


class StaticInt8(TestCase):
    def setUp(self):
        super().setUp()
        self.model = ConvBnRelu(16).eval()
        self.x = torch.randn(4, 3, 16, 16)

    def calibrated(self, mapping=None):
        prepared = prepare(self.model, mapping or ipex.quantization.default_static_qconfig_mapping,
                           example_inputs=self.x)
        for _ in range(4):
            prepared(torch.randn(4, 3, 16, 16))
        return prepared

    def test_ipex_static_example(self):
        prepared = self.calibrated()
        converted = convert(prepared)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracing a ScriptModule is a no-op, as torch says
            traced = torch.jit.freeze(torch.jit.trace(converted, self.x))
            self.assert_close(traced(self.x), self.model(self.x), dtype="int8")
        ops = op_counts(converted)
        self.assertGreater(sum(n for k, n in ops.items() if k.startswith("ipex::int8")), 0, ops)
        self.assertEqual(ops["aten::_convolution"] + ops["aten::conv2d"], 0, ops)
        self.assertEqual(prepared.calibration_report["batches"], 4)
        self.assertEqual(prepared.calibration_report["observer"], "histogram_l2")

    def test_summary_round_trips(self):
        prepared = self.calibrated()
        converted = convert(prepared)
        prepared.save_qconf_summary(qconf_summary=self.path("summary.json"))
        with open(self.path("summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["format"], "ipex-qconfig")
        again = prepare(self.model, ipex.quantization.default_static_qconfig_mapping, example_inputs=self.x)
        again.load_qconf_summary(qconf_summary=self.path("summary.json"))
        with torch.no_grad():
            self.assertTrue(torch.equal(convert(again)(self.x), converted(self.x)))

    def test_observer_of_the_mapping_is_used(self):
        mapping = QConfigMapping().set_global(
            QConfig(activation=MinMaxObserver.with_args(dtype=torch.quint8),
                    weight=ipex.quantization.default_static_qconfig.weight))
        prepared = self.calibrated(mapping)
        convert(prepared)
        self.assertEqual(prepared.calibration_report["observer"], "min_max")

    def test_bad_use(self):
        prepared = prepare(self.model, ipex.quantization.default_static_qconfig_mapping, example_inputs=self.x)
        with self.assertRaisesRegex(ValueError, "no calibration batches"):
            convert(prepared)
        with open(self.path("other.json"), "w") as f:
            json.dump({"format": "something-else"}, f)
        with self.assertRaisesRegex(ValueError, "not a qconfig summary"):
            prepared.load_qconf_summary(self.path("other.json"))
        with open(self.path("ipex.json"), "w") as f:
            json.dump({" ": {"q_op_infos": {}}}, f)
        with warnings.catch_warnings(record=True) as caught:  # IPEX's summary, listing no op
            warnings.simplefilter("always")
            prepared.load_qconf_summary(self.path("ipex.json"))
        self.assertTrue(any("stay in fp32" in w for w in self.ipex_warnings(caught)), self.ipex_warnings(caught))
        with self.assertRaisesRegex(TypeError, "QConfigMapping"):
            prepare(self.model, "static", example_inputs=self.x)
        with self.assertRaisesRegex(TypeError, "from ipex_tool.quantization.prepare"):
            convert(self.model)

    def test_library_errors_reach_python(self):
        prepared = self.calibrated()
        prepared.save_qconf_summary(self.path("summary.json"))
        with open(self.path("summary.json")) as f:
            summary = json.load(f)
        summary["ops"][0]["input"]["scale"] = -1.0
        with open(self.path("bad.json"), "w") as f:
            json.dump(summary, f)
        again = prepare(self.model, ipex.quantization.default_static_qconfig_mapping, example_inputs=self.x)
        again.load_qconf_summary(self.path("bad.json"))
        with self.assertRaisesRegex(ValueError, "quantize: .*scale"):
            convert(again)


class OtherMappings(TestCase):
    def test_dynamic(self):
        model = MLP().eval()
        x = torch.randn(8, 32)
        prepared = prepare(model, ipex.quantization.default_dynamic_qconfig_mapping, example_inputs=x)
        converted = convert(prepared)
        self.assertIn("dynamic", converted.ipex_tool_report["text"])
        with torch.no_grad():
            self.assert_close(converted(x), model(x), dtype="int8")

    def test_smooth_quant(self):
        model = MLP().eval()
        prepared = prepare(model, ipex.quantization.get_smooth_quant_qconfig_mapping(alpha=0.5),
                           example_inputs=outlier_batch())
        for _ in range(3):
            prepared(outlier_batch())
        converted = convert(prepared)
        prepared.save_qconf_summary(self.path("sq.json"))
        with open(self.path("sq.json")) as f:
            text = f.read()
        self.assertIn("smooth", text)
        x = outlier_batch()
        with torch.no_grad():
            self.assert_close(converted(x), model(x), dtype="int8")
        with self.assertRaisesRegex(ValueError, "alpha 1.5"):
            ipex.quantization.get_smooth_quant_qconfig_mapping(alpha=1.5)


if __name__ == "__main__":
    main()
