"""IPEX's qconfig mappings, and what a mapping asks of `ipex-tool calibrate` and `quantize`.

The mappings are torch.ao.quantization QConfigMappings with IPEX's observers, so scripts that
build or edit them keep working. ``settings`` reads the global qconfig's observers into the
request of the drivers: static (a calibration recipe: activation dtype, observer, SmoothQuant
alpha) or dynamic. What a mapping asks that the drivers cannot do is a warning naming it.
"""

import functools
import warnings

import torch
from torch.ao.quantization import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver,
                                   PerChannelMinMaxObserver, PlaceholderObserver, QConfig, QConfigMapping)

from .._bridge import IpexToolWarning, caller_stacklevel

RECIPE_FORMAT = "ipex-quant-recipe"
# torch observer class -> the --observer of `ipex-tool calibrate`
OBSERVERS = {
    HistogramObserver: "histogram_l2",
    MinMaxObserver: "min_max",
    MovingAverageMinMaxObserver: "moving_average",
}


class SmoothQuantActivationObserver(MinMaxObserver):
    """The activation observer of ``get_smooth_quant_qconfig_mapping``: min/max of the inputs
    after SmoothQuant migrated ``alpha`` of their range into the weights (calibrate
    --smooth-quant ALPHA)."""

    def __init__(self, alpha: float = 0.5, **kwargs):
        super().__init__(**kwargs)
        self.alpha = alpha


_WEIGHT = PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)

default_static_qconfig = QConfig(activation=HistogramObserver.with_args(reduce_range=False), weight=_WEIGHT)
default_dynamic_qconfig = QConfig(
    activation=PlaceholderObserver.with_args(dtype=torch.float, compute_dtype=torch.quint8), weight=_WEIGHT)
default_static_qconfig_mapping = QConfigMapping().set_global(default_static_qconfig)
default_dynamic_qconfig_mapping = QConfigMapping().set_global(default_dynamic_qconfig)


def get_smooth_quant_qconfig_mapping(alpha=0.5, act_observer=None, act_ic_observer=None, wei_observer=None,
                                     wei_ic_observer=None, share_weight_observers=True):
    """IPEX's SmoothQuant mapping: static INT8 with SmoothQuant at ``alpha`` on the linears.
    The observer arguments are IPEX's; ipex_tool's SmoothQuant uses its own (min/max of the
    smoothed activations, per-channel symmetric weights) and warns when one is given."""
    if not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"get_smooth_quant_qconfig_mapping: alpha {alpha!r} is outside [0, 1]")
    for name, value in (("act_observer", act_observer), ("act_ic_observer", act_ic_observer),
                        ("wei_observer", wei_observer), ("wei_ic_observer", wei_ic_observer)):
        if value is not None:
            _warn(f"get_smooth_quant_qconfig_mapping: {name} cannot be honoured; SmoothQuant uses min/max "
                  "activation and per-channel symmetric weight observers")
    if share_weight_observers is not True:
        _warn("get_smooth_quant_qconfig_mapping: share_weight_observers=False cannot be honoured")
    activation = SmoothQuantActivationObserver.with_args(alpha=float(alpha), dtype=torch.quint8)
    return QConfigMapping().set_global(QConfig(activation=activation, weight=_WEIGHT))


def _warn(message: str) -> None:
    warnings.warn(message, IpexToolWarning, stacklevel=caller_stacklevel())


def _observer(factory):
    """(class, keyword arguments) of an observer factory (a class or ``Class.with_args(...)``)."""
    partial = getattr(factory, "p", factory)
    if isinstance(partial, functools.partial):
        return partial.func, dict(partial.keywords)
    return partial, {}


def settings(configure) -> dict:
    """The drivers' request for a QConfigMapping (or a QConfig): {"dynamic": bool, "recipe":
    recipe JSON (static only)}."""
    if isinstance(configure, QConfig):
        qconfig = configure
    elif isinstance(configure, QConfigMapping):
        qconfig = configure.global_qconfig
        for what, entries in (("object_type", configure.object_type_qconfigs),
                              ("module_name", configure.module_name_qconfigs),
                              ("module_name_regex", configure.module_name_regex_qconfigs),
                              ("module_name_object_type_order", configure.module_name_object_type_order_qconfigs)):
            for key in entries:
                _warn(f"qconfig_mapping: the {what} entry {key!r} cannot be honoured (one qconfig for the whole "
                      "model); set an op's \"dtype\" in the saved qconfig summary to keep it in fp32")
    else:
        raise TypeError(f"ipex_tool.quantization: qconfig_mapping must be a QConfigMapping or QConfig, "
                        f"not {type(configure).__name__}")
    if qconfig is None:
        raise ValueError("ipex_tool.quantization: the qconfig_mapping has no global qconfig; use "
                         "default_static_qconfig_mapping, default_dynamic_qconfig_mapping or set_global(...)")
    act_class, act_args = _observer(qconfig.activation)
    weight_class, weight_args = _observer(qconfig.weight)
    if not (issubclass(weight_class, PerChannelMinMaxObserver) and weight_args.get("dtype") == torch.qint8
            and weight_args.get("qscheme") == torch.per_channel_symmetric):
        _warn(f"qconfig: the weight observer {weight_class.__name__}{weight_args or ''} cannot be honoured; weights "
              "are quantized per channel, symmetric, to qint8")
    if issubclass(act_class, PlaceholderObserver):
        return {"dynamic": True}
    recipe = {"format": RECIPE_FORMAT, "version": 1,
              "weight": {"dtype": "s8", "scheme": "per_channel_symmetric"}}
    if issubclass(act_class, SmoothQuantActivationObserver):
        observer = "min_max"
        recipe["smooth_quant"] = {"alpha": act_args.get("alpha", 0.5)}
    else:
        observer = next((name for cls, name in OBSERVERS.items() if issubclass(act_class, cls)), None)
        if observer is None:
            observer = "histogram_l2"
            _warn(f"qconfig: the activation observer {act_class.__name__} cannot be honoured; histogram_l2 is used")
    dtype = act_args.get("dtype", torch.quint8)
    if dtype not in (torch.quint8, torch.qint8):
        raise ValueError(f"ipex_tool.quantization: activation dtype {dtype} is not supported; use torch.quint8 "
                         "(asymmetric) or torch.qint8 (symmetric)")
    recipe["activation"] = {"dtype": "u8" if dtype == torch.quint8 else "s8", "observer": {"name": observer}}
    return {"dynamic": False, "recipe": recipe}
