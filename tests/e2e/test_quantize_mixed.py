#!/usr/bin/python3
"""ipex-tool quantize --mixed-dtype bf16: every float op outside the int8 regions runs in bf16
(checked at run time, op by op), dequantize edges hand bf16 on, fp32 outputs, kept-fp32 ops
stay fp32; default (ipex ops) and --portable; optimize --qconfig --dtype bf16."""

import json
import os
import subprocess

import e2e_common as e2e
import quant_common as qc

MAX_ACCURACY_DROP_PP = 0.5
MIN_COSINE = 0.99

# The dtypes each node kind of the saved graph produces when the model runs on one batch:
# every tensor value of the top-level graph becomes an extra output of a copy of the graph.
RUNTIME_DTYPES = r"""
import json, sys
import torch
if len(sys.argv) > 3:
    torch.ops.load_library(sys.argv[3])
m = torch.jit.load(sys.argv[1]).eval()
data = torch.load(sys.argv[2])
x = data[0] if isinstance(data, (tuple, list)) else data
g = m.graph.copy()
kinds = []
for node in g.nodes():
    for value in node.outputs():
        if isinstance(value.type(), torch._C.TensorType) and node.kind() != "prim::Constant":
            kinds.append(node.kind())
            g.registerOutput(value)
g.makeMultiOutputIntoTuple()
f = torch._C._create_function_from_graph("watched", g)
with torch.no_grad():
    outs = f(m._c, x)
dtypes = {}
for kind, t in zip(kinds, outs[1:]):
    dtypes.setdefault(kind, set()).add(str(t.dtype).replace("torch.", ""))
print(json.dumps({"output": str(outs[0].dtype).replace("torch.", ""),
                  "dtypes": {k: sorted(v) for k, v in dtypes.items()}}))
"""


def runtime_dtypes(case, model: str, data: str, ops_library: bool) -> dict:
    extra = [qc.OPS_LIBRARY] if ops_library else []
    proc = subprocess.run(["/usr/bin/python3", "-c", RUNTIME_DTYPES, model, data] + extra,
                          capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
    case.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    return json.loads(proc.stdout)


count = qc.count


class MixedBf16(qc.DigitsCase):
    def setUp(self):
        super().setUp()
        with open(self.qconfig) as f:
            self.q = json.load(f)

    def _edited(self, name: str, dtypes: dict, drop=()) -> str:
        q = json.loads(json.dumps(self.q))
        q["ops"] = [op for op in q["ops"] if op["id"] not in drop]
        for op in q["ops"]:
            op["dtype"] = dtypes.get(op["id"], op["dtype"])
        return qc.write_json(self.path(name), q)

    def _runtime(self, model: str, ops_library: bool) -> dict:
        return runtime_dtypes(self, model, self.test_set, ops_library)

    def _quantize(self, qconfig: str, out: str, *flags) -> str:
        out = self.path(out)
        self.tool("quantize", self.model, out, "--qconfig", qconfig, *flags)
        return out

    def _check_accuracy(self, out: str, ops_library: bool) -> dict:
        r = qc.stock_eval(self, self.model, out, self.test_set, labels=True, ops_library=ops_library)
        drop_pp = 100.0 * (r["acc_ref"] - r["acc_q"])
        print(f"{os.path.basename(out)}: digits fp32 {100 * r['acc_ref']:.2f}% mixed {100 * r['acc_q']:.2f}% "
              f"(drop {drop_pp:.2f} pp), cosine {r['cosine']:.5f}")
        self.assertLessEqual(drop_pp, MAX_ACCURACY_DROP_PP)
        self.assertGreater(r["cosine"], MIN_COSINE)
        self.assertEqual(r["dtypes"], ["torch.float32"])
        return r

    def _kept_conv3_fc1_unlisted_fc2_bf16(self, portable: bool):
        # int8: conv1, conv2+add+relu, pool; then conv3 kept fp32, relu, flatten, fc1 (not
        # listed), relu, fc2 (listed bf16).
        qconfig = self._edited("edited.json", {"conv3:conv2d:0": "fp32", "fc2:linear:0": "bf16"},
                               drop=("fc1:linear:0",))
        flags = ("--portable",) if portable else ()
        mixed = self._quantize(qconfig, "mixed.pt", "--mixed-dtype", "bf16", *flags)
        plain = self._quantize(qconfig, "plain.pt", *flags)
        rt = self._runtime(mixed, not portable)
        d = rt["dtypes"]
        self.assertEqual(rt["output"], "float32")
        self.assertEqual(d["aten::conv2d"], ["float32"], d)  # kept fp32 by the qconfig
        self.assertEqual(d["aten::linear"], ["bfloat16"], d)  # fc1 and fc2
        self.assertEqual(d["aten::relu"], ["bfloat16"], d)  # after conv3 and fc1
        self.assertEqual(d["aten::flatten"], ["bfloat16"], d)
        dequantize = "ipex::dequantize" if not portable else "aten::dequantize"
        self.assertEqual(d[dequantize], ["float32"], d)  # feeds the fp32 conv3 only
        self.assertNotIn("ipex::dequantize_bf16", d)
        # No float compute outside int8 in fp32 but the kept conv and casts (prim::If: the
        # guarded cast of the model input, which may arrive in bf16, to fp32 for quantize).
        float_ops = {k: v for k, v in d.items() if "float32" in v}
        self.assertEqual(set(float_ops) - {"aten::conv2d", "aten::to", dequantize, "prim::If"}, set(), d)
        self.assertEqual(d["prim::If"], ["float32"])
        plain_rt = self._runtime(plain, not portable)
        self.assertEqual(plain_rt["dtypes"]["aten::relu"], ["float32"])  # without --mixed-dtype
        self._check_accuracy(mixed, not portable)
        self.tool("verify", plain, mixed, "--input", os.path.join(self.calib, "batch_007.pt"),
                  "--min-cosine", "0.999")

    def test_ops_outside_int8_run_in_bf16(self):
        self._kept_conv3_fc1_unlisted_fc2_bf16(portable=False)

    def test_ops_outside_int8_run_in_bf16_portable(self):
        self._kept_conv3_fc1_unlisted_fc2_bf16(portable=True)

    def test_dequantize_edge_produces_bf16(self):
        qconfig = self._edited("tail.json", {}, drop=("fc1:linear:0", "fc2:linear:0"))
        out = self._quantize(qconfig, "tail.pt", "--mixed-dtype", "bf16")
        r = self._check_accuracy(out, True)
        ops = r["ops"]
        self.assertEqual(count(ops, "ipex::dequantize_bf16"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 0, ops)
        self.assertEqual(count(ops, "aten::linear"), 2, ops)
        rt = self._runtime(out, True)
        self.assertEqual(rt["dtypes"]["ipex::dequantize_bf16"], ["bfloat16"])
        self.assertEqual(rt["dtypes"]["aten::linear"], ["bfloat16"])
        self.assertEqual(rt["output"], "float32")
        portable = self._quantize(qconfig, "tail_p.pt", "--mixed-dtype", "bf16", "--portable")
        p = self._check_accuracy(portable, False)
        self.assertEqual(count(p["ops"], "aten::dequantize"), 1, p["ops"])
        self.assertEqual(count(p["ops"], "ipex::dequantize_bf16"), 0, p["ops"])
        self.assertEqual(self._runtime(portable, False)["dtypes"]["aten::linear"], ["bfloat16"])

    def test_all_int8_is_unchanged(self):
        mixed = self._quantize(self.qconfig, "all.pt", "--mixed-dtype", "bf16")
        plain = self._quantize(self.qconfig, "all_fp32.pt")
        a = qc.stock_eval(self, self.model, mixed, self.test_set, True, ops_library=True)["ops"]
        b = qc.stock_eval(self, self.model, plain, self.test_set, True, ops_library=True)["ops"]
        self.assertEqual(a, b)
        self.assertEqual(count(a, "aten::to", "ipex::dequantize_bf16"), 0, a)

    def test_optimize_qconfig_dtype_bf16(self):
        qconfig = self._edited("tail.json", {}, drop=("fc1:linear:0", "fc2:linear:0"))
        out = self.path("opt.pt")
        _, report = self.optimize(self.model, out, "--qconfig", qconfig, "--dtype", "bf16")
        mixed = report["quantize"]["mixed_bf16"]
        self.assertIs(mixed["applied"], True)
        self.assertEqual(mixed["compute_ops"], 2)
        self.assertEqual(mixed["bf16_edges"], 1)
        self._check_accuracy(out, True)


class ResNetMixed(e2e.ToolTestCase):
    """resnet18 with its stem conv and classifier left out of int8 (not in the qconfig)."""

    def test_stem_and_fc_in_bf16_int8_body(self):
        model = self.copy_model("resnet18")
        data = self.copy_input("resnet18")
        q = qc.calibrate(self, model, data, self.path("q.json"))
        # All int8: the input quantized by the stem's conv + pool op (its quantize taken in), one
        # dequantize at the logits (the rank check before adaptive_avg_pool2d reads the int8 tensor).
        full = self.path("full.pt")
        self.tool("quantize", model, full, "--qconfig", self.path("q.json"))
        _, report = self.optimize(model, self.path("opt.pt"), "--qconfig", self.path("q.json"))
        pools = report["quantize"]["int8_conv_max_pools"]
        self.assertEqual((pools["ops"], pools["fp32_inputs"]), (1, 1), pools)
        ops = qc.stock_eval(self, model, full, data, ops_library=True)["ops"]
        self.assertEqual(count(ops, "ipex::int8_conv_max_pool"), 1, ops)
        self.assertEqual(count(ops, "ipex::quantize_per_tensor"), 0, ops)
        self.assertEqual(count(ops, "aten::quantize_per_tensor"), 0, ops)
        self.assertEqual(count(ops, "ipex::dequantize"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 0, ops)
        # The global pool of the int8 tensor runs its own loop.
        self.assertEqual(count(ops, "ipex::int8_adaptive_avg_pool2d"), 1, ops)
        self.assertEqual(count(ops, "aten::adaptive_avg_pool2d"), 0, ops)
        q["ops"] = [op for op in q["ops"] if op["id"] not in ("conv1:conv2d:0", "fc:linear:0")]
        partial = qc.write_json(self.path("partial.json"), q)
        out = self.path("mixed.pt")
        self.tool("quantize", model, out, "--qconfig", partial, "--mixed-dtype", "bf16")
        r = qc.stock_eval(self, model, out, data, ops_library=True)
        self.assertGreater(r["cosine"], 0.98, r)
        ops = r["ops"]
        self.assertEqual(count(ops, "aten::conv2d"), 1, ops)
        self.assertEqual(count(ops, "aten::linear"), 1, ops)
        self.assertEqual(count(ops, "ipex::dequantize_bf16"), 1, ops)
        self.assertEqual(count(ops, "aten::dequantize"), 0, ops)
        self.assertEqual(count(ops, "ipex::quantize_per_tensor"), 1, ops)
        self.assertEqual(count(ops, "aten::quantize_per_tensor"), 0, ops)
        rt = runtime_dtypes(self, out, data, True)
        d = rt["dtypes"]
        for kind in ("aten::conv2d", "aten::relu", "aten::max_pool2d", "aten::linear"):
            self.assertEqual(d[kind], ["bfloat16"], (kind, d))
        self.assertEqual(rt["output"], "float32")


if __name__ == "__main__":
    e2e.main()
