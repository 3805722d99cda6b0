"""Shared helpers of the Python front end's tests (tests/python).

Environment (set by tests/python/CMakeLists.txt):
  PYTHONPATH  BUILD/python, where the build puts the ipex_tool package
  IPEX_TOOL   the ipex-tool binary (tests that compare the package with the CLI)

Models are built in the tests, seeded; torchvision's ResNets get random weights.
"""

import collections
import os
import sys
import tempfile
import unittest
import warnings

import torch

try:
    import ipex_tool as ipex
except ImportError as e:
    sys.exit(f"cannot import ipex_tool ({e}): run these tests through ctest "
             "(ctest --test-dir BUILD -L e2e) or set PYTHONPATH=BUILD/python")

# The CLI's verify tolerances: minimum cosine per dtype (man ipex-tool, VERIFY).
MIN_COSINE = {"fp32": 0.99999, "bf16": 0.999, "fp16": 0.999, "int8": 0.99}
FP32_ATOL = 1e-4


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


HAS_AVX512 = "avx512f" in cpu_flags()
NO_AVX512_REASON = ("oneDNN 2.6 has bf16 convolutions and linears only from AVX-512 on; without them a bf16 "
                    "model runs libtorch's reference bf16 code, too slow for this test")


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a = a.detach().double().flatten()
    b = b.detach().double().flatten()
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def flatten_outputs(out) -> list:
    """The tensors of a model's output in order (tuples, lists, dicts by key)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in flatten_outputs(out[k])]
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in flatten_outputs(x)]
    return []


def op_counts(module: torch.jit.ScriptModule) -> collections.Counter:
    """Node kinds of the module's inlined forward."""
    return collections.Counter(node.kind() for node in module.inlined_graph.nodes())


def ipex_ops(module: torch.jit.ScriptModule) -> collections.Counter:
    return collections.Counter({k: v for k, v in op_counts(module).items() if k.startswith("ipex::")})


class ConvBnRelu(torch.nn.Module):
    """Two conv-bn-relu blocks, a residual add, dropout and a linear head."""

    def __init__(self, channels: int = 8, classes: int = 5):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)
        self.drop = torch.nn.Dropout(0.2)
        self.fc = torch.nn.Linear(channels, classes)
        for bn in (self.bn1, self.bn2):  # non-trivial statistics, so folding matters
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + y)
        return self.fc(self.drop(y.mean((2, 3))))


class TinyEncoder(torch.nn.Module):
    """A BERT-shaped encoder: token embeddings, two transformer layers, a pooled head; takes
    ids and an attention mask and returns (sequence output, pooled output)."""

    def __init__(self, vocab: int = 100, hidden: int = 32, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = torch.nn.Linear(hidden, hidden)

    def forward(self, ids, mask):
        h = self.encoder(self.embed(ids), src_key_padding_mask=mask == 0)
        return h, torch.tanh(self.pool(h[:, 0]))


class TestCase(unittest.TestCase):
    """Seeded; a temporary directory per test (self.tmp)."""

    def setUp(self):
        torch.manual_seed(0)
        self._tmp = tempfile.TemporaryDirectory(prefix="ipex_tool-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def assert_close(self, got, want, dtype: str = "fp32", what: str = "output"):
        got_list, want_list = flatten_outputs(got), flatten_outputs(want)
        self.assertEqual(len(got_list), len(want_list), f"{what}: number of output tensors")
        for i, (g, w) in enumerate(zip(got_list, want_list)):
            self.assertEqual(tuple(g.shape), tuple(w.shape), f"{what}[{i}] shape")
            self.assertEqual(g.dtype, w.dtype, f"{what}[{i}] dtype (fp32 in, fp32 out)")
            c = cosine(g, w)
            self.assertGreaterEqual(c, MIN_COSINE[dtype], f"{what}[{i}] cosine {c} ({dtype})")
            if dtype == "fp32":
                scale = max(1.0, float(w.detach().abs().max()))
                err = float((g.detach() - w.detach()).abs().max())
                self.assertLessEqual(err, FP32_ATOL * scale, f"{what}[{i}] max abs error {err}")

    def ipex_warnings(self, caught) -> list:
        return [str(w.message) for w in caught if issubclass(w.category, ipex.IpexToolWarning)]


def main():
    warnings.simplefilter("default")
    unittest.main(verbosity=2)
