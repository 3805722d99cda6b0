"""``prepare`` and ``convert``: IPEX's static and dynamic INT8 flow over `ipex-tool calibrate`
and `ipex-tool quantize`.

``prepare`` makes the model TorchScript (traced with the example inputs, scripted where tracing
cannot) and returns a PreparedModel: calling it runs the fp32 model and keeps the batch for
calibration, as IPEX's observers see it. ``convert`` calibrates on those batches (or uses the
qconfig summary loaded into the prepared model) and returns the INT8 ScriptModule, fp32 in and
out.
"""

import inspect
import json
import os
import shutil
import tempfile
import weakref

import torch

from .. import _bridge, _script
from . import _qconfig

QCONFIG_FORMAT = "ipex-qconfig"


class PreparedModel(torch.nn.Module):
    """A model ready for calibration: each call runs it in fp32 and records its inputs."""

    def __init__(self, script_module: torch.jit.ScriptModule, signature, request: dict):
        super().__init__()
        self.__dict__["_model"] = script_module
        self.__dict__["_signature"] = signature
        # the recorded batches and the qconfig live as long as the prepared model
        self.__dict__["_dir"] = tempfile.mkdtemp(prefix="ipex_tool-calib-")
        weakref.finalize(self, shutil.rmtree, self.__dict__["_dir"], True)
        self._request = request
        self._batches = 0
        self._qconfig = None  # (path, batches it was calibrated on; -1 when loaded)
        self.eval()

    def _path(self, name: str) -> str:
        return os.path.join(self.__dict__["_dir"], name)

    def forward(self, *args, **kwargs):
        args = _script.bind_positional(self.__dict__["_signature"], args, kwargs)
        if not self._request["dynamic"]:
            if not all(isinstance(x, torch.Tensor) for x in args):
                raise TypeError("ipex_tool.quantization: calibration batches must be tensors (the model's "
                                "positional inputs)")
            os.makedirs(self._path("batches"), exist_ok=True)
            torch.save(tuple(x.detach() for x in args), self._path(f"batches/batch_{self._batches:06d}.pt"))
            self._batches += 1
        with torch.no_grad():
            return self.__dict__["_model"](*args)

    def _model_file(self) -> str:
        path = self._path("model.pt")
        if not os.path.exists(path):
            torch.jit.save(self.__dict__["_model"], path)
        return path

    def qconfig_file(self) -> str:
        """Our qconfig for the model: the loaded summary, or calibrated on the batches so far."""
        if self._qconfig and self._qconfig[1] in (-1, self._batches):
            return self._qconfig[0]
        if self._request["dynamic"]:
            raise ValueError("ipex_tool.quantization: a dynamic qconfig has no calibration summary; "
                             "use a static qconfig_mapping")
        if self._batches == 0:
            raise ValueError("ipex_tool.quantization: no calibration batches: call the prepared model on your "
                             "calibration data before convert or save_qconf_summary")
        path = self._path("qconfig.json")
        recipe = self._path("recipe.json")
        with open(recipe, "w") as f:
            json.dump(self._request["recipe"], f)
        report = _bridge.call_json("calibrate_file", self._model_file(), self._path("batches"), path,
                                   json.dumps({"recipe": recipe}))
        self.calibration_report = report
        self._qconfig = (path, self._batches)
        return path

    def save_qconf_summary(self, qconf_summary):
        """Writes the calibrated qconfig (ipex-tool's qconfig JSON, man ipex-qconfig(5))."""
        shutil.copyfile(self.qconfig_file(), os.fspath(qconf_summary))

    def load_qconf_summary(self, qconf_summary):
        """Uses a saved qconfig instead of calibrating: ipex-tool's, or the summary IPEX's
        save_qconf_summary wrote (converted for this model now: an entry that matches none of its
        ops is a ValueError naming it)."""
        path = os.fspath(qconf_summary)
        try:
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"ipex_tool.quantization: cannot read the qconfig summary '{path}': {e}") from None
        if not isinstance(summary, dict):
            raise ValueError(f"ipex_tool.quantization: '{path}' is not a qconfig summary (not a JSON object)")
        if "format" not in summary and summary and all(isinstance(v, dict) and "q_op_infos" in v
                                                       for v in summary.values()):
            converted = self._path("ipex-summary-qconfig.json")
            self.calibration_report = _bridge.call_json("calibrate_file", self._model_file(), "", converted,
                                                        json.dumps({"ipex_summary": path}))
            self._qconfig = (converted, -1)
            return
        if summary.get("format") != QCONFIG_FORMAT:
            raise ValueError(f"ipex_tool.quantization: '{path}' is not a qconfig summary: its \"format\" is "
                             f"{summary.get('format')!r}, not '{QCONFIG_FORMAT}', and it is not IPEX's summary "
                             "(an object of modules, each with \"q_op_infos\")")
        copy = self._path("loaded-qconfig.json")
        shutil.copyfile(path, copy)
        self._qconfig = (copy, -1)


def prepare(model, qconfig_mapping, example_inputs=None, inplace=False, bn_folding=True, example_kwarg_inputs=None):
    """IPEX's prepare: the model ready for calibration with ``qconfig_mapping``
    (default_static_qconfig_mapping, default_dynamic_qconfig_mapping,
    get_smooth_quant_qconfig_mapping(alpha), or a QConfigMapping of your own)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"ipex_tool.quantization.prepare: model must be a torch.nn.Module, not {type(model).__name__}")
    request = _qconfig.settings(qconfig_mapping)
    if inplace:
        _qconfig._warn("prepare: inplace=True cannot be honoured: the model is left as it is; use the return value")
    if bn_folding is not True:
        _qconfig._warn("prepare: bn_folding=False cannot be honoured: batch norms are folded when converting")
    signature = inspect.signature(model.forward)
    if example_kwarg_inputs is not None:
        if example_inputs is not None:
            raise ValueError("ipex_tool.quantization.prepare: give example_inputs or example_kwarg_inputs, not both")
        example_inputs = _script.bind_positional(signature, (), dict(example_kwarg_inputs))
    if isinstance(model, torch.jit.ScriptModule):
        script_module = model
    else:
        if example_inputs is None:
            raise ValueError("ipex_tool.quantization.prepare: example_inputs are needed to trace an eager model")
        script_module = _script.to_script_module(model, _script.as_input_tuple(example_inputs))
    return PreparedModel(script_module, signature, request)


def convert(model, inplace=False):
    """IPEX's convert: the INT8 model (a ScriptModule, fp32 in and out) from a prepared one,
    with its quantizer's report as ``ipex_tool_report``."""
    if not isinstance(model, PreparedModel):
        raise TypeError("ipex_tool.quantization.convert: the model must come from ipex_tool.quantization.prepare")
    if inplace:
        _qconfig._warn("convert: inplace=True cannot be honoured: use the return value")
    options = {"dynamic": True} if model._request["dynamic"] else {"qconfig": model.qconfig_file()}
    with tempfile.TemporaryDirectory(prefix="ipex_tool-int8-") as tmp:
        out = os.path.join(tmp, "model-int8.pt")
        report = _bridge.call_json("quantize_file", model._model_file(), out, json.dumps(options))
        converted = _script.loaded_for_inference(torch.jit.load(out))
    converted.ipex_tool_report = report
    return converted
