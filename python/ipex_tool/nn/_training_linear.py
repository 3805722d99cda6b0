"""What ``ipex_tool.optimize(model, optimizer=...)`` does to a model's ``nn.Linear`` modules (unless
``weights_prepack=False``): their forward and backward run through ``ipex::matmul`` (oneDNN's
matmul on the operands' own strides) instead of aten's ``linear`` and ``mm``, which Debian's torch
sends to the reference BLAS (2.3 GFLOP/s for a BERT-base projection on two cores where oneDNN's
fp32 kernel reaches 175).

The module stays an ``nn.Linear`` (its class becomes the subclass ``TrainingLinear``: the same
parameters, state_dict and pickling). The three products, for ``x`` [*, in] and ``W`` [out, in]:

    y = x W^T + b        dx = dy W        dW = dy^T x        db = sum of dy over the rows

are computed in the dtype CPU autocast would give ``aten::linear``: bf16 when autocast is on or
the weight is a split bf16 top, else fp32. A bf16 product is oneDNN's bf16 matmul where the CPU
has BF16 dot products, else the fp32 product of the same bf16 values rounded once (ipex::matmul).
A bf16 output with a bias rounds twice (the product, then the sum; aten's addmm
once). Gradients come back in each operand's own dtype. ``x`` of another dtype is cast as autocast
would cast it; every other input (no grad, 1-D, many leading dims) behaves as ``F.linear``.
"""

import torch

__all__ = ["TrainingLinear", "use_training_linear"]


def _compute_dtype(weight: torch.Tensor) -> torch.dtype:
    if weight.dtype == torch.float32 and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return weight.dtype


class _LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, dtype):
        # The operands in the compute dtype, converted once and kept for the backward.
        rows = x.reshape(-1, x.shape[-1]).to(dtype)
        w = weight.to(dtype)
        ctx.save_for_backward(rows, w)
        ctx.x_shape, ctx.x_dtype, ctx.weight_dtype = x.shape, x.dtype, weight.dtype
        ctx.bias_dtype = bias.dtype if bias is not None else None
        y = torch.ops.ipex.matmul(rows, w.t())
        if bias is not None:
            y = y.add_(bias.to(dtype))
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_out):
        rows, w = ctx.saved_tensors
        dy = grad_out.reshape(-1, w.shape[0]).to(w.dtype)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = torch.ops.ipex.matmul(dy, w).to(ctx.x_dtype).reshape(ctx.x_shape)
        if ctx.needs_input_grad[1]:
            dw = torch.ops.ipex.matmul(dy.t(), rows).to(ctx.weight_dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            db = dy.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
        return dx, dw, db, None


class TrainingLinear(torch.nn.Linear):
    """An ``nn.Linear`` whose forward and backward run through ``ipex::matmul`` (module docstring)."""

    def forward(self, input):
        dtype = _compute_dtype(self.weight)
        if not input.is_floating_point() or input.device.type != "cpu" or self.weight.device.type != "cpu":
            return super().forward(input)
        return _LinearFunction.apply(input, self.weight, self.bias, dtype)


def use_training_linear(model: torch.nn.Module) -> int:
    """Makes every plain ``nn.Linear`` of ``model`` a ``TrainingLinear``; returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear:
            module.__class__ = TrainingLinear
            count += 1
    return count
