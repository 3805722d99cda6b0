"""``ipex_tool.optimize``: IPEX's signature, run through the pipeline of ``ipex-tool optimize``.

An eager model becomes TorchScript first (traced with ``sample_input``, scripted where tracing
cannot; without ``sample_input``, traced from the inputs of its first call); a ScriptModule goes
in as it is. The optimize driver then runs on it with the request the CLI would build from the
same knobs, and the result is a ScriptModule: fp32 in and out whatever the compute dtype, the
model's output structure, ``torch.jit.save``-able (it needs libipex_ops.so, which importing
ipex_tool loads).
"""

import difflib
import inspect
import json
import os
import tempfile
import threading
import warnings

import torch

from . import _bridge, _script, math_mode, nn, optim

# IPEX's keyword -> the knob of `ipex-tool optimize` (--[no-]KNOB).
IPEX_KNOBS = {
    "conv_bn_folding": "conv-bn-folding",
    "linear_bn_folding": "linear-bn-folding",
    "weights_prepack": "weights-prepack",
    "replace_dropout_with_identity": "replace-dropout",
    "optimize_lstm": "optimize-lstm",
    "auto_kernel_selection": "auto-kernel-selection",
    "concat_linear": "concat-linear",
}
# IPEX's training knobs: they act only with an optimizer (docs/training.md).
TRAINING_KNOBS = ("split_master_weight_for_bf16", "fuse_update_step")
LEVELS = ("O0", "O1")
DTYPES = {None: "fp32", torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
# Options of ipex-tool optimize that IPEX's signature lacks, accepted as keywords too.
EXTRA_OPTIONS = ("portable", "keep_dtype")


def _knob_keywords() -> dict:
    """Every knob of the CLI as a Python keyword (channels_last, fuse_attention, ...)."""
    table = json.loads(_bridge.call("knob_table"))
    return {flag.replace("-", "_"): flag for flag in table["levels"]["O1"]}


def _warn(message: str) -> None:
    warnings.warn(f"ipex_tool.optimize: {message}", _bridge.IpexToolWarning, stacklevel=_bridge.caller_stacklevel())


def _check_bool(name: str, value) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"ipex_tool.optimize: {name} must be True, False or None, not {value!r}")


def _build_request(dtype, level, knobs: dict, extra: dict) -> dict:
    """The optimize driver's options: the CLI's request for the same settings."""
    if not isinstance(dtype, torch.dtype) and dtype is not None:
        raise TypeError(f"ipex_tool.optimize: dtype must be a torch.dtype (torch.float32, torch.bfloat16, "
                        f"torch.half) or None, not {dtype!r}")
    if dtype not in DTYPES:
        raise ValueError(f"ipex_tool.optimize: dtype {dtype} is not supported; use torch.float32, torch.bfloat16 "
                         "or torch.half (int8: ipex_tool.quantization)")
    if level not in LEVELS:
        raise ValueError(f"ipex_tool.optimize: unexpected optimization level {level!r}; options are 'O0', 'O1'")
    request = {"dtype": DTYPES[dtype], "level": level, "fp32_math_mode": math_mode.mode_name()}
    request["knobs"] = {flag: on for flag, on in knobs.items() if on is not None}
    for name, value in extra.items():
        if value is not None:
            request[name] = value
    return request


def _save_inputs(inputs: tuple, directory: str):
    """The sample inputs as the SPEC of a file (a tuple of tensors saved by torch.save), or None
    when they are not all tensors (the trace still uses them; shapes are then not recorded)."""
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        return None
    path = os.path.join(directory, "sample_input.pt")
    torch.save(tuple(x.detach() for x in inputs), path)
    return path


def run_pipeline(script_module: torch.jit.ScriptModule, request: dict, sample_inputs=None):
    """Runs the optimize driver on ``script_module`` (saved to a temporary file) and returns the
    optimized ScriptModule with the driver's report as ``ipex_tool_report``."""
    with tempfile.TemporaryDirectory(prefix="ipex_tool-") as tmp:
        src = os.path.join(tmp, "model.pt")
        dst = os.path.join(tmp, "model-optimized.pt")
        torch.jit.save(script_module, src)
        request = dict(request)
        spec = _save_inputs(sample_inputs or (), tmp)
        if spec:
            request["sample_inputs"] = [spec]
        report = _bridge.call_json("optimize_file", src, dst, json.dumps(request))
        optimized = _script.loaded_for_inference(torch.jit.load(dst))
    optimized.ipex_tool_report = report
    return optimized


class LazyOptimizedModule(torch.nn.Module):
    """What ``optimize`` returns for an eager model without ``sample_input``: the model is traced
    with the inputs of its first call and optimized then; every call runs the optimized model.
    ``torch.jit.trace`` of this module records one call of the optimized model, and
    ``torch.jit.save`` works once it has been called."""

    def __init__(self, model: torch.nn.Module, request: dict):
        super().__init__()
        # kept out of _modules: not a submodule of the result (state_dict, .to, tracing)
        self.__dict__["_source"] = model
        self.__dict__["_optimized"] = None
        self.__dict__["_function"] = None
        self.__dict__["_signature"] = inspect.signature(model.forward)
        self._request = request
        self._lock = threading.Lock()
        self.eval()  # an inference model: torch.jit.freeze of its trace expects eval mode

    @property
    def optimized(self):
        """The optimized ScriptModule, or None before the first call."""
        return self.__dict__["_optimized"]

    def _optimize(self, args: tuple) -> torch.jit.ScriptModule:
        with self._lock:
            if self.optimized is None:
                with _script.no_outer_trace():
                    inputs = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in args)
                    script_module = _script.to_script_module(self._source, inputs)
                    self.__dict__["_optimized"] = run_pipeline(script_module, self._request, inputs)
                    self.__dict__["_source"] = None
            return self.optimized

    def forward(self, *args, **kwargs):
        args = _script.bind_positional(self.__dict__["_signature"], args, kwargs)
        optimized = self.optimized
        if optimized is None:
            optimized = self._optimize(args)
        if torch._C._get_tracing_state() is None:
            return optimized(*args)
        if self.__dict__["_function"] is None:
            with _script.no_outer_trace():
                function = _script.graph_function(optimized)
            if function is None:
                raise RuntimeError("ipex_tool.optimize: the optimized model reads its attributes and cannot be "
                                   "recorded inside torch.jit.trace; use it as it is (it is TorchScript already)")
            self.__dict__["_function"] = function
        return self.__dict__["_function"](*args)

    def _require_optimized(self) -> torch.jit.ScriptModule:
        if self.optimized is None:
            raise RuntimeError("ipex_tool.optimize: the model is optimized at its first call (no sample_input was "
                               "given); call it once, or pass sample_input to optimize, before saving it")
        return self.optimized

    # torch.jit.save(m, f) calls m.save(f) or m.save_to_buffer(): the optimized model's.
    def save(self, f, _extra_files=None):
        return self._require_optimized().save(f, _extra_files=_extra_files or {})

    def save_to_buffer(self, _extra_files=None):
        return self._require_optimized().save_to_buffer(_extra_files=_extra_files or {})

    @property
    def ipex_tool_report(self):
        """The optimize report, or None before the first call."""
        optimized = self.optimized
        return None if optimized is None else optimized.ipex_tool_report


def optimize(model, dtype=None, optimizer=None, level="O1", inplace=False, conv_bn_folding=None,
             linear_bn_folding=None, weights_prepack=None, replace_dropout_with_identity=None, optimize_lstm=None,
             split_master_weight_for_bf16=None, fuse_update_step=None, auto_kernel_selection=None, sample_input=None,
             graph_mode=None, concat_linear=None, **kwargs):
    """Optimizes ``model`` for inference on this CPU, as ``ipex-tool optimize`` does.

    IPEX's arguments and defaults. ``dtype``: None or torch.float32 (fp32), torch.bfloat16 or
    torch.half (computed in that dtype, fp32 in and out). ``level``: "O0" (nothing unless a knob
    asks) or "O1" (the knobs' defaults in ``ipex-tool optimize --help``). A knob left None keeps
    the level's default; True/False overrides it. ``sample_input`` (a tensor or a tuple) is what
    an eager model is traced with, and fixes the shapes the passes specialize for; without it an
    eager model is traced at its first call. Besides IPEX's knobs, the CLI's others are keywords
    too (``channels_last``, ``fuse_attention``, ``conv_chains``), as are ``portable`` and
    ``keep_dtype``. A knob that cannot be honoured is a warning naming it.

    With ``optimizer`` (torch.optim.SGD, Adagrad, Adam, AdamW; ipex_tool.optim.Lamb, Lars) it prepares eager training instead and
    returns ``(model, optimizer)``, both changed in place: fused optimizer steps and, with
    ``dtype=torch.bfloat16``, split bf16 master weights (``ipex_tool.optim``), and the model's
    ``nn.Linear`` modules run forward and backward through oneDNN (``ipex_tool.nn.TrainingLinear``;
    ``weights_prepack=False`` keeps aten's). The other inference knobs do not apply there.
    """
    if optimizer is not None:
        unknown = sorted(set(kwargs) - set(_knob_keywords()) - set(EXTRA_OPTIONS))
        if unknown:
            raise TypeError(f"ipex_tool.optimize: unknown keyword argument {unknown[0]!r}")
        for name in TRAINING_KNOBS + ("weights_prepack",):  # weights_prepack: TrainingLinear or aten's
            _check_bool(name, locals()[name])
        merged_tables = nn.plan_training(model, optimizer, fuse_update_step)
        model, optimizer = optim.optimize_training(model, optimizer, dtype, split_master_weight_for_bf16,
                                                   fuse_update_step)
        nn.apply_training(merged_tables, optimizer, dtype, split_master_weight_for_bf16)
        if weights_prepack is not False:
            nn.use_training_linear(model)
        return model, optimizer
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"ipex_tool.optimize: model must be a torch.nn.Module or ScriptModule, not {type(model).__name__}")

    knob_keywords = _knob_keywords()
    knobs = {}
    for name, flag in IPEX_KNOBS.items():
        value = locals()[name]
        _check_bool(name, value)
        knobs[flag] = value
    extra = {}
    for name, value in kwargs.items():
        if name in knob_keywords and name not in IPEX_KNOBS:
            _check_bool(name, value)
            knobs[knob_keywords[name]] = value
        elif name in EXTRA_OPTIONS:
            _check_bool(name, value)
            extra[name] = value
        else:
            known = list(IPEX_KNOBS) + list(TRAINING_KNOBS) + list(knob_keywords) + list(EXTRA_OPTIONS) + [
                "dtype", "optimizer", "level", "inplace", "sample_input", "graph_mode"]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"ipex_tool.optimize: unknown keyword argument {name!r}{hint}")
    request = _build_request(dtype, level, knobs, extra)

    for name in TRAINING_KNOBS:
        value = locals()[name]
        _check_bool(name, value)
        if value:
            _warn(f"{name}=True applies to training with an optimizer; ignored for inference")
    _check_bool("graph_mode", graph_mode)
    if graph_mode is False:
        _warn("graph_mode=False cannot be honoured: the optimized model is always a TorchScript graph")
    _check_bool("inplace", inplace)
    if inplace:
        _warn("inplace=True cannot be honoured: the model is left as it is and the optimized model is "
              "returned; use the return value")

    if isinstance(model, torch.jit.ScriptModule):
        inputs = _script.as_input_tuple(sample_input) if sample_input is not None else None
        return run_pipeline(model, request, inputs)
    if model.training:
        _warn("the model is in training mode and no optimizer was given: it is optimized for inference "
              "(eval mode); call model.eval() first to silence this")
    if sample_input is None:
        return LazyOptimizedModule(model, request)
    inputs = _script.as_input_tuple(sample_input)
    return run_pipeline(_script.to_script_module(model, inputs), request, inputs)
