"""Many ``nn.EmbeddingBag`` tables in one call (``ipex::merged_embedding_bag``), for training
too: IPEX's ``MergedEmbeddingBag``, ``MergedEmbeddingBagWithSGD`` and
``MergedEmbeddingBagWithAdaGrad`` (``intel_extension_for_pytorch.nn.modules``), same names and
constructor arguments.

``MergedEmbeddingBag`` gives each table the gradient ``nn.EmbeddingBag`` gives it: a sparse COO
tensor when the tables were ``sparse=True``, else a dense one, and the per_sample_weights' gradient
(the op's Autograd kernel, so a scripted module trains too). The ``With`` modules fuse the update
into the backward: the tables take torch.optim's sparse SGD / Adagrad step right there (one op for
every table, ``ipex::merged_embedding_bag_sgd_step`` / ``_adagrad_step``) and keep no ``.grad``.
``ipex_tool.optimize(model, optimizer=SGD|Adagrad)`` does the same for the ``MergedEmbeddingBag``
modules of a model, with the optimizer's hyper-parameters and state (``_training.py``).

Where this differs from IPEX: ``from_embeddingbag_list`` keeps the tables' own ``nn.EmbeddingBag``
modules and parameters (an optimizer built on the model keeps working); tables may differ in
embedding_dim; forward takes optional per_sample_weights; the update is torch.optim's, so weight
decay is refused as torch refuses it on sparse gradients; after ``to_bfloat16_train()`` the tables
hold bf16 tops with int16 trails (split master weights, ``ipex_tool.optim.split_master``) and the
outputs stay fp32.
"""

import enum
from typing import List, NamedTuple, Optional

import torch
from torch import nn

from ...optim import combine_master, split_master


class PoolingMode(enum.IntEnum):
    SUM = 0
    MEAN = 1


class EmbeddingSpec(NamedTuple):
    num_embeddings: int
    embedding_dim: int
    pooling_mode: str
    dtype: torch.dtype
    weight: Optional[torch.Tensor]
    sparse: bool
    include_last_offset: bool


_MODES = {"sum": PoolingMode.SUM, "mean": PoolingMode.MEAN}


def _table_from_spec(index: int, spec: EmbeddingSpec) -> nn.EmbeddingBag:
    if spec.pooling_mode not in _MODES:
        raise ValueError(f"MergedEmbeddingBag: table {index}: pooling_mode {spec.pooling_mode!r} is not merged; "
                         "use 'sum' or 'mean'")
    if spec.weight is not None and tuple(spec.weight.shape) != (spec.num_embeddings, spec.embedding_dim):
        raise ValueError(f"MergedEmbeddingBag: table {index}: weight has shape {tuple(spec.weight.shape)}, the spec "
                         f"says ({spec.num_embeddings}, {spec.embedding_dim})")
    weight = spec.weight if spec.weight is not None else torch.empty(spec.num_embeddings, spec.embedding_dim)
    return nn.EmbeddingBag(spec.num_embeddings, spec.embedding_dim, mode=spec.pooling_mode, sparse=spec.sparse,
                           include_last_offset=spec.include_last_offset,
                           _weight=weight.detach().to(torch.float32).clone())


def _check_tables(tables) -> None:
    if len(tables) == 0:
        raise ValueError("MergedEmbeddingBag: at least one table is needed")
    first = tables[0]
    for i, table in enumerate(tables):
        if not isinstance(table, nn.EmbeddingBag):
            raise TypeError(f"MergedEmbeddingBag: table {i} is a {type(table).__name__}, not an nn.EmbeddingBag")
        if table.mode not in _MODES:
            raise ValueError(f"MergedEmbeddingBag: table {i} pools with mode={table.mode!r}; only 'sum' and 'mean' "
                             "are merged")
        if table.max_norm is not None or table.scale_grad_by_freq:
            raise ValueError(f"MergedEmbeddingBag: table {i} has max_norm or scale_grad_by_freq, which the merged "
                             "op does not implement")
        for name in ("mode", "include_last_offset", "sparse"):
            if getattr(table, name) != getattr(first, name):
                raise ValueError(f"MergedEmbeddingBag: table {i} has {name}={getattr(table, name)!r} but table 0 "
                                 f"{getattr(first, name)!r}; the merged tables share it")
        if table.weight.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"MergedEmbeddingBag: table {i} is {table.weight.dtype}; fp32 (or split bf16) tables "
                             "are trained")


class MergedEmbeddingBag(nn.Module):
    """The tables of ``nn.EmbeddingBag`` modules (one pooling mode, include_last_offset and sparse
    setting) in one op. ``forward(indices, offsets, per_sample_weights=None)`` takes one tensor per
    table in each list (per_sample_weights: a list with None for a table without) and returns one
    output per table, as ``nn.EmbeddingBag(indices[t], offsets[t], per_sample_weights[t])``."""

    def __init__(self, embedding_specs: List[EmbeddingSpec]):
        super().__init__()
        self._init_tables([_table_from_spec(i, spec) for i, spec in enumerate(embedding_specs)])

    def _init_tables(self, tables) -> None:
        _check_tables(tables)
        self.tables = nn.ModuleList(tables)
        self.n_tables = len(tables)
        self.pooling_mode = int(_MODES[tables[0].mode])
        self.include_last_offset = bool(tables[0].include_last_offset)
        self.sparse = bool(tables[0].sparse)
        self.padding_idx = [-1 if t.padding_idx is None else int(t.padding_idx) for t in tables]
        self.fused_update = False  # the update runs in the backward (_training.py)
        self.output_dtype: Optional[torch.dtype] = None  # fp32 outputs from split bf16 tables

    @classmethod
    def from_embeddingbag_list(cls, tables, **kwargs):
        """The merged module over ``tables`` (an iterable of nn.EmbeddingBag): their modules and
        parameters themselves, not copies."""
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module._init_tables(list(tables))
        module._init_update(**kwargs)
        return module

    from_embeddingbags = from_embeddingbag_list

    def _init_update(self, **kwargs) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument {sorted(kwargs)[0]!r}")

    @property
    def weights(self) -> List[torch.Tensor]:
        """The tables' weights (IPEX's name)."""
        return [table.weight for table in self.tables]

    def extra_repr(self) -> str:
        mode = "sum" if self.pooling_mode == 0 else "mean"
        return f"tables={self.n_tables}, mode={mode}, sparse={self.sparse}, fused_update={self.fused_update}"

    def _check_inputs(self, indices: List[torch.Tensor], offsets: List[torch.Tensor],
                      per_sample_weights: Optional[List[Optional[torch.Tensor]]]) -> List[Optional[torch.Tensor]]:
        if len(indices) != self.n_tables or len(offsets) != self.n_tables:
            raise ValueError(f"MergedEmbeddingBag: indices and offsets need one tensor per table ({self.n_tables}), "
                             f"got {len(indices)} and {len(offsets)}")
        psw: List[Optional[torch.Tensor]] = []
        if per_sample_weights is None:
            for _ in range(self.n_tables):
                psw.append(None)
        else:
            if len(per_sample_weights) != self.n_tables:
                raise ValueError(f"MergedEmbeddingBag: per_sample_weights needs one entry per table ({self.n_tables},"
                                 f" None for none), got {len(per_sample_weights)}")
            psw = per_sample_weights
        return psw

    def forward(self, indices: List[torch.Tensor], offsets: List[torch.Tensor],
                per_sample_weights: Optional[List[Optional[torch.Tensor]]] = None) -> List[torch.Tensor]:
        psw = self._check_inputs(indices, offsets, per_sample_weights)
        if self.fused_update:
            return self._fused_forward(indices, offsets, psw)
        weights: List[torch.Tensor] = []
        for table in self.tables:
            weights.append(table.weight)
        return torch.ops.ipex.merged_embedding_bag(weights, indices, offsets, psw, self.padding_idx,
                                                   self.pooling_mode, self.include_last_offset, self.output_dtype,
                                                   self.sparse)

    @torch.jit.unused
    def _fused_forward(self, indices: List[torch.Tensor], offsets: List[torch.Tensor],
                       psw: List[Optional[torch.Tensor]]) -> List[torch.Tensor]:
        from ._fused_update import fused_forward
        return fused_forward(self, indices, offsets, psw)


class MergedEmbeddingBagWithSGD(MergedEmbeddingBag):
    """``MergedEmbeddingBag`` whose backward applies torch.optim.SGD's sparse step (momentum 0, no
    weight decay) to the tables with learning rate ``lr``, which may be changed between steps."""

    def __init__(self, embedding_specs: List[EmbeddingSpec], lr: float = 0.01, weight_decay: float = 0):
        super().__init__(embedding_specs)
        self._init_update(lr=lr, weight_decay=weight_decay)

    def _init_update(self, lr: float = 0.01, weight_decay: float = 0, maximize: bool = False) -> None:
        from ._fused_update import OwnSGD
        if lr < 0.0:
            raise ValueError(f"MergedEmbeddingBagWithSGD: invalid learning rate {lr}")
        if weight_decay != 0:
            raise ValueError("MergedEmbeddingBagWithSGD: weight_decay is not compatible with the sparse update "
                             "(torch.optim.SGD refuses it on sparse gradients); use weight_decay=0")
        self.lr = lr
        self.maximize = maximize
        self.fused_update = True
        self._update = OwnSGD(self)

    def to_bfloat16_train(self) -> None:
        """Splits each fp32 table into its bf16 top (the parameter) and int16 trail (kept here)."""
        self._update.split()


class MergedEmbeddingBagWithAdaGrad(MergedEmbeddingBag):
    """``MergedEmbeddingBag`` whose backward applies torch.optim.Adagrad's sparse step (no weight
    decay, lr_decay 0, initial accumulator 0) with ``lr`` and ``eps``."""

    def __init__(self, embedding_specs: List[EmbeddingSpec], lr: float = 0.01, eps: float = 1e-10):
        super().__init__(embedding_specs)
        self._init_update(lr=lr, eps=eps)

    def _init_update(self, lr: float = 0.01, eps: float = 1e-10, lr_decay: float = 0.0,
                     maximize: bool = False) -> None:
        from ._fused_update import OwnAdagrad
        if lr < 0.0:
            raise ValueError(f"MergedEmbeddingBagWithAdaGrad: invalid learning rate {lr}")
        if eps < 0.0:
            raise ValueError(f"MergedEmbeddingBagWithAdaGrad: invalid eps {eps}")
        self.lr, self.eps, self.lr_decay, self.maximize = lr, eps, lr_decay, maximize
        self.fused_update = True
        self._update = OwnAdagrad(self)

    def to_bfloat16_train(self) -> None:
        """Splits each fp32 table into its bf16 top (the parameter) and int16 trail (kept here)."""
        self._update.split()


def master_weights(module: MergedEmbeddingBag) -> List[torch.Tensor]:
    """The fp32 master weight of each table (recombined from top and trail where split)."""
    out = []
    for i, table in enumerate(module.tables):
        trail = module._update.trail(i) if module.fused_update else None
        out.append(table.weight.detach().clone() if trail is None else combine_master(table.weight, trail))
    return out


__all__ = ["PoolingMode", "EmbeddingSpec", "MergedEmbeddingBag", "MergedEmbeddingBagWithSGD",
           "MergedEmbeddingBagWithAdaGrad", "master_weights", "split_master"]
