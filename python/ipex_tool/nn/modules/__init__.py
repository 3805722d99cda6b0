"""IPEX's ``intel_extension_for_pytorch.nn.modules`` names that ipex_tool has: the merged
EmbeddingBag and its training forms (merged_embeddingbag.py)."""

from .merged_embeddingbag import (EmbeddingSpec, MergedEmbeddingBag, MergedEmbeddingBagWithAdaGrad,
                                  MergedEmbeddingBagWithSGD, PoolingMode, master_weights)

__all__ = ["EmbeddingSpec", "MergedEmbeddingBag", "MergedEmbeddingBagWithAdaGrad", "MergedEmbeddingBagWithSGD",
           "PoolingMode", "master_weights"]
