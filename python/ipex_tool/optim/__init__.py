"""Training with ``ipex_tool.optimize(model, optimizer=opt, ...)``: fused optimizer steps and
split bf16 master weights (issue 51; docs/training.md).

``ipex_tool.optimize`` fuses torch.optim.SGD, Adagrad, Adam, AdamW and IPEX's ``Lamb`` and
``Lars`` (here as ``ipex_tool.optim.Lamb`` / ``Lars``, also under IPEX's module paths
``ipex_tool.optim._lamb.Lamb`` and ``ipex_tool.optim._lars.Lars``). ``split_master`` /
``combine_master`` convert between an fp32 master weight and its bf16 top + int16 trail.
``model.state_dict()`` of a split model holds the fp32 masters; ``bf16_state_dict(model)`` the
bf16 tops.
"""

from ._fused import (FUSED_OPTIMIZERS, SPLIT_MODULES, UNSUPPORTED_OPTIONS, combine_master, optimize_training,
                     split_master)
from ._lamb import Lamb
from ._lars import Lars, create_optimizer_lars
from ._state_dict import bf16_state_dict, master_state_dict

__all__ = ["Lamb", "Lars", "create_optimizer_lars", "split_master", "combine_master", "FUSED_OPTIMIZERS",
           "bf16_state_dict", "master_state_dict"]
