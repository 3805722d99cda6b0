"""The merged tables' update fused into their backward, and where its hyper-parameters and state
live: in the module (``MergedEmbeddingBagWithSGD`` / ``WithAdaGrad``: trails and Adagrad sums as
buffers) or in a torch.optim optimizer (``ipex_tool.optimize(model, optimizer=...)`` binds the
model's ``MergedEmbeddingBag`` modules with ``sparse=True`` tables to it: the group's current
``lr`` etc., ``state[weight]["sum"]`` / ``["step"]`` / ``["trail"]`` under torch.optim's and
ipex_tool.optim's names, so ``optimizer.state_dict()`` carries them).
"""

import torch

from ...optim import split_master


class _FusedUpdate(torch.autograd.Function):
    """Forward: the merged op. Backward: the per_sample_weights' gradient (from the tables as the
    forward read them), then the tables' update; the tables get no ``.grad``."""

    @staticmethod
    def forward(ctx, module, indices, offsets, psw, n, *tensors):
        weights = list(tensors[:n])
        ctx.module, ctx.indices, ctx.offsets, ctx.psw, ctx.weights = module, indices, offsets, psw, weights
        return tuple(torch.ops.ipex.merged_embedding_bag(weights, indices, offsets, psw, module.padding_idx,
                                                         module.pooling_mode, module.include_last_offset,
                                                         module.output_dtype, False))

    @staticmethod
    def backward(ctx, *grad_outputs):
        module, n = ctx.module, len(ctx.weights)
        grads = [g.contiguous() for g in grad_outputs]
        given = [t for t, p in enumerate(ctx.psw) if p is not None]
        wanted = ctx.needs_input_grad[5 + n:]
        psw_grads = [None] * len(given)
        if any(wanted):
            _, per_table = torch.ops.ipex.merged_embedding_bag_backward(
                grads, ctx.weights, ctx.indices, ctx.offsets, ctx.psw, module.padding_idx, module.pooling_mode,
                module.include_last_offset, False, False, True)
            psw_grads = [per_table[t] if wanted[k] else None for k, t in enumerate(given)]
        module._update.step(ctx.weights, grads, ctx.indices, ctx.offsets, ctx.psw)
        return (None,) * (5 + n) + tuple(psw_grads)


def fused_forward(module, indices, offsets, psw):
    weights = [table.weight for table in module.tables]
    given = [p for p in psw if p is not None]
    return list(_FusedUpdate.apply(module, list(indices), list(offsets), list(psw), len(weights), *weights, *given))


def _args(module, weights, grads, indices, offsets, psw):
    return (weights, grads, indices, offsets, psw, module.padding_idx, module.pooling_mode,
            module.include_last_offset)


class _OwnState:
    """Trails kept as the module's buffers ``trail_<t>``."""

    def __init__(self, module):
        self.module = module

    def trail(self, t):
        return getattr(self.module, f"trail_{t}", None)

    def split(self):
        for t, table in enumerate(self.module.tables):
            if table.weight.dtype == torch.float32:
                top, trail = split_master(table.weight.data)
                table.weight.data = top
                self.module.register_buffer(f"trail_{t}", trail)
        self.module.output_dtype = torch.float32

    def trails(self):
        return [self.trail(t) for t in range(self.module.n_tables)]


class OwnSGD(_OwnState):
    def step(self, weights, grads, indices, offsets, psw):
        m = self.module
        torch.ops.ipex.merged_embedding_bag_sgd_step(*_args(m, weights, grads, indices, offsets, psw), self.trails(),
                                                     m.lr, m.maximize)


class OwnAdagrad(_OwnState):
    def __init__(self, module):
        super().__init__(module)
        module.step_count = 0
        for t, table in enumerate(module.tables):
            module.register_buffer(f"sum_{t}", torch.zeros(table.weight.shape, dtype=torch.float32))

    def step(self, weights, grads, indices, offsets, psw):
        m = self.module
        m.step_count += 1
        sums = [getattr(m, f"sum_{t}") for t in range(m.n_tables)]
        torch.ops.ipex.merged_embedding_bag_adagrad_step(*_args(m, weights, grads, indices, offsets, psw), sums,
                                                         self.trails(), [m.step_count] * m.n_tables, m.lr, m.lr_decay,
                                                         m.eps, m.maximize)


class _OptimizerState:
    def __init__(self, module, optimizer, group):
        self.module, self.optimizer, self.group = module, optimizer, group

    def trail(self, t):
        return self.optimizer.state[self.module.tables[t].weight].get("trail")

    def split(self):
        for table in self.module.tables:
            param = table.weight
            if param.dtype == torch.float32:
                top, trail = split_master(param.data)
                param.data = top
                self.optimizer.state[param]["trail"] = trail
        self.module.output_dtype = torch.float32

    def trails(self):
        return [self.trail(t) for t in range(self.module.n_tables)]


class OptimizerSGD(_OptimizerState):
    def step(self, weights, grads, indices, offsets, psw):
        check_group("SGD", self.group)
        torch.ops.ipex.merged_embedding_bag_sgd_step(*_args(self.module, weights, grads, indices, offsets, psw),
                                                     self.trails(), self.group["lr"],
                                                     self.group.get("maximize", False))


class OptimizerAdagrad(_OptimizerState):
    def step(self, weights, grads, indices, offsets, psw):
        group = self.group
        check_group("Adagrad", group)
        sums, steps = [], []
        for param in weights:
            state = self.optimizer.state[param]
            if "sum" not in state:
                state["step"] = torch.tensor(0.0)
                state["sum"] = torch.full(param.shape, group["initial_accumulator_value"], dtype=torch.float32)
            state["step"] += 1
            sums.append(state["sum"])
            steps.append(int(state["step"].item()))
        torch.ops.ipex.merged_embedding_bag_adagrad_step(*_args(self.module, weights, grads, indices, offsets, psw),
                                                         sums, self.trails(), steps, group["lr"], group["lr_decay"],
                                                         group["eps"], group.get("maximize", False))


BOUND = {torch.optim.SGD: OptimizerSGD, torch.optim.Adagrad: OptimizerAdagrad}


def check_group(kind, group, where="the merged EmbeddingBag's parameter group"):
    """Refuses the options torch.optim (or the fused sparse steps) refuse on sparse gradients."""
    if group.get("weight_decay", 0) != 0:
        raise ValueError(f"ipex_tool: {where}: weight_decay is not compatible with sparse gradients (as in "
                         f"torch.optim.{kind}); put the tables in a parameter group with weight_decay=0")
    if kind == "SGD" and group.get("momentum", 0) != 0:
        raise ValueError(f"ipex_tool: {where}: SGD momentum with sparse gradients is not fused; use momentum=0 for "
                         "the tables' parameter group")
