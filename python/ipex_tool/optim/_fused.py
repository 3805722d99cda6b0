"""``ipex_tool.optimize(model, optimizer=opt, ...)`` for training: fused optimizer steps and
split bf16 master weights (issue 51).

The optimizer's ``step`` becomes one fused op per parameter (``ipex::sgd_step``,
``ipex::adagrad_step``, ``ipex::adam_step``, ``ipex::adamw_step``: torch.optim's formula, one
pass over memory; ``ipex::lamb_step`` / ``ipex::lars_step`` for IPEX's Lamb and Lars, whose own
step is already the fused one; sparse embedding gradients: ``_steps``). With
``dtype=torch.bfloat16`` the weights and biases of the model's convolutions, linears and
embeddings (not EmbeddingBags) become bf16 tensors holding the top 16 bits of their fp32 master weights; the bottom
16 bits (the "trail", int16) live in the optimizer's state beside exp_avg / momentum_buffer, so
``model.state_dict()`` holds the fp32 masters (top and trail recombined, as IPEX saved them;
``_state_dict``), and loading one re-splits them exactly.
Other parameters stay fp32 and take the fused fp32 step. The forward and backward of the bf16
layers run in bf16: call the model under ``torch.cpu.amp.autocast()`` (or give it bf16 inputs).
"""

import types

import torch

from . import _steps
from ._lamb import Lamb
from ._lars import Lars
from ._state_dict import combine_master, register_split, split_master  # noqa: F401 (re-exported)

# Optimizer classes with a fused step here -> the kind of step.
FUSED_OPTIMIZERS = {torch.optim.SGD: "sgd", torch.optim.Adagrad: "adagrad", torch.optim.Adam: "adam",
                    torch.optim.AdamW: "adamw", Lamb: "lamb", Lars: "lars"}
STEPS = {"sgd": _steps.sgd_step, "adagrad": _steps.adagrad_step, "adam": _steps.adam_step,
         "adamw": _steps.adam_step, "lamb": _steps.lamb_step, "lars": _steps.lars_step}
# Modules whose weight and bias become split bf16 master weights. Not EmbeddingBag: torch 1.13's
# CPU embedding_bag takes no bf16 weight, so its weight stays fp32 (the fused fp32 step).
SPLIT_MODULES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d,
                 torch.nn.ConvTranspose3d, torch.nn.Linear, torch.nn.Embedding)
# Optimizer options the fused steps do not implement, with the value they must keep.
UNSUPPORTED_OPTIONS = {"capturable": False, "differentiable": False, "fused": False}


def _optimizer_name(optimizer) -> str:
    cls = type(optimizer)
    return f"{cls.__module__}.{cls.__qualname__}"


def _load_state_dict(self, state_dict):
    """torch.optim's load_state_dict, without its cast of the state to the parameters' dtype: a
    split parameter's state stays fp32 and its trail int16. A state of another shape, or a split
    parameter's state without its trail, is a ValueError."""
    params = [p for group in self.param_groups for p in group["params"]]
    ids = [i for group in state_dict["param_groups"] for i in group["params"]]
    if len(ids) != len(params):
        raise ValueError(f"optimizer.load_state_dict: the state_dict has {len(ids)} parameters, this optimizer "
                         f"{len(params)}")
    state = dict(state_dict["state"])
    kept = {}
    for index, (saved_id, param) in enumerate(zip(ids, params)):
        entry = state.get(saved_id)
        if entry is None:
            if param.dtype == torch.bfloat16:
                raise ValueError(f"optimizer.load_state_dict: parameter {index} is a split bf16 master weight but "
                                 "the state_dict has no state (no trail) for it")
            continue
        for key, value in entry.items():
            if key != "step" and isinstance(value, torch.Tensor) and value.shape != param.shape:
                raise ValueError(f"optimizer.load_state_dict: state {key!r} of parameter {index} has shape "
                                 f"{tuple(value.shape)} but the parameter has {tuple(param.shape)}")
        if param.dtype == torch.bfloat16:
            if "trail" not in entry:
                raise ValueError(f"optimizer.load_state_dict: parameter {index} is a split bf16 master weight but "
                                 "its state has no 'trail' (a state_dict of an unsplit optimizer?)")
            kept[param] = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in entry.items()}
            del state[saved_id]
    type(self).load_state_dict(self, {**state_dict, "state": state})
    for param, entry in kept.items():
        self.state[param] = entry


def optimize_training(model, optimizer, dtype, split_master_weight_for_bf16, fuse_update_step):
    """``ipex_tool.optimize`` with an optimizer: returns ``(model, optimizer)``, both changed in
    place (module docstring)."""
    if not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        raise TypeError("ipex_tool.optimize: training (optimizer=) takes an eager torch.nn.Module, not "
                        f"{type(model).__name__}")
    kind = FUSED_OPTIMIZERS.get(type(optimizer))
    if kind is None:
        raise NotImplementedError(
            f"ipex_tool.optimize: optimizer {_optimizer_name(optimizer)} has no fused step here; torch.optim.SGD, "
            "Adagrad, Adam, AdamW and ipex_tool.optim.Lamb, Lars have. Leave optimizer= out to keep it as it is")
    if getattr(optimizer, "_ipex_tool_fused", None):
        raise ValueError("ipex_tool.optimize: this optimizer is already optimized")
    if dtype not in (None, torch.float32, torch.bfloat16):
        raise NotImplementedError(f"ipex_tool.optimize: training in dtype {dtype} is not supported; use None "
                                  "(fp32) or torch.bfloat16")
    bf16 = dtype is torch.bfloat16
    split = bf16 and split_master_weight_for_bf16 is not False
    fuse = fuse_update_step is not False
    if bf16 and not split:
        raise NotImplementedError("ipex_tool.optimize: dtype=torch.bfloat16 training needs "
                                  "split_master_weight_for_bf16=True (fp32 master copies are not supported)")
    if split and not fuse:
        raise NotImplementedError("ipex_tool.optimize: split_master_weight_for_bf16=True needs fuse_update_step=True")
    if not fuse:
        return model, optimizer

    names = {id(p): name for name, p in model.named_parameters()}
    for group in optimizer.param_groups:
        for option, value in UNSUPPORTED_OPTIONS.items():
            if kind == "lamb" and option == "fused":
                continue  # IPEX's Lamb(fused=...): the step here is fused either way
            if group.get(option, value) != value:
                raise NotImplementedError(f"ipex_tool.optimize: {_optimizer_name(optimizer)}({option}="
                                          f"{group[option]!r}) has no fused step; leave {option} at {value!r}")
        for param in group["params"]:
            if param.dtype != torch.float32:
                name = names.get(id(param), "a parameter not in the model")
                raise ValueError(f"ipex_tool.optimize: parameter {name} is {param.dtype}; the fused steps take "
                                 "float32 parameters (pass the fp32 model; dtype=torch.bfloat16 makes the bf16 ones)")
            if param.device.type != "cpu":
                raise ValueError(f"ipex_tool.optimize: parameter {names.get(id(param))} is on {param.device}, not "
                                 "the CPU")
    if split:
        in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for module in model.modules():
            if not isinstance(module, SPLIT_MODULES):
                continue
            split_names = []
            for name in ("weight", "bias"):
                param = getattr(module, name, None)
                if param is None or id(param) not in in_optimizer or param.dtype != torch.float32:
                    continue
                split_names.append(name)
                top, trail = split_master(param.data)
                param.data = top
                optimizer.state[param]["trail"] = trail
                for key, value in list(optimizer.state[param].items()):
                    if key not in ("trail", "step") and isinstance(value, torch.Tensor):
                        optimizer.state[param][key] = value.float()
            if split_names:
                register_split(module, split_names, optimizer)
    optimizer._ipex_tool_fused = kind
    optimizer.step = types.MethodType(STEPS[kind], optimizer)
    optimizer.load_state_dict = types.MethodType(_load_state_dict, optimizer)
    return model, optimizer
