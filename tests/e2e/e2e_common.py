"""Shared helpers for the end-to-end CLI tests.

Environment (set by tests/e2e/CMakeLists.txt):
  IPEX_TOOL      path to the ipex-tool binary
  IPEX_FIXTURES  directory written by tests/fixtures/make_fixtures.py
  IPEX_OPS_LIBRARY  libipex_ops.so (models with prepacked ops load it in Python)

Every test case runs the binary in a fresh temporary directory (self.tmp) and copies the
fixture files it hands to the binary into that directory, so a misbehaving binary can never
damage the shared fixtures.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK_IN_PYTHON = os.path.join(os.path.dirname(HERE), "fixtures", "check_in_python.py")
PYTHON = sys.executable

ERROR_PREFIX = "ipex-tool: error:"
WARNING_PREFIX = "ipex-tool: warning:"

# Exit codes of DESIGN.md.
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_UNSUPPORTED = 4
EXIT_INTERNAL = 5

# Seconds one invocation may take before the test fails instead of hanging.
RUN_TIMEOUT = 300

DROPOUT_OPS = ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
# batch norms kept as norms: aten's, or folded to a scale and shift (ipex::norm_relu, prepacked)
BATCH_NORM_OPS = ("batch_norm", "norm_relu")
CONV_LINEAR_OPS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                   "conv_transpose3d", "convolution", "_convolution", "linear")
PASS_NAMES = ("freeze", "remove_dropout", "fold_conv_bn", "fold_linear_bn", "concat_linear",
              "to_channels_last", "decompose_transformer_layer", "fuse_attention", "split_cat_conv", "fuse_layer_norm",
              "cast_to_lowp",
              "optimize_lstm",
              "replace_matmul", "weights_prepack",
              "auto_kernel_selection", "fuse_eltwise", "fuse_conv_sum", "fuse_linear_binary",
              "chain_bf32_outputs",
              "restore_output_layout", "fuse_norm_relu", "fuse_channel_shuffle", "replace_mul",
              "replace_topk", "contiguous_before_view")
PASS_STATUSES = ("applied", "disabled")


def _require_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run these tests through ctest "
                 f"(ctest --test-dir BUILD -L e2e) or export {name}")
    return value


TOOL = _require_env("IPEX_TOOL")
FIXTURES = _require_env("IPEX_FIXTURES")
OPS_LIBRARY = _require_env("IPEX_OPS_LIBRARY")


def manifest() -> dict:
    path = os.path.join(FIXTURES, "fixtures.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"cannot read {path} ({e}): run the fixtures.generate test first")


MANIFEST = manifest()
MODELS: Dict[str, dict] = MANIFEST["models"]
FILES: Dict[str, dict] = MANIFEST["files"]
BAD_MODELS = sorted(name for name, entry in FILES.items() if entry.get("bad_model"))
BAD_TENSORS = sorted(name for name, entry in FILES.items() if entry.get("bad_tensor"))


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# oneDNN 2.6 has bf16 (and bf32) convolutions, linears and RNNs only from AVX-512 on (avx512_core):
# below that, optimize --dtype bf16 keeps those layers as aten ops (named in the report's
# skipped), so tests of prepacked bf16 layers skip there with this reason.
ONEDNN_BF16 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= _cpu_flags()
NO_ONEDNN_BF16 = "this CPU has no AVX-512: oneDNN 2.6 has no bf16 convolution/linear here, optimize keeps them aten"
# u8 x s8 dot products summed exactly in 32 bits (int8_weight_scale_factor in ops/int8/int8_context.h).
VNNI = bool({"avx512_vnni", "avx_vnni"} & _cpu_flags())


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def sha256(path: str) -> str:
    if os.path.isdir(path):
        return "directory:" + ",".join(sorted(os.listdir(path)))
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def count_ops(histogram: Dict[str, int], names) -> int:
    """Sums the counts of ops whose base name (namespace and trailing '_' dropped) is in names."""
    total = 0
    for kind, n in histogram.items():
        if kind.split("::", 1)[-1].rstrip("_") in names:
            total += int(n)
    return total


def count_aten(histogram: Dict[str, int], names) -> int:
    """Sums the counts of aten:: ops whose base name is in names."""
    return sum(int(n) for kind, n in histogram.items()
               if kind.startswith("aten::") and kind[len("aten::"):].rstrip("_") in names)


def count_ipex(histogram: Dict[str, int]) -> int:
    """Counts the ops of the ipex namespace (prepacked convolutions and linears)."""
    return sum(int(n) for kind, n in histogram.items() if kind.startswith("ipex::"))


class Result:
    def __init__(self, args: List[str], proc: subprocess.CompletedProcess):
        self.args = args
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def lines(self, stream: str) -> List[str]:
        return [line for line in getattr(self, stream).splitlines() if line.strip()]

    def errors(self) -> List[str]:
        return [line for line in self.lines("stderr") if line.startswith(ERROR_PREFIX)]

    def warnings(self) -> List[str]:
        return [line for line in self.lines("stderr") if line.startswith(WARNING_PREFIX)]

    def json(self) -> dict:
        return json.loads(self.stdout)

    def describe(self) -> str:
        return (f"$ {' '.join(self.args)}\nexit {self.code}\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}")


class ToolTestCase(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ipex-e2e-")
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for root, dirs, _ in os.walk(self.tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- files

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, name)

    def copy_fixture(self, name: str, dest: Optional[str] = None) -> str:
        """Copies a fixture (file or directory) into the temp dir; returns the new path."""
        dst = self.path(dest or name)
        src = fixture(name)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copyfile(src, dst)
        return dst

    def copy_model(self, model: str) -> str:
        return self.copy_fixture(MODELS[model]["file"])

    def copy_input(self, model: str) -> str:
        return self.copy_fixture(MODELS[model]["input_file"])

    def assert_no_stray_files(self, directory: str, allowed):
        """A run leaves only the files it was asked to write (no temporaries)."""
        extra = sorted(set(os.listdir(directory)) - set(allowed))
        self.assertEqual(extra, [], f"unexpected files left in {directory}")

    # -- running

    def run_tool(self, *args, cwd: Optional[str] = None, timeout: int = RUN_TIMEOUT) -> Result:
        argv = [TOOL] + [str(a) for a in args]
        proc = subprocess.run(argv, cwd=cwd or self.tmp, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(argv, proc)

    def tool(self, *args, expect: int = EXIT_OK, **kwargs) -> Result:
        result = self.run_tool(*args, **kwargs)
        self.assertEqual(result.code, expect, f"unexpected exit code\n{result.describe()}")
        if expect == EXIT_OK:
            self.assertEqual(result.errors(), [], f"error printed on success\n{result.describe()}")
        return result

    def assert_error(self, result: Result, code, *mentions: str) -> str:
        """Exit code `code` (or one of a tuple), exactly one `ipex-tool: error:` line naming
        every string in `mentions`, and nothing on stderr but that line and warnings."""
        codes = code if isinstance(code, tuple) else (code,)
        self.assertIn(result.code, codes, f"unexpected exit code\n{result.describe()}")
        errors = result.errors()
        self.assertEqual(len(errors), 1,
                         f"expected exactly one '{ERROR_PREFIX}' line\n{result.describe()}")
        other = [line for line in result.lines("stderr")
                 if not line.startswith((ERROR_PREFIX, WARNING_PREFIX))]
        self.assertEqual(other, [], f"stderr holds more than the error line\n{result.describe()}")
        line = errors[0]
        self.assertGreater(len(line), len(ERROR_PREFIX) + 10, "error message is empty")
        self.assertLess(len(line), 1000, f"error line is not readable:\n{line}")
        for text in mentions:
            self.assertIn(text.lower(), line.lower(),
                          f"error line does not mention {text!r}\n{result.describe()}")
        return line

    def tool_json(self, *args, expect: int = EXIT_OK) -> dict:
        result = self.tool(*args, expect=expect)
        try:
            return result.json()
        except ValueError as e:
            self.fail(f"stdout is not JSON ({e})\n{result.describe()}")

    def inspect(self, model_path: str) -> dict:
        return self.tool_json("inspect", model_path, "--json")

    def optimize(self, src: str, dst: str, *flags, expect: int = EXIT_OK):
        """Runs optimize with --report FILE; returns (result, report or None)."""
        report_path = dst + ".report.json"
        result = self.tool("optimize", src, dst, "--report", report_path, *flags, expect=expect)
        report = None
        if expect == EXIT_OK:
            self.assertTrue(os.path.isfile(dst), f"{dst} not written\n{result.describe()}")
            self.assertTrue(os.path.isfile(report_path),
                            f"report {report_path} not written\n{result.describe()}")
            with open(report_path) as f:
                report = json.load(f)
        return result, report

    def check_in_python(self, original: str, optimized: str, inputs: str,
                        dtype: str = "fp32", ops_library: Optional[str] = OPS_LIBRARY) -> str:
        """tests/fixtures/check_in_python.py's check, run in this process (torch with
        libipex_ops.so loaded) to save an interpreter start per call. Whether a model runs
        without the library is checked with run_check_in_python, in a fresh process."""
        code, text = _check_module().check(original, optimized, inputs, dtype, ops_library)
        self.assertEqual(code, 0, f"check_in_python {dtype} failed (exit {code}):\n{text}")
        return text

    def run_check_in_python(self, original: str, optimized: str, inputs: str,
                            dtype: str = "fp32", ops_library: Optional[str] = None
                            ) -> subprocess.CompletedProcess:
        """The same check as a separate process, the way a user runs the script."""
        extra = ["--ops-library", ops_library] if ops_library else []
        return subprocess.run([PYTHON, CHECK_IN_PYTHON, original, optimized, inputs,
                               "--dtype", dtype] + extra,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)

    @staticmethod
    def pass_entry(report: dict, name: str) -> dict:
        for entry in report.get("passes", []):
            if entry.get("name") == name:
                return entry
        raise AssertionError(f"pass {name!r} missing from report passes: "
                             f"{[p.get('name') for p in report.get('passes', [])]}")


_CHECK_MODULE = None


def _check_module():
    """Imports check_in_python.py (and with it torch) on first use."""
    global _CHECK_MODULE
    if _CHECK_MODULE is None:
        spec = importlib.util.spec_from_file_location("check_in_python", CHECK_IN_PYTHON)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _CHECK_MODULE = module
    return _CHECK_MODULE


def add_per_model_tests(cls, models, method: str, prefix: str = "test_"):
    """Adds one test method per model name: cls.<prefix><model>() -> self.<method>(model)."""
    for name in models:
        def test(self, model=name):
            getattr(self, method)(model)
        test.__name__ = f"{prefix}{name}"
        test.__doc__ = f"{method.strip('_').replace('_', ' ')}: {name}"
        setattr(cls, test.__name__, test)


def main():
    unittest.main(verbosity=2)
