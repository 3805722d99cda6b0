"""``ipex_tool.cpu``: the CPU runtime (``ipex_tool.cpu.runtime``)."""

from . import runtime

__all__ = ["runtime"]
