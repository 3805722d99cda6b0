"""ipex_tool: Intel Extension for PyTorch's Python API over the ipex-tool library.

``import ipex_tool as ipex`` in place of ``import intel_extension_for_pytorch as ipex``:
``ipex.optimize`` runs the pipeline of ``ipex-tool optimize`` on the model and returns a
TorchScript model, and with an ``optimizer`` (SGD, Adagrad, Adam, AdamW, Lamb, Lars) prepares training with
fused optimizer steps and split bf16 master weights (``ipex_tool.optim``);
``ipex.set_fp32_math_mode`` / ``get_fp32_math_mode`` / ``FP32MathMode`` set the fp32 math mode
of the models optimized afterwards; ``ipex.quantization`` prepares, calibrates and converts to
INT8; ``ipex.llm`` loads Hugging Face decoders into the native
runtime and generates; ``ipex.cpu.runtime`` pins work to CPU pools and runs models on several
streams at once. What differs from IPEX is in
docs/migration.md. Importing the package loads libipex_pybridge.so and libipex_ops.so (the ops
of the optimized models) into the process.
"""

from ._threads import set_default_threads

set_default_threads()  # Debian's libtorch starts on one thread; see _threads.py

from . import cpu, llm, nn, optim, quantization  # noqa: E402
from ._bridge import IpexToolWarning, ops_library_path  # noqa: E402
from .frontend import optimize  # noqa: E402
from .math_mode import FP32MathMode, get_fp32_math_mode, set_fp32_math_mode  # noqa: E402

__version__ = "0.1.0"

__all__ = ["optimize", "quantization", "llm", "cpu", "nn", "optim", "set_fp32_math_mode", "get_fp32_math_mode", "FP32MathMode", "IpexToolWarning",
           "ops_library_path"]
