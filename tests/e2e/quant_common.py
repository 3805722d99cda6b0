"""Helpers shared by the INT8 end-to-end tests (test_calibrate.py, test_quantize.py).

The quantization fixtures live in $IPEX_FIXTURES/quant, written by
tests/fixtures/make_quant_fixtures.py (ctest fixtures.quant)."""

import json
import os
import subprocess
import sys

import e2e_common as e2e

QUANT = os.path.join(e2e.FIXTURES, "quant")


def _manifest() -> dict:
    path = os.path.join(QUANT, "quant_fixtures.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"cannot read {path} ({e}): run the fixtures.quant test first")


MANIFEST = _manifest()
DIGITS = MANIFEST["digits"]
LN_MLP = MANIFEST["ln_mlp"]

# Runs in a fresh /usr/bin/python3 with nothing but torch imported: what a stock user does.
STOCK_EVAL = r"""
import json, sys
import torch
import torch.nn.functional as F
if len(sys.argv) > 5:
    torch.ops.load_library(sys.argv[5])
ref = torch.jit.load(sys.argv[1]).eval()
q = torch.jit.load(sys.argv[2]).eval()
data = torch.load(sys.argv[3])
labelled = sys.argv[4] == "labels"
if labelled:
    args, y = (data[0],), data[1]
else:
    args, y = (tuple(data) if isinstance(data, (tuple, list)) else (data,)), None

def tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, dict):
        return [t for k in sorted(v) for t in tensors(v[k])]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in tensors(x)]
    return []

with torch.no_grad():
    a, b = ref(*args), q(*args)
ta, tb = tensors(a), tensors(b)
fa = torch.cat([t.float().flatten() for t in ta])
fb = torch.cat([t.float().flatten() for t in tb])
out = {"cosine": F.cosine_similarity(fa, fb, 0).item(), "mse": ((fa - fb) ** 2).mean().item(),
       "dtypes": [str(t.dtype) for t in tb], "outputs": len(tb), "outputs_ref": len(ta)}
if y is not None:
    out["acc_ref"] = (a.argmax(1) == y).float().mean().item()
    out["acc_q"] = (b.argmax(1) == y).float().mean().item()
hist = {}
for node in q.graph.nodes():
    hist[node.kind()] = hist.get(node.kind(), 0) + 1
out["ops"] = hist
print(json.dumps(out))
"""


# libipex_ops.so of the build that made IPEX_TOOL (BUILD/apps/ipex-tool/ipex-tool).
OPS_LIBRARY = os.environ.get("IPEX_OPS_LIBRARY") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(e2e.TOOL))), "lib", "libipex_ops.so")


def stock_eval(case, reference: str, quantized: str, data: str, labels: bool = False,
               ops_library: bool = False) -> dict:
    """Loads both models in stock PyTorch and compares them on data: a (x, y) pair with
    labels=True (adds accuracies), else the model's inputs. With ops_library, Python loads
    libipex_ops.so first (torch.ops.load_library); otherwise nothing but torch."""
    extra = [OPS_LIBRARY] if ops_library else []
    proc = subprocess.run(["/usr/bin/python3", "-c", STOCK_EVAL, reference, quantized, data,
                           "labels" if labels else "inputs"] + extra,
                          capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
    case.assertEqual(proc.returncode, 0, f"stock torch could not run {quantized}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def copy_quant(case, name: str) -> str:
    """Copies a quantization fixture (file or directory) into the test's temp dir."""
    return case.copy_fixture(os.path.join("quant", name), os.path.basename(name))


def calibrate(case, model: str, data: str, out: str, *flags) -> dict:
    case.tool("calibrate", model, "--data", data, "--out", out, *flags)
    with open(out) as f:
        return json.load(f)


def write_json(path: str, obj) -> str:
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
    return path


# Quantization facts of a saved int8 model: dtype and zero point of every quantize_per_tensor
# (aten's in portable models, ipex's with the ipex ops)
# and the describe() text of every ipex Int8Context ("int8 conv2d [..] s8->u8 +relu"), those of an
# ipex::int8_graph included.
GRAPH_FACTS = r"""
import json, sys
import torch
if len(sys.argv) > 2:
    torch.ops.load_library(sys.argv[2])
m = torch.jit.load(sys.argv[1])
out = {"quantize": [], "contexts": []}
for node in m.graph.nodes():
    if node.kind() in ("aten::quantize_per_tensor", "ipex::quantize_per_tensor"):
        ins = list(node.inputs())
        out["quantize"].append({"zero_point": ins[2].toIValue(), "dtype": str(ins[3].toIValue())})
    if node.kind() in ("ipex::int8_op", "ipex::int8_op_sum"):
        out["contexts"].append(list(node.inputs())[-1].toIValue().describe())
    if node.kind() == "ipex::int8_conv_max_pool":
        out["contexts"].append(list(node.inputs())[1].toIValue().describe())
    if node.kind() == "ipex::int8_graph":  # its contexts in program order
        out["contexts"] += [v.toIValue().describe() for v in list(node.inputs())[1].node().inputs()]
print(json.dumps(out))
"""


def graph_facts(case, model: str, ops_library: bool = False) -> dict:
    extra = [OPS_LIBRARY] if ops_library else []
    proc = subprocess.run(["/usr/bin/python3", "-c", GRAPH_FACTS, model] + extra,
                          capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT)
    case.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    return json.loads(proc.stdout)


def count(hist: dict, *kinds) -> int:
    """How many ops of any of `kinds` an op histogram holds."""
    return sum(n for k, n in hist.items() if k in kinds)


class DigitsCase(e2e.ToolTestCase):
    """A test on the digits CNN: its model, calibration and test sets copied in, and a qconfig
    calibrated with the default recipe at self.qconfig."""

    def setUp(self):
        super().setUp()
        self.model = copy_quant(self, DIGITS["model"])
        self.calib = copy_quant(self, DIGITS["calib"])
        self.test_set = copy_quant(self, DIGITS["test"])
        self.qconfig = self.path("q.json")
        self.tool("calibrate", self.model, "--data", self.calib, "--out", self.qconfig)
