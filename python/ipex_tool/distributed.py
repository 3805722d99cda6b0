"""Data-parallel training of split-bf16 models: ``torch.nn.parallel.DistributedDataParallel``
with the gloo backend over the model of ``ipex_tool.optimize(model, optimizer=opt,
dtype=torch.bfloat16)`` (issue 51; docs/training.md, "Distributed training").

torch 1.13's gloo moves no bf16 tensor: DDP's construction, which broadcasts rank 0's parameters,
fails with "Invalid scalar type", and so would its all-reduce of the bf16 gradients.
``data_parallel(model, optimizer)`` makes the DDP module anyway and registers
``ordered_allreduce_hook``:

- At construction every rank receives rank 0's parameters, buffers and the trails of its split
  parameters (which live in the optimizer, out of DDP's sight), so the fp32 masters start equal.
  The 16-bit tensors travel as fp16 views: a broadcast copies bits and adds nothing.
- Each gradient bucket is reduced in its own dtype (bf16 buckets hold the bf16 gradients of the
  split parameters, as IPEX reduced them; fp32 buckets the others) by a rule that depends only
  on the ranks' gradients, never on bucket layout, ring order or timing: the buckets of all ranks
  are gathered, summed in fp32 in rank order, divided by the world size and rounded once to the
  bucket's dtype. Every rank computes the same bits, so with the fused steps (which do not depend
  on the thread count) all ranks' tops and trails stay bitwise identical.

The gather moves (world - 1) buckets into each rank instead of a ring all-reduce's
2 (world - 1) / world, and the hook waits for it (no overlap with the rest of the backward): for
the few ranks of a CPU job that is the price of reproducible bits.
"""

import functools
import threading

import torch
import torch.distributed as dist
import torch.nn.parallel.distributed as _torch_ddp

# dtypes gloo (torch 1.13) cannot move, and the same-size dtype they travel as.
_WIRE_DTYPES = {torch.bfloat16: torch.float16, torch.int16: torch.float16}
# data_parallel swaps DDP's construction-time sync for one that moves bf16; one at a time.
_SYNC_LOCK = threading.Lock()


def _wire(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or a view of its bits in a dtype gloo moves (for copies only, never sums)."""
    wire = _WIRE_DTYPES.get(tensor.dtype)
    return tensor.view(wire) if wire is not None else tensor


def _trails(module, optimizer):
    """The trails of ``module``'s split parameters, in parameter order."""
    if optimizer is None:
        return []
    trails = []
    for name, param in module.named_parameters():
        trail = optimizer.state[param].get("trail") if param in optimizer.state else None
        if trail is not None:
            trails.append(trail)
        elif param.dtype == torch.bfloat16:
            raise ValueError(f"ipex_tool.distributed: parameter {name} is bf16 but the optimizer holds no trail for "
                             "it; pass the optimizer that ipex_tool.optimize returned with this model")
    return trails


def _sync_split_states(module, process_group, broadcast_bucket_size, src, params_and_buffers_to_ignore, *, trails):
    """DDP's ``_sync_module_states`` (rank ``src``'s parameters and buffers to every rank) for
    bf16 tensors too, and the trails with them."""
    states = [p.detach() for n, p in module.named_parameters() if n not in params_and_buffers_to_ignore]
    states += [b.detach() for n, b in module.named_buffers() if n not in params_and_buffers_to_ignore]
    states += list(trails)
    if states:
        dist._broadcast_coalesced(process_group, [_wire(t) for t in states], broadcast_bucket_size, src)


def _check_layout(module, optimizer, process_group):
    """Every rank must hold the same parameters, split alike: a mismatch is named, not a hang
    or a broadcast into the wrong tensor."""
    split = {id(p) for p in module.parameters() if optimizer is not None and "trail" in optimizer.state.get(p, {})}
    layout = [(name, tuple(p.shape), str(p.dtype), id(p) in split) for name, p in module.named_parameters()]
    layouts = [None] * dist.get_world_size(process_group)
    dist.all_gather_object(layouts, layout, group=process_group)
    for rank, other in enumerate(layouts):
        if other != layout:
            diff = next((f"{a} here, {b} on rank {rank}" for a, b in zip(layout, other) if a != b),
                        f"{len(layout)} parameters here, {len(other)} on rank {rank}")
            raise ValueError(f"ipex_tool.distributed: the ranks' models differ: {diff}")


def ordered_allreduce_hook(process_group, bucket):
    """DDP communication hook: the mean of the ranks' gradients, summed in fp32 in rank order and
    rounded once to the bucket's dtype (bf16 or fp32). Register it with
    ``ddp.register_comm_hook(process_group_or_None, ordered_allreduce_hook)``."""
    group = process_group if process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    grads = bucket.buffer()
    if grads.is_sparse:
        raise NotImplementedError("ipex_tool.distributed: sparse gradients are not reduced by the ordered hook")
    gathered = [torch.empty_like(grads) for _ in range(world)]
    # Waited for here rather than chained with Future.then: a Python callback on gloo's worker
    # thread deadlocks torch 1.13 at exit (the reducer's destructor joins that thread holding the
    # GIL while the thread waits for the GIL to drop the callback).
    dist.all_gather([_wire(g) for g in gathered], _wire(grads), group=group)
    acc = gathered[0].to(torch.promote_types(grads.dtype, torch.float32), copy=True)
    for grad in gathered[1:]:
        acc.add_(grad.to(acc.dtype))
    grads.copy_(acc.div_(world))
    future = torch.futures.Future()
    future.set_result(grads)
    return future


def broadcast_masters(module, optimizer, src=0, process_group=None):
    """Rank ``src``'s parameters, buffers and trails to every rank (what ``data_parallel`` does at
    construction), e.g. after loading a checkpoint on one rank only."""
    group = process_group if process_group is not None else dist.group.WORLD
    _check_layout(module, optimizer, group)
    with torch.no_grad():
        _sync_split_states(module, group, 250 * 1024 * 1024, src, set(), trails=_trails(module, optimizer))


def data_parallel(model, optimizer, process_group=None, deterministic=True, **ddp_options):
    """``torch.nn.parallel.DistributedDataParallel(model, process_group=..., **ddp_options)`` for
    a model and optimizer returned by ``ipex_tool.optimize`` (split bf16 or fp32): made with a
    construction-time sync that carries bf16 tensors and the trails, and, with
    ``deterministic=True``, the ``ordered_allreduce_hook``. ``deterministic=False`` leaves DDP's
    own all-reduce (fp32 models only: gloo cannot sum bf16 in torch 1.13)."""
    if not dist.is_initialized():
        raise RuntimeError("ipex_tool.distributed.data_parallel: call torch.distributed.init_process_group first")
    if not getattr(optimizer, "_ipex_tool_fused", None):
        raise ValueError("ipex_tool.distributed.data_parallel: pass the optimizer that ipex_tool.optimize(model, "
                         "optimizer=...) returned (its trails are synchronised with the model)")
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse:
            raise NotImplementedError(f"ipex_tool.distributed.data_parallel: {name or 'the model'} has sparse "
                                      "gradients (sparse=True), which the ordered reduction does not handle")
    trails = _trails(model, optimizer)
    if trails and not deterministic:
        raise NotImplementedError("ipex_tool.distributed.data_parallel: the model has split bf16 parameters, whose "
                                  "gradients torch 1.13's gloo cannot all-reduce; keep deterministic=True")
    group = process_group if process_group is not None else dist.group.WORLD
    _check_layout(model, optimizer, group)
    if not hasattr(_torch_ddp, "_sync_module_states"):
        raise NotImplementedError(f"ipex_tool.distributed.data_parallel: torch {torch.__version__}'s "
                                  "DistributedDataParallel has no _sync_module_states to extend")
    with _SYNC_LOCK:
        original = _torch_ddp._sync_module_states
        _torch_ddp._sync_module_states = functools.partial(_sync_split_states, trails=trails)
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=process_group, **ddp_options)
        finally:
            _torch_ddp._sync_module_states = original
    if deterministic:
        ddp.register_comm_hook(process_group, ordered_allreduce_hook)
    return ddp


__all__ = ["data_parallel", "ordered_allreduce_hook", "broadcast_masters"]
