"""``ipex_tool.nn``: IPEX's merged EmbeddingBag modules (``modules/merged_embeddingbag.py``).

A DLRM keeps its tables as ``nn.EmbeddingBag(sparse=True)`` modules and calls them through
``MergedEmbeddingBag.from_embeddingbag_list(tables)``; ``ipex_tool.optimize(model,
optimizer=torch.optim.SGD/Adagrad(...))`` then fuses the tables' backward with the optimizer's
sparse step (one op for every table; ``_training.py``), and its ``nn.Linear`` modules become
``TrainingLinear`` (forward and backward through oneDNN; ``_training_linear.py``).
"""

from . import modules
from ._training import apply_training, plan_training
from ._training_linear import TrainingLinear, use_training_linear
from .modules import (EmbeddingSpec, MergedEmbeddingBag, MergedEmbeddingBagWithAdaGrad, MergedEmbeddingBagWithSGD,
                      PoolingMode, master_weights)

__all__ = ["modules", "TrainingLinear", "EmbeddingSpec", "MergedEmbeddingBag", "MergedEmbeddingBagWithAdaGrad",
           "MergedEmbeddingBagWithSGD", "PoolingMode", "master_weights"]
