"""``ipex_tool.quantization``: IPEX's INT8 API (prepare, calibrate on your batches, convert)
over `ipex-tool calibrate` and `ipex-tool quantize`."""

from ._qconfig import (SmoothQuantActivationObserver, default_dynamic_qconfig, default_dynamic_qconfig_mapping,
                       default_static_qconfig, default_static_qconfig_mapping, get_smooth_quant_qconfig_mapping)
from ._quantize import PreparedModel, convert, prepare

__all__ = ["prepare", "convert", "PreparedModel", "default_static_qconfig", "default_static_qconfig_mapping",
           "default_dynamic_qconfig", "default_dynamic_qconfig_mapping", "get_smooth_quant_qconfig_mapping",
           "SmoothQuantActivationObserver"]
