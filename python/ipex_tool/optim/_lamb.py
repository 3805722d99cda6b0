"""``ipex_tool.optim._lamb.Lamb``: IPEX's Lamb (``intel_extension_for_pytorch.optim._lamb.Lamb``),
same signature and state; its step is the fused ``ipex::lamb_step`` already, and
``ipex_tool.optimize(model, optimizer=Lamb(...), dtype=torch.bfloat16)`` splits its parameters."""

import torch

from ._steps import lamb_step


class Lamb(torch.optim.Optimizer):
    r"""Lamb (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
    minutes", https://arxiv.org/abs/1904.00962): Adam's bias-corrected direction plus
    ``weight_decay * p``, scaled per parameter by the trust ratio ``||p|| / ||direction||``.
    ``fused`` is accepted for IPEX's signature; the step is always the fused one."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, fused=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused))
        self.fused = fused

    def step(self, closure=None):
        return lamb_step(self, closure)
