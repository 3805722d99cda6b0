"""The native side of the package: libipex_pybridge.so, loaded from beside this file.

The bridge registers the ``ipex_tool::`` ops (the library's command drivers) and pulls in
libipex_ops.so, whose ``ipex::`` ops the optimized models hold; both are loaded once per process
with ``torch.ops.load_library``. Drivers take files and JSON options and return a JSON report;
the warnings they printed come back in the report and are issued here with ``warnings.warn``.
Their errors arrive as Python exceptions carrying the library's message: ValueError for a bad
argument or input file, NotImplementedError for an unsupported model or feature, RuntimeError
otherwise.
"""

import json
import os
import sys
import warnings

import torch

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))

LIBRARY_NAME = "libipex_pybridge.so"
OPS_LIBRARY_NAME = "libipex_ops.so"


class IpexToolWarning(UserWarning):
    """A warning of the ipex_tool library: a knob it cannot honour, a fallback it took."""


def _load_torchvision_first() -> None:
    """libipex_ops.so defines torchvision::'s detection ops under their own names only where no
    library defined them before it, and torchvision's library cannot load after those names
    exist. Importing torchvision (when installed) before the bridge keeps its kernels and lets
    the user import it in any order."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pass


def _load_bridge() -> str:
    _load_torchvision_first()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    if not os.path.exists(path):
        raise ImportError(
            f"ipex_tool: {path} is missing: build the ipex_pybridge target "
            "(the package is importable from BUILD/python after the build) or install with cmake --install")
    torch.ops.load_library(path)
    return path


LIBRARY_PATH = _load_bridge()
_ops = torch.ops.ipex_tool


def ops_library_path() -> str:
    """The libipex_ops.so this process loaded with the bridge (for other processes that load
    optimized models with ``torch.ops.load_library``)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path) == OPS_LIBRARY_NAME:
                return path
    raise RuntimeError(f"ipex_tool: {OPS_LIBRARY_NAME} is not loaded in this process")


def caller_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called right here that names the user's line:
    the first frame outside this package and torch (a model called through nn.Module)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith((_PACKAGE_DIR + os.sep, _TORCH_DIR + os.sep)):
            return level
        frame = frame.f_back
        level += 1
    return 1


def issue_warnings(report: dict) -> None:
    """Issues the warnings a driver's report carries, then drops them from it."""
    for text in report.pop("warnings", []):
        warnings.warn(text, IpexToolWarning, stacklevel=caller_stacklevel())


def call_json(op: str, *args) -> dict:
    """Calls ``ipex_tool::op`` (which returns JSON text) and returns the parsed report."""
    report = json.loads(getattr(_ops, op)(*args))
    issue_warnings(report)
    return report


def call(op: str, *args):
    """Calls ``ipex_tool::op`` and returns what it returns."""
    return getattr(_ops, op)(*args)
