"""The fused ``step`` of each optimizer kind: one op per parameter (``torch.ops.ipex.*_step``)
with the group's current hyper-parameters, the state under torch.optim's (or IPEX's) names plus
``trail`` for a split bf16 parameter. Sparse gradients (an Embedding's or EmbeddingBag's,
``sparse=True``) go to ``ipex::sparse_sgd_step`` / ``ipex::sparse_adagrad_step``."""

import torch


def _run_closure(closure):
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def _sparse_rows(kind: str, grad, weight_decay):
    """A sparse gradient's row indices and values, refused where torch.optim refuses it; None for
    an empty one (nothing to update; torch 1.13's Adagrad raises on it)."""
    if weight_decay != 0:
        raise RuntimeError(f"ipex_tool.optim ({kind}): weight_decay is not compatible with sparse gradients (as in "
                           "torch.optim); put the sparse embedding in a parameter group with weight_decay=0")
    if grad._nnz() == 0:
        return None
    if grad.sparse_dim() != 1:
        raise RuntimeError(f"ipex_tool.optim ({kind}): a sparse gradient must index rows (sparse_dim 1, as an "
                           f"Embedding's), not sparse_dim {grad.sparse_dim()}")
    return grad._indices()[0].contiguous(), grad._values().contiguous()


def _momentum_buffer(state, param, momentum: float):
    """The parameter's fp32 momentum buffer (created empty on the first step: the op fills it)
    and whether this is the first step; None for momentum 0."""
    buf = state.get("momentum_buffer")
    first_step = buf is None
    if momentum != 0 and first_step:
        buf = torch.empty(param.shape, dtype=torch.float32)
        state["momentum_buffer"] = buf
    return (buf if momentum != 0 else None), first_step


def sgd_step(self, closure=None):
    loss = _run_closure(closure)
    with torch.no_grad():
        for group in self.param_groups:
            momentum = group["momentum"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if param.grad.is_sparse:
                    if momentum != 0:
                        raise RuntimeError("ipex_tool.optim (SGD): momentum with sparse gradients is not fused (torch "
                                           "keeps a sparse momentum buffer that grows each step); use momentum=0 "
                                           "for the sparse embedding's parameter group")
                    rows = _sparse_rows("SGD", param.grad, group["weight_decay"])
                    if rows is None:
                        continue
                    indices, values = rows
                    torch.ops.ipex.sparse_sgd_step(param, indices, values, state.get("trail"), group["lr"],
                                                   group.get("maximize", False))
                    continue
                buf, first_step = _momentum_buffer(state, param, momentum)
                torch.ops.ipex.sgd_step(param, param.grad.contiguous(), buf,
                                        state.get("trail"), group["lr"], momentum, group["dampening"],
                                        group["weight_decay"], group["nesterov"], group.get("maximize", False),
                                        first_step)
    return loss


def adagrad_step(self, closure=None):
    loss = _run_closure(closure)
    with torch.no_grad():
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if "sum" not in state:
                    state["step"] = torch.tensor(0.0)
                    state["sum"] = torch.full(param.shape, group["initial_accumulator_value"], dtype=torch.float32)
                if param.grad.is_sparse:
                    rows = _sparse_rows("Adagrad", param.grad, group["weight_decay"])
                    state["step"] += 1
                    if rows is None:
                        continue
                    indices, values = rows
                    torch.ops.ipex.sparse_adagrad_step(param, indices, values, state["sum"], state.get("trail"),
                                                       int(state["step"].item()), group["lr"], group["lr_decay"],
                                                       group["eps"], group.get("maximize", False))
                    continue
                state["step"] += 1
                torch.ops.ipex.adagrad_step(param, param.grad.contiguous(), state["sum"], state.get("trail"),
                                            int(state["step"].item()), group["lr"], group["lr_decay"],
                                            group["weight_decay"], group["eps"], group.get("maximize", False))
    return loss


def _dense_grad(kind: str, param):
    if param.grad.is_sparse:
        raise RuntimeError(f"ipex_tool.optim ({kind}): sparse gradients are not supported (torch.optim.{kind} has "
                           "none either); use SGD or Adagrad for sparse embeddings")
    return param.grad.contiguous()


def adam_step(self, closure=None):
    loss = _run_closure(closure)
    kind = "AdamW" if self._ipex_tool_fused == "adamw" else "Adam"
    op = torch.ops.ipex.adamw_step if kind == "AdamW" else torch.ops.ipex.adam_step
    with torch.no_grad():
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            amsgrad = group["amsgrad"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = _dense_grad(kind, param)
                state = self.state[param]
                if "step" not in state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros(param.shape, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros(param.shape, dtype=torch.float32)
                    if amsgrad:
                        state["max_exp_avg_sq"] = torch.zeros(param.shape, dtype=torch.float32)
                state["step"] += 1
                op(param, grad, state["exp_avg"], state["exp_avg_sq"],
                   state.get("max_exp_avg_sq") if amsgrad else None, state.get("trail"), int(state["step"].item()),
                   group["lr"], beta1, beta2, group["eps"], group["weight_decay"], amsgrad,
                   group.get("maximize", False))
    return loss


def lamb_step(self, closure=None):
    """IPEX's Lamb step (ipex::lamb_step); the state as IPEX keeps it: ``step`` (an int),
    ``exp_avg``, ``exp_avg_sq``."""
    loss = _run_closure(closure)
    with torch.no_grad():
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = _dense_grad("Lamb", param)
                state = self.state[param]
                if "step" not in state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros(param.shape, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros(param.shape, dtype=torch.float32)
                state["step"] += 1
                torch.ops.ipex.lamb_step(param, grad, state["exp_avg"], state["exp_avg_sq"], state.get("trail"),
                                         int(state["step"]), group["lr"], beta1, beta2, group["eps"],
                                         group["weight_decay"])
    return loss


def lars_step(self, closure=None):
    """IPEX's fused Lars step: groups with ``lars=True`` take ipex::lars_step, the others SGD's
    step with the group's momentum and weight decay (no dampening, no nesterov)."""
    loss = _run_closure(closure)
    with torch.no_grad():
        for group in self.param_groups:
            momentum = group["momentum"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = _dense_grad("Lars", param)
                state = self.state[param]
                buf, first_step = _momentum_buffer(state, param, momentum)
                if group.get("lars", True):
                    torch.ops.ipex.lars_step(param, grad, buf, state.get("trail"), group["lr"], momentum,
                                             group["eeta"], group["epsilon"], group["weight_decay"], first_step)
                else:
                    torch.ops.ipex.sgd_step(param, grad, buf, state.get("trail"), group["lr"], momentum, 0.0,
                                            group["weight_decay"], False, False, first_step)
    return loss
