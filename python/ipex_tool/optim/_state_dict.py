"""``model.state_dict()`` and ``model.load_state_dict()`` of a split-bf16 model (issue 51).

As in IPEX, the state_dict of a module whose weight and bias were split holds the fp32 master
weights (top and trail recombined, exact); ``bf16_state_dict(model)`` gives the bf16 tops the
model computes with instead. Loading puts an fp32 master back as its top and trail, bit for bit;
a bf16 value loads as the top with a zero trail (the master is then exactly that bf16 number).
The trails live in the optimizer (``optimizer.state[param]["trail"]``); the hooks find them
through a weak reference to it, so a split parameter whose optimizer is gone (or a copy of the
model, whose parameters no optimizer holds) is an error, never silently saved as bf16.
"""

import contextlib
import functools
import threading
import weakref

import torch

# id(param) -> weak reference to the optimizer that holds its trail
_OWNERS = {}
_LOCAL = threading.local()


def split_master(master: torch.Tensor):
    """(top, trail): the upper 16 bits of fp32 ``master`` as bf16, the lower 16 as int16."""
    bits = master.detach().contiguous().view(torch.int32)
    return (bits >> 16).to(torch.int16).view(torch.bfloat16), (bits & 0xFFFF).to(torch.int16)


def combine_master(top: torch.Tensor, trail: torch.Tensor) -> torch.Tensor:
    """The fp32 master weight that bf16 ``top`` and int16 ``trail`` hold."""
    high = top.detach().contiguous().view(torch.int16).to(torch.int32) << 16
    return (high | (trail.to(torch.int32) & 0xFFFF)).view(torch.float32)


def _trail_of(module, name, key):
    """The trail of ``module.<name>``'s split parameter, or None for an unsplit one."""
    param = getattr(module, name, None)
    if not isinstance(param, torch.Tensor) or param.dtype != torch.bfloat16:
        return param, None
    owner = _OWNERS.get(id(param))
    optimizer = owner[0]() if owner is not None and owner[1]() is param else None
    trail = optimizer.state[param].get("trail") if optimizer is not None and param in optimizer.state else None
    if trail is None:
        raise RuntimeError(f"ipex_tool: parameter {key} ({type(module).__name__}) is a split bf16 master weight but no live "
                           "optimizer holds its trail (a copy of the model, or its optimizer was deleted); "
                           "ipex_tool.optim.bf16_state_dict(model) saves the bf16 weights as they are")
    return param, trail


def _save_hook(module, state_dict, prefix, local_metadata, names=("weight", "bias")):
    """state_dict hook: the fp32 master in place of each split parameter's bf16 top."""
    if getattr(_LOCAL, "bf16", False):
        return
    for name in names:
        key = prefix + name
        if key not in state_dict:
            continue
        param, trail = _trail_of(module, name, key)
        if trail is not None:
            state_dict[key] = combine_master(param, trail)


def _load_hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs,
               names=("weight", "bias")):
    """load_state_dict pre-hook: a floating value for a split parameter becomes its top (loaded
    by torch as a bf16 value, exactly) and its trail (written into the optimizer's state). A
    value of another shape is left to torch, which reports it."""
    for name in names:
        key = prefix + name
        value = state_dict.get(key)
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            continue
        param, trail = _trail_of(module, name, key)
        if trail is None or value.shape != param.shape:
            continue
        if value.dtype == torch.bfloat16:
            top, new_trail = value, torch.zeros_like(trail)
        else:
            top, new_trail = split_master(value.to(torch.float32))
        state_dict[key] = top
        with torch.no_grad():
            trail.copy_(new_trail)


def register_split(module, names, optimizer):
    """Makes ``module``'s state_dict save, and its load_state_dict re-split, the fp32 masters of
    its parameters ``names`` whose trails ``optimizer`` holds."""
    for name in names:
        param = getattr(module, name)
        _OWNERS[id(param)] = (weakref.ref(optimizer), weakref.ref(param))
        weakref.finalize(param, _OWNERS.pop, id(param), None)
    module._register_state_dict_hook(functools.partial(_save_hook, names=tuple(names)))
    module._register_load_state_dict_pre_hook(functools.partial(_load_hook, names=tuple(names)), with_module=True)


@contextlib.contextmanager
def _keep_bf16():
    previous = getattr(_LOCAL, "bf16", False)
    _LOCAL.bf16 = True
    try:
        yield
    finally:
        _LOCAL.bf16 = previous


def bf16_state_dict(model, *args, **kwargs):
    """``model.state_dict(*args, **kwargs)`` with the split parameters as the bf16 tops the model
    computes with (half the bytes of the fp32 masters; loading it back gives zero trails)."""
    with _keep_bf16():
        return model.state_dict(*args, **kwargs)


def master_state_dict(model, *args, **kwargs):
    """``model.state_dict(*args, **kwargs)``: the split parameters as fp32 masters (the default,
    named for symmetry with ``bf16_state_dict``)."""
    return model.state_dict(*args, **kwargs)
