"""``ipex_tool.optim._lars.Lars``: IPEX's Lars (``intel_extension_for_pytorch.optim._lars``),
same signature, groups (``lars=False`` for a plain SGD group) and ``create_optimizer_lars``; its
step is the fused one (``ipex::lars_step``, ``ipex::sgd_step``)."""

from typing import Iterable

import torch
from torch import nn

from ._steps import lars_step


class Lars(torch.optim.Optimizer):
    r"""Lars (You et al. 2017, "Large Batch Training of Convolutional Networks",
    https://arxiv.org/abs/1708.03888): the learning rate of each parameter scaled by the trust
    ratio ``eeta * ||p|| / (||g|| + weight_decay * ||p|| + epsilon)``, then SGD's step with
    weight decay and momentum (``buf = momentum * buf + g + weight_decay * p``,
    ``p -= lr * ratio * buf``; the paper keeps lr * ratio inside the buffer, which is the same
    while the ratio is constant). As IPEX's fused Lars, a group with ``lars=False`` takes SGD's
    step with its weight decay."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr=1e-3, momentum=0, eeta=1e-3, weight_decay=0,
                 epsilon=0.0):
        if not isinstance(lr, float) or lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if eeta <= 0 or eeta > 1:
            raise ValueError(f"Invalid eeta value: {eeta}")
        if epsilon < 0:
            raise ValueError(f"Invalid epsilon value: {epsilon}")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eeta=eeta,
                                      epsilon=epsilon, lars=True))

    def step(self, closure=None):
        return lars_step(self, closure)


BN_CLS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _parameters_of(module, classes):
    for m in module.modules():
        if isinstance(m, classes):
            yield from m.parameters(recurse=False)


def get_norm_parameters(module):
    return _parameters_of(module, (nn.LayerNorm, *BN_CLS))


def get_bias_parameters(module, exclude_func=None):
    excluded = set(exclude_func(module)) if exclude_func is not None else set()
    for name, param in module.named_parameters():
        if param not in excluded and "bias" in name:
            yield param


def get_norm_bias_parameters(module):
    yield from get_norm_parameters(module)
    yield from get_bias_parameters(module, exclude_func=get_norm_parameters)


def get_common_parameters(module, exclude_func=None):
    excluded = set(exclude_func(module)) if exclude_func is not None else set()
    for param in module.parameters():
        if param not in excluded:
            yield param


def create_optimizer_lars(model, lr, momentum, weight_decay, bn_bias_separately, epsilon):
    """IPEX's helper: with ``bn_bias_separately`` the norm layers' parameters take no weight
    decay and no trust ratio, the biases no trust ratio."""
    if not bn_bias_separately:
        return Lars(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay, epsilon=epsilon)
    return Lars([
        dict(params=list(get_common_parameters(model, exclude_func=get_norm_bias_parameters))),
        dict(params=list(get_norm_parameters(model)), weight_decay=0, lars=False),
        dict(params=list(get_bias_parameters(model, exclude_func=get_norm_parameters)), lars=False),
    ], lr=lr, momentum=momentum, weight_decay=weight_decay, epsilon=epsilon)
