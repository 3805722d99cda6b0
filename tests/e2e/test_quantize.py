#!/usr/bin/python3
"""ipex-tool quantize: static INT8 from a qconfig (stock quantized ops that plain PyTorch
runs), the digits accuracy budget, hand edits of the qconfig, SmoothQuant, dynamic INT8,
optimize --qconfig, other models, and every bad qconfig."""

import copy
import json
import os
import subprocess

import e2e_common as e2e
import quant_common as qc

# Accuracy budget of the issue: fp32 vs int8 on the held-out digits, percentage points.
MAX_ACCURACY_DROP_PP = 0.5
MIN_COSINE = 0.99
# c10::ScalarType numbers of the activation types (the dtype argument of quantize_per_tensor).
QINT8, QUINT8 = 12, 13


count = qc.count


class DigitsInt8(qc.DigitsCase):

    def _quantize(self, qconfig=None, *flags, out="int8.pt") -> str:
        out = self.path(out)
        self.tool("quantize", self.model, out, "--qconfig", qconfig or self.qconfig, *flags)
        self.assertTrue(os.path.isfile(out))
        return out

    def test_portable_accuracy_in_stock_torch(self):
        digest = e2e.sha256(self.model)
        out = self._quantize(None, "--portable")
        self.assertEqual(e2e.sha256(self.model), digest, "quantize modified the model")
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True)
        drop_pp = 100.0 * (r["acc_ref"] - r["acc_q"])
        print(f"digits accuracy fp32 {100 * r['acc_ref']:.2f}% int8 {100 * r['acc_q']:.2f}% "
              f"(drop {drop_pp:.2f} pp)")
        self.assertGreater(r["acc_ref"], 0.9, "the fp32 digits model is not trained")
        self.assertLessEqual(drop_pp, MAX_ACCURACY_DROP_PP)
        self.assertGreater(r["cosine"], MIN_COSINE)
        ops = r["ops"]
        # One int8 region from input to logits: a single quantize and dequantize.
        self.assertEqual(count(ops, "quantized::conv2d", "quantized::conv2d_relu"), 3, ops)
        self.assertEqual(count(ops, "quantized::conv2d_relu"), 2, ops)
        self.assertEqual(count(ops, "quantized::linear", "quantized::linear_relu"), 2, ops)
        self.assertEqual(count(ops, "quantized::add_relu"), 1, ops)
        self.assertEqual(count(ops, "aten::quantize_per_tensor"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 1, ops)
        self.assertEqual(count(ops, "aten::conv2d", "aten::linear", "aten::relu", "aten::add",
                               "aten::batch_norm", "aten::dropout"), 0, ops)
        self.assertEqual(r["dtypes"], ["torch.float32"])

    def test_default_output_uses_ipex_int8_ops(self):
        out = self._quantize()
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True, ops_library=True)
        drop_pp = 100.0 * (r["acc_ref"] - r["acc_q"])
        print(f"digits accuracy (ipex int8 ops) fp32 {100 * r['acc_ref']:.2f}% int8 {100 * r['acc_q']:.2f}% "
              f"(drop {drop_pp:.2f} pp)")
        self.assertLessEqual(drop_pp, MAX_ACCURACY_DROP_PP)
        ops = r["ops"]
        # conv2 + add + relu is one op, run with conv1 (its residual's source) as one
        # ipex::int8_graph; one quantize at the input, one dequantize at the logits.
        self.assertEqual(count(ops, "ipex::int8_op"), 3, ops)
        self.assertEqual(count(ops, "ipex::int8_graph"), 1, ops)
        self.assertEqual(count(ops, "ipex::int8_op_sum"), 0, ops)
        self.assertEqual(count(ops, "ipex::quantize_per_tensor"), 1, ops)
        self.assertEqual(count(ops, "aten::quantize_per_tensor"), 0, ops)
        self.assertEqual(count(ops, "ipex::dequantize"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 0, ops)
        self.assertEqual(sum(n for k, n in ops.items() if k.startswith("quantized::")), 0, ops)
        info = self.inspect(out)
        self.assertIs(info["needs_ops_library"], True)
        # ipex-tool itself runs it (it carries the ops) and agrees with the portable model.
        portable = self._quantize(None, "--portable", out="portable.pt")
        self.tool("verify", portable, out, "--input", os.path.join(self.calib, "batch_007.pt"),
                  "--min-cosine", "0.999")

    def test_edited_qconfig_keeps_ops_in_fp32_and_bf16(self):
        with open(self.qconfig) as f:
            q = json.load(f)
        for op in q["ops"]:
            if op["id"] == "conv3:conv2d:0":
                op["dtype"] = "fp32"
            if op["id"] == "fc2:linear:0":
                op["dtype"] = "bf16"
        edited = qc.write_json(self.path("edited.json"), q)
        out = self._quantize(edited, "--portable")
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True)
        ops = r["ops"]
        self.assertEqual(count(ops, "aten::conv2d"), 1, ops)
        self.assertEqual(count(ops, "aten::linear"), 1, ops)
        self.assertEqual(count(ops, "quantized::conv2d", "quantized::conv2d_relu"), 2, ops)
        self.assertEqual(count(ops, "quantized::linear", "quantized::linear_relu"), 1, ops)
        self.assertGreaterEqual(count(ops, "aten::to"), 2, ops)  # casts around the bf16 linear
        self.assertEqual(r["dtypes"], ["torch.float32"])
        self.assertLessEqual(100.0 * (r["acc_ref"] - r["acc_q"]), MAX_ACCURACY_DROP_PP)

    def test_unlisted_ops_follow_mixed_dtype(self):
        with open(self.qconfig) as f:
            q = json.load(f)
        q["ops"] = [op for op in q["ops"] if op["id"] != "fc1:linear:0"]
        partial = qc.write_json(self.path("partial.json"), q)
        fp32 = qc.stock_eval(self, self.model, self._quantize(partial, "--portable", out="a.pt"), self.test_set,
                             True)
        bf16 = qc.stock_eval(self, self.model, self._quantize(partial, "--portable", "--mixed-dtype", "bf16",
                                                              out="b.pt"), self.test_set, True)
        self.assertEqual(count(fp32["ops"], "aten::linear"), 1)
        self.assertEqual(count(fp32["ops"], "aten::to"), 0)
        self.assertEqual(count(bf16["ops"], "aten::linear"), 1)
        self.assertGreaterEqual(count(bf16["ops"], "aten::to"), 2)

    def _s8_qconfig(self) -> str:
        recipe = qc.write_json(self.path("s8.json"), {
            "format": "ipex-quant-recipe", "version": 1,
            "activation": {"dtype": "s8", "observer": {"name": "histogram_l2", "bins": 2048}}})
        q = qc.calibrate(self, self.model, self.calib, self.path("s8q.json"), "--recipe", recipe)
        tensors = [op[k] for op in q["ops"] for k in ("input", "output")]
        tensors += [op["add"][k] for op in q["ops"] if "add" in op for k in ("other", "output")]
        self.assertEqual({t["dtype"] for t in tensors}, {"s8"})
        self.assertEqual({t["zero_point"] for t in tensors}, {0})
        return self.path("s8q.json")

    def test_s8_activations_with_ipex_ops(self):
        out = self._quantize(self._s8_qconfig(), out="s8.pt")
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True, ops_library=True)
        drop_pp = 100.0 * (r["acc_ref"] - r["acc_q"])
        print(f"digits accuracy (s8, ipex int8 ops) fp32 {100 * r['acc_ref']:.2f}% int8 {100 * r['acc_q']:.2f}% "
              f"(drop {drop_pp:.2f} pp)")
        self.assertLessEqual(drop_pp, MAX_ACCURACY_DROP_PP)
        self.assertGreater(r["cosine"], MIN_COSINE)
        ops = r["ops"]
        self.assertEqual(count(ops, "ipex::int8_op"), 3, ops)
        self.assertEqual(count(ops, "ipex::int8_graph"), 1, ops)
        self.assertEqual(count(ops, "ipex::int8_op_sum"), 0, ops)
        self.assertEqual(count(ops, "ipex::quantize_per_tensor"), 1, ops)
        self.assertEqual(count(ops, "aten::quantize_per_tensor"), 0, ops)
        self.assertEqual(count(ops, "ipex::dequantize"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 0, ops)
        facts = qc.graph_facts(self, out, ops_library=True)
        self.assertEqual(facts["quantize"], [{"zero_point": 0, "dtype": str(QINT8)}])
        self.assertEqual(len(facts["contexts"]), 5, facts)
        for text in facts["contexts"]:
            self.assertIn(" s8->s8", text)
        self.assertTrue(any("+sum s8" in t for t in facts["contexts"]), facts)

    def test_s8_activations_portable_run_as_u8_zero_point_128(self):
        qconfig = self._s8_qconfig()
        result = self.tool("quantize", self.model, self.path("p.pt"), "--qconfig", qconfig, "--portable")
        self.assertIn("zero point + 128", result.stderr)
        r = qc.stock_eval(self, self.model, self.path("p.pt"), self.test_set, labels=True)
        self.assertLessEqual(100.0 * (r["acc_ref"] - r["acc_q"]), MAX_ACCURACY_DROP_PP)
        ops = r["ops"]
        self.assertEqual(count(ops, "quantized::conv2d", "quantized::conv2d_relu"), 3, ops)
        self.assertEqual(count(ops, "quantized::linear", "quantized::linear_relu"), 2, ops)
        self.assertEqual(count(ops, "quantized::add_relu"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 1, ops)
        facts = qc.graph_facts(self, self.path("p.pt"))
        self.assertEqual(facts["quantize"], [{"zero_point": 128, "dtype": str(QUINT8)}])
        # The same grid: the portable and the ipex s8 model compute nearly the same numbers (their
        # int8 kernels round the requantization differently: cosine 0.99990-1.0 across runs). A
        # wrong zero point for the u8 form (0 instead of 128) clips every negative value.
        ipex = self._quantize(qconfig, out="s8.pt")
        self.tool("verify", self.path("p.pt"), ipex, "--input", os.path.join(self.calib, "batch_007.pt"),
                  "--min-cosine", "0.999")

    def test_mixed_u8_s8_chain(self):
        with open(self.qconfig) as f:
            q = json.load(f)
        s8 = lambda t: t.update({"dtype": "s8", "zero_point": 0})  # noqa: E731 (same scale: a wider range)
        by_id = {op["id"]: op for op in q["ops"]}
        s8(by_id["conv1:conv2d:0"]["output"])  # relu output as s8; conv2 and the add read s8
        s8(by_id["conv2:conv2d:0"]["add"]["other"])
        s8(by_id["fc1:linear:0"]["input"])  # ignored: the producer (conv3, u8) decides
        s8(by_id["fc2:linear:0"]["output"])  # logits as s8
        for op in q["ops"]:
            op["input"]["scale"] *= 2 if op["input"]["dtype"] == "s8" else 1
            op["output"]["scale"] *= 2 if op["output"]["dtype"] == "s8" else 1
        by_id["conv2:conv2d:0"]["add"]["other"]["scale"] *= 2
        edited = qc.write_json(self.path("mixed.json"), q)
        out = self._quantize(edited, out="mixed.pt")
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True, ops_library=True)
        self.assertLessEqual(100.0 * (r["acc_ref"] - r["acc_q"]), MAX_ACCURACY_DROP_PP)
        facts = qc.graph_facts(self, out, ops_library=True)
        texts = sorted(facts["contexts"])
        self.assertEqual(len(texts), 5, facts)
        self.assertEqual(sum(" u8->s8" in t for t in texts), 2, texts)  # conv1, fc2
        self.assertEqual(sum(" s8->u8 +relu +sum s8" in t or " s8->u8 +sum s8" in t for t in texts), 1, texts)
        self.assertEqual(facts["quantize"], [{"zero_point": q["ops"][0]["input"]["zero_point"],
                                              "dtype": str(QUINT8)}])
        # Same grids, different int8 kernels (requantization rounding): cosine 0.99990-1.0.
        portable = self._quantize(edited, "--portable", out="mixed_p.pt")
        self.tool("verify", portable, out, "--input", os.path.join(self.calib, "batch_007.pt"),
                  "--min-cosine", "0.999")

    def test_optimize_with_qconfig(self):
        out = self.path("opt.pt")
        result, report = self.optimize(self.model, out, "--qconfig", self.qconfig, "--portable")
        self.assertEqual(report["quantize"]["int8_ops"], 5)
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True)
        self.assertEqual(count(r["ops"], "quantized::add_relu"), 1)
        self.assertLessEqual(100.0 * (r["acc_ref"] - r["acc_q"]), MAX_ACCURACY_DROP_PP)
        self.assertNotIn("int8_graphs", report["quantize"])
        # With the ipex ops: conv1 and conv2 + add + relu (the residual block) as one int8 graph.
        _, report = self.optimize(self.model, self.path("opt_ipex.pt"), "--qconfig", self.qconfig)
        self.assertEqual(report["quantize"]["int8_graphs"],
                         {"graphs": 1, "convolutions": 2, "sums": 1,
                          "modules": ["conv1..conv2 (2 convolutions)"]})


class BadQConfig(e2e.ToolTestCase):
    """Every bad qconfig: exit 3 naming the op and field, nothing written."""

    @classmethod
    def setUpClass(cls):
        case = e2e.ToolTestCase()
        case.setUp()
        model = qc.copy_quant(case, qc.DIGITS["model"])
        calib = qc.copy_quant(case, qc.DIGITS["calib"])
        cls.good = qc.calibrate(case, model, calib, case.path("q.json"), "--max-batches", "2")
        case._cleanup()

    def setUp(self):
        super().setUp()
        self.model = qc.copy_quant(self, qc.DIGITS["model"])
        self.out = self.path("int8.pt")

    def _bad(self, mutate, *mentions, code=e2e.EXIT_BAD_INPUT):
        q = copy.deepcopy(self.good)
        mutate(q)
        path = qc.write_json(self.path("bad.json"), q)
        digest = e2e.sha256(path)
        result = self.run_tool("quantize", self.model, self.out, "--qconfig", path)
        self.assert_error(result, code, "bad.json", *mentions)
        self.assertFalse(os.path.exists(self.out), "OUT written for a bad qconfig")
        self.assertEqual(e2e.sha256(path), digest)
        self.assert_no_stray_files(self.tmp, ["digits_cnn.pt", "bad.json"])

    def test_missing_field(self):
        self._bad(lambda q: q["ops"][1]["output"].pop("zero_point"), "conv2:conv2d:0", "output.zero_point")

    def test_wrong_type(self):
        self._bad(lambda q: q["ops"][0]["input"].__setitem__("scale", "big"), "conv1:conv2d:0", "input.scale")

    def test_unknown_op_id(self):
        self._bad(lambda q: q["ops"][2].__setitem__("id", "conv9:conv2d:0"), "conv9:conv2d:0", "unknown op id")

    def test_scale_not_positive(self):
        self._bad(lambda q: q["ops"][3]["output"].__setitem__("scale", 0), "fc1:linear:0", "output.scale")
        self._bad(lambda q: q["ops"][3]["weight"]["scales"].__setitem__(0, -1e-3), "fc1:linear:0",
                  "weight.scales[0]")

    def test_scale_not_finite(self):
        def mutate(q):
            q["ops"][0]["input"]["scale"] = 1e308 * 10  # inf: json.dump writes Infinity
        self._bad(mutate, "bad.json")

    def test_zero_point_out_of_range(self):
        self._bad(lambda q: q["ops"][4]["output"].__setitem__("zero_point", 300), "fc2:linear:0",
                  "output.zero_point")

    def test_channel_count_mismatch(self):
        def mutate(q):
            q["ops"][2]["weight"]["scales"].pop()
            q["ops"][2]["weight"].pop("channels")
        self._bad(mutate, "conv3:conv2d:0", "weight.scales", "31", "32")

    def test_made_for_another_model(self):
        # An identity edited by hand is caught like a qconfig of another model.
        self._bad(lambda q: q["model"].__setitem__("identity", "0" * 16), "another model")
        other = qc.copy_quant(self, "digits_cnn_other.pt")
        calib = qc.copy_quant(self, qc.DIGITS["calib"])
        qc.calibrate(self, other, calib, self.path("other.json"), "--max-batches", "1")
        result = self.run_tool("quantize", self.model, self.out, "--qconfig", self.path("other.json"))
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "other.json", "another model")
        self.assertFalse(os.path.exists(self.out))

    def test_not_json(self):
        with open(self.path("bad.json"), "w") as f:
            f.write('{"format": "ipex-qconfig", ')
        result = self.run_tool("quantize", self.model, self.out, "--qconfig", self.path("bad.json"))
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "bad.json", "JSON")
        self.assertFalse(os.path.exists(self.out))

    def test_usage(self):
        result = self.run_tool("quantize", self.model, self.out)
        self.assert_error(result, e2e.EXIT_USAGE, "--qconfig")
        q = qc.write_json(self.path("q.json"), self.good)
        result = self.run_tool("quantize", self.model, self.out, "--qconfig", q, "--dynamic")
        self.assert_error(result, e2e.EXIT_USAGE, "--dynamic")
        self.assertFalse(os.path.exists(self.out))


# A small model with activations between its int8 ops: conv -> silu_ -> depthwise conv ->
# hardswish read by a mean and a product (squeeze-excite gate: conv -> sigmoid) -> conv, then
# DenseNet's cat -> batch norm -> relu before a conv, ShuffleNet's cat -> channel shuffle ->
# chunk -> conv -> fc.
ACTIVATIONS_MODEL = r"""
import os, sys
import torch
import torch.nn.functional as F
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.se = torch.nn.Conv2d(16, 16, 1)
        self.c3 = torch.nn.Conv2d(16, 24, 1)
        self.c4 = torch.nn.Conv2d(24, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(32)
        self.bn.running_mean.uniform_(-0.2, 0.2)
        self.bn.running_var.uniform_(0.5, 1.5)
        self.c5 = torch.nn.Conv2d(32, 24, 1)
        self.c6 = torch.nn.Conv2d(24, 24, 1)
        self.c7 = torch.nn.Conv2d(24, 24, 1)
        self.fc = torch.nn.Linear(24, 5)
        self.act = torch.nn.SiLU(inplace=True)
    def forward(self, x):
        x = self.act(self.c1(x))
        y = F.hardswish(self.c2(x))
        g = torch.sigmoid(self.se(y.mean((2, 3), keepdim=True)))
        z = self.c3(y * g)
        z = self.c5(F.relu(self.bn(torch.cat([z, self.c4(z)], 1))))
        s = torch.cat([z, self.c6(z)], 1)
        n, c, h, w = s.size()
        s = s.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        a, b = s.chunk(2, 1)
        return self.fc(self.c7(b).mean((2, 3)) + a.mean((2, 3)))
out = sys.argv[1]
torch.jit.save(torch.jit.trace(M().eval(), torch.randn(1, 3, 20, 20)), os.path.join(out, "act.pt"))
os.makedirs(os.path.join(out, "calib"))
gen = torch.Generator().manual_seed(1)
for i in range(4):
    torch.save(torch.randn(4, 3, 20, 20, generator=gen), os.path.join(out, "calib", f"b{i}.pt"))
torch.save(torch.randn(4, 3, 20, 20, generator=gen), os.path.join(out, "test.pt"))
"""


class ActivationsBetweenInt8Ops(e2e.ToolTestCase):
    def test_activation_chains_and_norms_between_int8_ops(self):
        proc = subprocess.run(["/usr/bin/python3", "-c", ACTIVATIONS_MODEL, self.tmp], capture_output=True,
                              text=True, timeout=e2e.RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        model, data, test = self.path("act.pt"), self.path("calib"), self.path("test.pt")
        q = self.path("q.json")
        self.tool("calibrate", model, "--data", data, "--out", q)
        out = self.path("int8.pt")
        _, report = self.optimize(model, out, "--qconfig", q)
        # silu_ -> the depthwise conv's quantize: one int8 lookup; hardswish (read twice) and
        # the gate's sigmoid: fp32 lookups.
        self.assertEqual(report["quantize"]["activation_maps"], {"int8": 1, "fp32": 2}, report["quantize"])
        self.assertEqual(report["quantize"]["int8_cat_norms"], 1, report["quantize"])
        self.assertEqual(report["quantize"]["channel_shuffles"], 1, report["quantize"])
        # The gate's input, hardswish's fp32 lookup, is read from the int8 values by its mean and
        # by the product with the gate; c7's output by its mean.
        self.assertEqual(report["quantize"]["int8_gates"], {"means": 2, "products": 1}, report["quantize"])
        r = qc.stock_eval(self, model, out, test, ops_library=True)
        ops = r["ops"]
        self.assertGreater(r["cosine"], MIN_COSINE, r)
        self.assertEqual(count(ops, "ipex::int8_requantize_map"), 1, ops)
        self.assertEqual(count(ops, "ipex::int8_map"), 1, ops)  # the gate's sigmoid
        self.assertEqual(count(ops, "ipex::int8_map_mean"), 2, ops)
        self.assertEqual(count(ops, "ipex::int8_map_gate"), 1, ops)
        self.assertEqual(count(ops, "aten::mul"), 0, ops)
        self.assertEqual(count(ops, "aten::silu", "aten::silu_", "aten::hardswish", "aten::sigmoid"), 0, ops)
        self.assertEqual(count(ops, "ipex::int8_cat_scale_shift"), 1, ops)
        self.assertEqual(count(ops, "aten::cat", "aten::batch_norm", "aten::relu", "aten::transpose"), 0, ops)
        self.assertEqual(count(ops, "ipex::channel_shuffle_chunk"), 1, ops)
        # The stock quantized ops round the requantization their own way; the grids are the same.
        portable = self.path("portable.pt")
        self.tool("quantize", model, portable, "--qconfig", q, "--portable")
        p = qc.stock_eval(self, model, portable, test)
        self.assertEqual(count(p["ops"], "aten::silu", "aten::silu_", "aten::hardswish", "aten::sigmoid"), 3, p["ops"])
        self.tool("verify", portable, out, "--input", test, "--min-cosine", "0.999")


class SmoothQuantAndDynamic(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.model = qc.copy_quant(self, qc.LN_MLP["model"])
        self.calib = qc.copy_quant(self, qc.LN_MLP["calib"])
        self.test_in = qc.copy_quant(self, qc.LN_MLP["test"])

    def test_smooth_quant_lowers_the_error(self):
        errors = {}
        for name, flags in (("plain", ()), ("smooth", ("--smooth-quant", "0.5"))):
            q = self.path(f"{name}.json")
            self.tool("calibrate", self.model, "--data", self.calib, "--out", q, "--observer", "min_max", *flags)
            out = self.path(f"{name}.pt")
            self.tool("quantize", self.model, out, "--qconfig", q, "--portable")
            r = qc.stock_eval(self, self.model, out, self.test_in)
            errors[name] = r["mse"]
            self.assertGreater(r["cosine"], MIN_COSINE)
            self.assertEqual(count(r["ops"], "quantized::linear", "quantized::linear_relu"), 3, r["ops"])
        print(f"ln_mlp int8 mse: plain {errors['plain']:.3g}, smooth-quant {errors['smooth']:.3g}")
        self.assertLess(errors["smooth"], errors["plain"])

    def test_smooth_factors_of_a_group_must_agree(self):
        q = qc.calibrate(self, self.model, self.calib, self.path("sq.json"), "--smooth-quant", "0.5")
        q["ops"][0]["smooth_quant"]["factors"] = q["ops"][0]["smooth_quant"]["factors"][:5]
        bad = qc.write_json(self.path("bad.json"), q)
        result = self.run_tool("quantize", self.model, self.path("o.pt"), "--qconfig", bad)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "fc1:linear:0", "smooth_quant.factors")
        self.assertFalse(os.path.exists(self.path("o.pt")))

    def test_dynamic_linear(self):
        out = self.path("dyn.pt")
        self.tool("quantize", self.model, out, "--dynamic")
        r = qc.stock_eval(self, self.model, out, self.test_in)
        self.assertEqual(count(r["ops"], "quantized::linear_dynamic"), 3, r["ops"])
        self.assertEqual(count(r["ops"], "aten::linear"), 0, r["ops"])
        self.assertGreater(r["cosine"], MIN_COSINE)

    def test_calibrate_without_top_level_ops(self):
        # Without shapes, BatchNorm1d folding leaves each linear inside a rank check.
        model = self.copy_model("linear_bn")
        data = self.copy_input("linear_bn")
        result = self.run_tool("calibrate", model, "--data", data, "--out", self.path("q.json"))
        self.assert_error(result, e2e.EXIT_UNSUPPORTED, "no quantizable op", "if/loop", "linear (2 ops) inside a prim::If")
        self.assertFalse(os.path.exists(self.path("q.json")))

    def test_ops_inside_control_flow_are_named_as_kept_fp32(self):
        # control_flow: head.fc runs under `if z.size(1) == 4`; the stem and residual convs
        # are at the top level.
        model = self.copy_model("control_flow")
        data = self.copy_input("control_flow")
        result = self.tool("calibrate", model, "--data", data, "--out", self.path("q.json"))
        warning = "head.fc: linear inside a prim::If block stays fp32"
        self.assertIn(warning, result.stderr)
        with open(self.path("q.json")) as f:
            ids = [op["id"] for op in json.load(f)["ops"]]
        self.assertEqual(len(ids), 3, ids)
        self.assertFalse(any(i.startswith("head.fc") for i in ids), ids)
        result = self.tool("quantize", model, self.path("o.pt"), "--qconfig", self.path("q.json"), "--portable")
        self.assertIn(warning, result.stderr)
        _, report = self.optimize(model, self.path("opt.pt"), "--qconfig", self.path("q.json"), "--portable")
        nested = report["quantize"]["nested_fp32"]
        self.assertEqual(len(nested), 1, nested)
        self.assertIn(warning, nested[0])

    def test_dynamic_needs_a_linear(self):
        model = self.copy_model("conv_bn_relu_2d")
        result = self.run_tool("quantize", model, self.path("o.pt"), "--dynamic")
        self.assert_error(result, e2e.EXIT_UNSUPPORTED, "linear")
        self.assertFalse(os.path.exists(self.path("o.pt")))


# Models of the shared fixtures, calibrated on their own sample input: conversion must be
# general (traced and scripted graphs, 1-D/3-D/depthwise conv, tuple/dict outputs, control flow).
GENERAL_MODELS = ["conv_bn_relu_1d", "conv_bn_relu_2d", "conv_bn_relu_3d", "conv_bn_traced_2d",
                  "depthwise_conv_bn", "concat_linear", "two_in_two_out", "dict_out",
                  "list_out", "control_flow", "tiny_transformer", "scripted_encoder", "dropout_all", "bn_two_users",
                  "resnet18", "mobilenet_v2"]
GENERAL_MIN_COSINE = 0.98


class OtherModels(e2e.ToolTestCase):
    def _convert(self, name: str):
        model = self.copy_model(name)
        data = self.copy_input(name)
        q = qc.calibrate(self, model, data, self.path("q.json"))
        self.assertGreater(len(q["ops"]), 0)
        out = self.path("int8.pt")
        self.tool("quantize", model, out, "--qconfig", self.path("q.json"), "--portable")
        r = qc.stock_eval(self, model, out, data)
        self.assertEqual(r["outputs"], r["outputs_ref"])
        self.assertGreater(r["cosine"], GENERAL_MIN_COSINE, f"{name}: {r}")
        quantized = sum(n for k, n in r["ops"].items() if k.startswith("quantized::"))
        self.assertGreater(quantized, 0, r["ops"])


e2e.add_per_model_tests(OtherModels, [m for m in GENERAL_MODELS if m in e2e.MODELS], "_convert")


S8_MODELS = ["conv_bn_relu_1d", "conv_bn_relu_3d", "depthwise_conv_bn", "tiny_transformer", "resnet18"]


class S8OtherModels(e2e.ToolTestCase):
    """s8 activations on conv1d/3d, depthwise, linear/matmul and residual models: the ipex
    ops against fp32, and --portable (u8, zero point + 128) giving the same numbers."""

    def _convert(self, name: str):
        model = self.copy_model(name)
        data = self.copy_input(name)
        recipe = qc.write_json(self.path("s8.json"), {
            "format": "ipex-quant-recipe", "version": 1,
            "activation": {"dtype": "s8", "observer": {"name": "min_max"}}})
        qc.calibrate(self, model, data, self.path("q.json"), "--recipe", recipe)
        out, portable = self.path("s8.pt"), self.path("s8p.pt")
        self.tool("quantize", model, out, "--qconfig", self.path("q.json"))
        self.tool("quantize", model, portable, "--qconfig", self.path("q.json"), "--portable")
        r = qc.stock_eval(self, model, out, data, ops_library=True)
        self.assertGreater(r["cosine"], GENERAL_MIN_COSINE, f"{name}: {r}")
        self.assertGreater(count(r["ops"], "ipex::int8_op", "ipex::int8_op_sum"), 0, r["ops"])
        facts = qc.graph_facts(self, out, ops_library=True)
        self.assertTrue(all(" s8->s8" in t for t in facts["contexts"]), facts)
        # Without VNNI the two round their weights to 7 bits differently (oneDNN halves the
        # 8-bit weights of s8 convolutions; stock ops get 7-bit ones), so they agree less closely.
        self.tool("verify", portable, out, "--input", data, "--min-cosine", "0.999" if e2e.VNNI else "0.995")


e2e.add_per_model_tests(S8OtherModels, [m for m in S8_MODELS if m in e2e.MODELS], "_convert")


if __name__ == "__main__":
    e2e.main()
