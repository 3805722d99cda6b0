"""IPEX's qconfig summary (the JSON its prepared_model.save_qconf_summary() writes), made here
from the documented fields for a small conv/linear model and an MLP with SmoothQuant factors:
`ipex-tool quantize --qconfig`, `calibrate --ipex-summary` and
ipex_tool.quantization's load_qconf_summary read it; outputs against the eager model at the
int8 tolerance; entries that match no op and files of another format are clear errors."""

import json
import os
import subprocess
import warnings

import torch

from py_common import TestCase, ipex, main, op_counts
from ipex_tool.quantization import convert, prepare

RELU_TYPE = "<built-in method relu of type object at 0x7f21fb8f82e0>"
POOL_TYPE = "<function adaptive_avg_pool2d at 0x7f21e0d1c940>"
FLATTEN_TYPE = "<built-in method flatten of type object at 0x7f21fb8f82e0>"
CONV_TYPE = "<class 'torch.nn.modules.conv.Conv2d'>"
LINEAR_TYPE = "<class 'torch.nn.modules.linear.Linear'>"


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        y = torch.relu(self.conv2(y))
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return self.fc(y)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def u8(t: torch.Tensor):
    """IPEX's quint8 affine parameters of a tensor's min/max (range holding 0)."""
    lo, hi = min(float(t.min()), 0.0), max(float(t.max()), 0.0)
    scale = max((hi - lo) / 255.0, 1e-8)
    return [scale], [int(round(-lo / scale))]


def weight_scales(w: torch.Tensor):
    return (w.detach().abs().flatten(1).amax(1) / 127.0).tolist()


def tensor_info(tid, values=None, dtype="torch.quint8", force=None):
    info = {"id": tid, "orig_dtype": "torch.float32", "inf_dtype": dtype if values is not None else "torch.float32"}
    if force is not None or values is not None:
        info["force_dtype"] = force or dtype
    if values is not None:
        info["scale"], info["zero_point"] = u8(values)
    return info


def q_op(op_type, fqn, inputs, outputs, weight=None):
    info = {"op_type": op_type, "op_type_is_module": op_type.startswith("<class"), "fqn": fqn,
            "input_tensor_infos": inputs,
            "weight_tensor_infos": [] if weight is None else [{
                "orig_dtype": "torch.float32", "inf_dtype": "torch.qint8",
                "scale": weight_scales(weight), "zero_point": [0] * weight.shape[0]}],
            "output_tensor_infos": outputs,
            "activation_observer": {"name": "HistogramObserver", "bins": 2048, "dtype": "torch.quint8",
                                    "qscheme": "torch.per_tensor_affine", "reduce_range": False,
                                    "quant_min": 0, "quant_max": 255, "is_dynamic": False},
            "weight_observer": {"name": "PerChannelMinMaxObserver", "ch_axis": 0, "dtype": "torch.qint8",
                                "qscheme": "torch.per_channel_symmetric", "reduce_range": False,
                                "quant_min": -128, "quant_max": 127, "is_dynamic": False}}
    return info


def small_net_summary(model: SmallNet, x: torch.Tensor) -> dict:
    """What IPEX's save_qconf_summary writes for SmallNet calibrated on x: tensor ids 0 (x) to 7
    (the logits); conv and relu outputs share ids with the next op's inputs; the logits stay
    float (no scale)."""
    with torch.no_grad():
        t1 = model.conv1(x)
        t2 = torch.relu(t1)
        t3 = model.conv2(t2)
        t4 = torch.relu(t3)
        t5 = torch.nn.functional.adaptive_avg_pool2d(t4, 1)
        t6 = torch.flatten(t5, 1)
    q_ops = {
        "0": q_op(CONV_TYPE, "conv1", [tensor_info(0, x)], [tensor_info(1)], model.conv1.weight),
        "1": q_op(RELU_TYPE, "", [tensor_info(1, t1)], [tensor_info(2)]),
        "2": q_op(CONV_TYPE, "conv2", [tensor_info(2, t2)], [tensor_info(3)], model.conv2.weight),
        "3": q_op(RELU_TYPE, "", [tensor_info(3, t3)], [tensor_info(4)]),
        "4": q_op(POOL_TYPE, "", [tensor_info(4, t4)], [tensor_info(5, t5)]),
        "5": q_op(LINEAR_TYPE, "fc", [tensor_info(6, t6)], [tensor_info(7)], model.fc.weight),
    }
    nonq = {"0": {"op_type": FLATTEN_TYPE, "fqn": "", "input_tensor_infos": [tensor_info(5)],
                  "output_tensor_infos": [tensor_info(6)]}}
    return {" ": {"q_op_infos": q_ops, "nonq_op_infos": nonq,
                  "layer_output_infos": [{"id": 7, "orig_dtype": "torch.float32", "inf_dtype": "torch.float32"}]}}


class Residual(torch.nn.Module):
    """conv1 -> relu -> conv2 + (the relu's output) -> relu -> pool -> fc: an int8 residual add."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        y = torch.relu(self.conv1(x))
        z = torch.relu(self.conv2(y) + y)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(z, 1), 1))


def residual_summary(model: Residual, x: torch.Tensor) -> dict:
    """Tensor ids: 0 x, 1 conv1, 2 relu, 3 conv2, 4 add, 5 relu, 6 pool, 7 flatten, 8 logits."""
    with torch.no_grad():
        t1 = model.conv1(x)
        t2 = torch.relu(t1)
        t3 = model.conv2(t2)
        t4 = t3 + t2
        t5 = torch.relu(t4)
        t6 = torch.nn.functional.adaptive_avg_pool2d(t5, 1)
        t7 = torch.flatten(t6, 1)
    q_ops = {
        "0": q_op(CONV_TYPE, "conv1", [tensor_info(0, x)], [tensor_info(1)], model.conv1.weight),
        "1": q_op(RELU_TYPE, "", [tensor_info(1, t1)], [tensor_info(2)]),
        "2": q_op(CONV_TYPE, "conv2", [tensor_info(2, t2)], [tensor_info(3)], model.conv2.weight),
        "3": q_op("<method 'add' of 'torch._C.TensorBase' objects>", "", [tensor_info(3, t3), tensor_info(2, t2)],
                  [tensor_info(4)]),
        "4": q_op(RELU_TYPE, "", [tensor_info(4, t4)], [tensor_info(5)]),
        "5": q_op(POOL_TYPE, "", [tensor_info(5, t5)], [tensor_info(6, t6)]),
        "6": q_op(LINEAR_TYPE, "fc", [tensor_info(7, t7)], [tensor_info(8)], model.fc.weight),
    }
    return {" ": {"q_op_infos": q_ops, "nonq_op_infos": {}, "layer_output_infos": []}}


def mlp_smooth_quant_summary(model: MLP, x: torch.Tensor, alpha: float = 0.5) -> dict:
    """The SmoothQuant form: scales and factors keyed by "<op index>_0", the weight's factors s
    (W * s) and the input's 1/s (x * 1/s), the input scale that of the smoothed input."""
    ops = {}
    with torch.no_grad():
        h = torch.relu(model.a(x))
    for idx, (name, layer, inp, in_id) in enumerate((("a", model.a, x, 0), ("b", model.b, h, 2))):
        act_max = inp.abs().amax(0).clamp_min(1e-5)
        w_max = layer.weight.detach().abs().amax(0).clamp_min(1e-5)
        s = act_max.pow(alpha) / w_max.pow(1 - alpha)
        key = f"{idx * 2}_0"
        smoothed_input = inp / s
        scale, zp = u8(smoothed_input)
        info = q_op(LINEAR_TYPE, name, [{"id": in_id, "orig_dtype": "torch.float32", "inf_dtype": "torch.quint8",
                                         "force_dtype": "torch.quint8", "scale": {key: scale},
                                         "zero_point": {key: zp},
                                         "smooth_quant_scaling_factor": {key: (1.0 / s).tolist()}}],
                    [tensor_info(in_id + 1)], layer.weight.detach() * s)
        info["weight_tensor_infos"][0]["smooth_quant_scaling_factor"] = s.tolist()
        info["activation_observer"] = {"name": "SmoothQuantActivationObserver", "alpha": alpha,
                                       "smooth_quant_enabled": True}
        ops[str(idx * 2)] = info
        if idx == 0:
            with torch.no_grad():
                ops["1"] = q_op(RELU_TYPE, "", [tensor_info(1, model.a(x))], [tensor_info(2)])
    return {" ": {"q_op_infos": ops, "nonq_op_infos": {}, "layer_output_infos": []}}


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=4)
    return path


class IpexSummaryCli(TestCase):
    def setUp(self):
        super().setUp()
        self.model = SmallNet().eval()
        self.x = torch.randn(8, 3, 16, 16)
        self.model_file = self.path("model.pt")
        torch.jit.save(torch.jit.trace(self.model, self.x), self.model_file)
        self.summary = small_net_summary(self.model, self.x)
        self.summary_file = write_json(self.path("configure.json"), self.summary)

    def tool(self, *args):
        return subprocess.run([os.environ["IPEX_TOOL"], *args], capture_output=True, text=True, timeout=300)

    def test_quantize_reads_the_summary(self):
        out = self.path("int8.pt")
        r = self.tool("quantize", self.model_file, out, "--qconfig", self.summary_file)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the logits are float in IPEX's summary: a warning says their range is a bound
        self.assertIn("fc:linear:0", r.stderr)
        self.assertIn("bounded", r.stderr)
        torch.ops.load_library(ipex.ops_library_path())
        int8 = torch.jit.load(out)
        ops = op_counts(int8)
        self.assertEqual(ops["ipex::int8_op"], 3, ops)
        x = torch.randn(8, 3, 16, 16)
        with torch.no_grad():
            self.assert_close(int8(x), self.model(x), dtype="int8")

    def test_calibrate_converts_the_summary(self):
        qconfig = self.path("qconfig.json")
        r = self.tool("calibrate", self.model_file, "--ipex-summary", self.summary_file, "--out", qconfig)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(qconfig) as f:
            ours = json.load(f)
        self.assertEqual(ours["format"], "ipex-qconfig")
        by_id = {op["id"]: op for op in ours["ops"]}
        self.assertEqual(sorted(by_id), ["conv1:conv2d:0", "conv2:conv2d:0", "fc:linear:0"])
        conv1 = self.summary[" "]["q_op_infos"]["0"]
        self.assertAlmostEqual(by_id["conv1:conv2d:0"]["input"]["scale"], conv1["input_tensor_infos"][0]["scale"][0])
        # conv1's output (after its fused relu) takes the parameters conv2 reads it with
        conv2_in = self.summary[" "]["q_op_infos"]["2"]["input_tensor_infos"][0]
        self.assertAlmostEqual(by_id["conv1:conv2d:0"]["output"]["scale"], conv2_in["scale"][0])
        self.assertEqual(by_id["conv1:conv2d:0"]["output"]["zero_point"], conv2_in["zero_point"][0])
        r = self.tool("quantize", self.model_file, self.path("int8.pt"), "--qconfig", qconfig)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.tool("calibrate", self.model_file, "--ipex-summary", self.summary_file, "--data", self.model_file,
                      "--out", self.path("q2.json"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("exclude each other", r.stderr)
        self.assertFalse(os.path.exists(self.path("q2.json")))

    def test_forced_float_op_stays_fp32(self):
        self.summary[" "]["q_op_infos"]["5"]["input_tensor_infos"][0]["force_dtype"] = "torch.float32"
        write_json(self.summary_file, self.summary)
        qconfig = self.path("qconfig.json")
        r = self.tool("calibrate", self.model_file, "--ipex-summary", self.summary_file, "--out", qconfig)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("bounded", r.stderr)
        with open(qconfig) as f:
            self.assertEqual({op["id"]: op["dtype"] for op in json.load(f)["ops"]},
                             {"conv1:conv2d:0": "int8", "conv2:conv2d:0": "int8", "fc:linear:0": "fp32"})
        out = self.path("int8.pt")
        r = self.tool("quantize", self.model_file, out, "--qconfig", self.summary_file)
        self.assertEqual(r.returncode, 0, r.stderr)
        torch.ops.load_library(ipex.ops_library_path())
        ops = op_counts(torch.jit.load(out))
        self.assertEqual(ops["ipex::int8_op"], 2, ops)
        self.assertEqual(ops["aten::linear"], 1, ops)

    def test_entry_matching_no_op_is_exit_3(self):
        self.summary[" "]["q_op_infos"]["2"]["fqn"] = "features.7"
        write_json(self.summary_file, self.summary)
        out = self.path("int8.pt")
        r = self.tool("quantize", self.model_file, out, "--qconfig", self.summary_file)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("q_op_infos['2'] (fqn 'features.7', Conv2d) matches no quantizable op", r.stderr)
        self.assertIn("conv2:conv2d:0", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_wrong_format_is_exit_3(self):
        for name, value in (("list.json", [1, 2]), ("other.json", {"layers": {"conv1": {"scale": 1}}}),
                            ("bad-scale.json", None)):
            if value is None:
                value = json.loads(json.dumps(self.summary))
                value[" "]["q_op_infos"]["0"]["input_tensor_infos"][0]["scale"] = [-1.0]
            path = write_json(self.path(name), value)
            r = self.tool("quantize", self.model_file, self.path("int8.pt"), "--qconfig", path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(path, r.stderr)
            if name == "bad-scale.json":
                self.assertIn("input_tensor_infos[0].scale", r.stderr)
            else:
                self.assertIn("is not a qconfig", r.stderr)


class IpexSummaryPython(TestCase):
    def test_load_qconf_summary_then_convert(self):
        model = SmallNet().eval()
        x = torch.randn(8, 3, 16, 16)
        path = write_json(self.path("configure.json"), small_net_summary(model, x))
        prepared = prepare(model, ipex.quantization.default_static_qconfig_mapping, example_inputs=x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prepared.load_qconf_summary(qconf_summary=path)
        self.assertTrue(any("fc:linear:0" in w for w in self.ipex_warnings(caught)), self.ipex_warnings(caught))
        converted = convert(prepared)
        self.assertEqual(converted.ipex_tool_report["int8_ops"], 3)
        with torch.no_grad():
            x = torch.randn(8, 3, 16, 16)
            self.assert_close(converted(x), model(x), dtype="int8")

    def test_residual_add_runs_in_int8(self):
        model = Residual().eval()
        x = torch.randn(8, 3, 16, 16)
        path = write_json(self.path("configure.json"), residual_summary(model, x))
        prepared = prepare(model, ipex.quantization.default_static_qconfig_mapping, example_inputs=x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the logits' bound
            prepared.load_qconf_summary(path)
            converted = convert(prepared)
        self.assertEqual(converted.ipex_tool_report["fused_add"], 1, converted.ipex_tool_report)
        self.assertEqual(converted.ipex_tool_report["int8_ops"], 3, converted.ipex_tool_report)
        with torch.no_grad():
            x = torch.randn(8, 3, 16, 16)
            self.assert_close(converted(x), model(x), dtype="int8")

    def test_smooth_quant_summary(self):
        model = MLP().eval()
        scale = torch.ones(32)
        scale[3] = 20.0
        x = torch.randn(64, 32) * scale
        path = write_json(self.path("sq.json"), mlp_smooth_quant_summary(model, x))
        prepared = prepare(model, ipex.quantization.get_smooth_quant_qconfig_mapping(alpha=0.5), example_inputs=x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prepared.load_qconf_summary(path)
            converted = convert(prepared)
        prepared.save_qconf_summary(self.path("ours.json"))
        with open(self.path("ours.json")) as f:
            ours = json.load(f)
        self.assertEqual(ours["smooth_quant"]["alpha"], 0.5)
        self.assertEqual(len(ours["ops"][0]["smooth_quant"]["factors"]), 32)
        with torch.no_grad():
            self.assert_close(converted(x[:8]), model(x[:8]), dtype="int8")

    def test_unmatched_entry_is_a_value_error(self):
        model = SmallNet().eval()
        x = torch.randn(2, 3, 16, 16)
        summary = small_net_summary(model, x)
        summary[" "]["q_op_infos"]["6"] = q_op(LINEAR_TYPE, "head", [tensor_info(8, x)], [tensor_info(9)],
                                               model.fc.weight)
        path = write_json(self.path("configure.json"), summary)
        prepared = prepare(model, ipex.quantization.default_static_qconfig_mapping, example_inputs=x)
        with self.assertRaisesRegex(ValueError, r"fqn 'head', Linear\) matches no quantizable op"):
            prepared.load_qconf_summary(path)


if __name__ == "__main__":
    main()
