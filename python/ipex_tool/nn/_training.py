"""What ``ipex_tool.optimize(model, optimizer=...)`` does to a model's ``MergedEmbeddingBag``
modules: each one whose tables are ``sparse=True`` and in a torch.optim.SGD or Adagrad optimizer
is bound to that optimizer, its backward then applies the optimizer's sparse step to every table
in one op (``modules/_fused_update.py``) with the group's current hyper-parameters and the
optimizer's state; with ``dtype=torch.bfloat16`` its tables become split bf16 master weights
(trails in ``optimizer.state[weight]["trail"]``). ``plan_training`` checks everything before
``optimize`` changes anything; ``apply_training`` binds.
"""

import torch

from .modules import MergedEmbeddingBag
from .modules._fused_update import BOUND, check_group


def plan_training(model, optimizer, fuse_update_step):
    """The (module, binding class, group) of each MergedEmbeddingBag to bind; raises ValueError for
    a module that cannot be bound though its tables are the optimizer's (named by its path)."""
    if fuse_update_step is False or not isinstance(model, torch.nn.Module):
        return []
    bound = BOUND.get(type(optimizer))
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    plan = []
    for name, module in model.named_modules():
        if not isinstance(module, MergedEmbeddingBag) or module.fused_update or not module.sparse:
            continue
        groups = [group_of.get(id(table.weight)) for table in module.tables]
        if all(g is None for g in groups):
            continue
        where = f"MergedEmbeddingBag {name or '(the model)'}"
        if any(g is None for g in groups):
            raise ValueError(f"ipex_tool.optimize: {where}: some of its tables are not in the optimizer; give it all "
                             "of them or none")
        if any(g is not groups[0] for g in groups):
            raise ValueError(f"ipex_tool.optimize: {where}: its tables are in different parameter groups; the fused "
                             "update takes one group's hyper-parameters")
        if bound is None:
            continue  # Adam and the others refuse sparse gradients in their own step, by name
        check_group("SGD" if type(optimizer) is torch.optim.SGD else "Adagrad", groups[0], where)
        plan.append((module, bound, groups[0]))
    return plan


def apply_training(plan, optimizer, dtype, split_master_weight_for_bf16):
    split = dtype is torch.bfloat16 and split_master_weight_for_bf16 is not False
    for module, bound, group in plan:
        module._update = bound(module, optimizer, group)
        module.fused_update = True
        if split:
            module._update.split()
