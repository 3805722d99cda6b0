"""The fp32 math mode: whether fp32 convolutions and linears may compute in bf16 (bf32).

As IPEX's, the mode is the process's. Here it is read by ``ipex_tool.optimize``, which records
it in the models it writes (``ipex-tool optimize --fp32-math-mode``): set it before optimizing.
"""

import enum

from . import _bridge


class FP32MathMode(enum.IntEnum):
    """IPEX's modes; TF32 is a GPU mode, which neither IPEX nor ipex_tool has on CPUs."""
    FP32 = 0
    TF32 = 1
    BF32 = 2


_NAMES = {FP32MathMode.FP32: "fp32", FP32MathMode.BF32: "bf32"}


def set_fp32_math_mode(mode=FP32MathMode.FP32, device="cpu"):
    """Sets the fp32 math mode of the models ``ipex_tool.optimize`` writes from now on:
    ``FP32MathMode.BF32`` lets their prepacked fp32 convolutions and linears compute in bf16,
    ``FP32MathMode.FP32`` keeps strict fp32 (the default)."""
    if device != "cpu":
        raise ValueError(f"set_fp32_math_mode: device {device!r} is not supported; ipex_tool runs on 'cpu'")
    try:
        mode = FP32MathMode(mode)
    except ValueError:
        raise ValueError(f"set_fp32_math_mode: {mode!r} is not an FP32MathMode (FP32, BF32)") from None
    if mode not in _NAMES:
        raise ValueError(f"set_fp32_math_mode: {mode.name} is a GPU mode; on CPUs use FP32MathMode.FP32 or BF32")
    _bridge.call("set_fp32_math_mode", _NAMES[mode])


def get_fp32_math_mode(device="cpu"):
    """The current fp32 math mode (``FP32MathMode.FP32`` or ``FP32MathMode.BF32``)."""
    if device != "cpu":
        raise ValueError(f"get_fp32_math_mode: device {device!r} is not supported; ipex_tool runs on 'cpu'")
    name = _bridge.call("get_fp32_math_mode")
    return FP32MathMode.BF32 if name == "bf32" else FP32MathMode.FP32


def mode_name() -> str:
    """The mode as ``ipex-tool optimize --fp32-math-mode`` spells it."""
    return _bridge.call("get_fp32_math_mode")
