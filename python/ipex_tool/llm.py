"""``ipex_tool.llm``: Hugging Face decoders run by the native LLM runtime of `ipex-tool generate`.

``load(model_dir, ...)`` reads a checkpoint directory (config.json, safetensors, tokenizer.json,
generation_config.json; GPTQ/AWQ as they are) once, with the options of ``ipex-tool generate``:
``dtype`` (torch.bfloat16 / torch.float32 or "bf16" / "fp32"), ``woq_dtype`` ("int4" | "int8":
weight-only quantization on load), ``group_size``, ``lowp_mode``. The returned model's
``generate(...)`` runs greedy search (the default, as ``do_sample=False``) or sampling
(``temperature``, ``top_k``, ``top_p``, ``seed``) on text prompts or token ids, any number of
them as one ragged batch, and returns ids and text. ``generate(model_dir, prompt, ...)`` loads
and generates in one call.
"""

import dataclasses
import json
from typing import List, Optional, Sequence, Union

import torch

from . import _bridge

_DTYPES = {torch.bfloat16: "bf16", torch.float32: "fp32", "bf16": "bf16", "fp32": "fp32", "bfloat16": "bf16",
           "float32": "fp32"}


@dataclasses.dataclass
class GenerateOutput:
    """What ``generate`` returns, one entry per prompt: the prompt's ids, the generated ids (an
    end-of-sequence token ends them and is not included), their text (None without a tokenizer)
    and why each stopped ("eos", "length", "non_finite"); ``report`` is generate --json's."""
    prompt_ids: List[List[int]]
    ids: List[List[int]]
    text: Optional[List[str]]
    stop_reason: List[str]
    report: dict

    @property
    def sequences(self) -> List[List[int]]:
        """Prompt and generated ids together, as transformers' generate returns them."""
        return [p + g for p, g in zip(self.prompt_ids, self.ids)]


def _dtype_name(dtype) -> str:
    if dtype not in _DTYPES:
        raise ValueError(f"ipex_tool.llm: dtype {dtype!r} is not supported; use torch.bfloat16 or torch.float32")
    return _DTYPES[dtype]


def _prompts(prompt) -> dict:
    """{"prompts": [...], "prompt_ids": [[...]]} for a text, a list of texts, a list of ids, a list
    of id lists or a 1-D / 2-D tensor of ids."""
    if isinstance(prompt, torch.Tensor):
        if prompt.dim() not in (1, 2) or prompt.dtype not in (torch.int32, torch.int64):
            raise ValueError("ipex_tool.llm: input_ids must be a 1-D or 2-D integer tensor")
        prompt = prompt.tolist()
    if isinstance(prompt, str):
        return {"prompts": [prompt]}
    if isinstance(prompt, (list, tuple)) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return {"prompts": list(prompt)}
        if all(isinstance(p, int) for p in prompt):
            return {"prompt_ids": [list(prompt)]}
        if all(isinstance(p, (list, tuple)) and all(isinstance(i, int) for i in p) for p in prompt):
            return {"prompt_ids": [list(p) for p in prompt]}
    raise TypeError("ipex_tool.llm: the prompt must be a string, a list of strings, token ids (a list of ints, "
                    "a list of such lists or an integer tensor)")


class Model:
    """A decoder loaded by the native runtime; ``generate`` may be called any number of times."""

    def __init__(self, model_dir: str, dtype=torch.bfloat16, woq_dtype: Optional[str] = None,
                 group_size: Optional[int] = None, lowp_mode: Optional[str] = None, threads: Optional[int] = None):
        options = {"dtype": _dtype_name(dtype)}
        for key, value in (("woq_dtype", woq_dtype), ("group_size", group_size), ("lowp_mode", lowp_mode),
                           ("threads", threads)):
            if value is not None:
                options[key] = value
        info = _bridge.call_json("llm_load", str(model_dir), json.dumps(options))
        self._handle = info.pop("handle")
        self.model_dir = str(model_dir)
        self.architecture = info["architecture"]
        self.weights = info["weights"]
        self.has_tokenizer = info["tokenizer"]
        self.vocab_size = info["vocab_size"]

    def generate(self, prompt: Union[str, Sequence, torch.Tensor], max_new_tokens: int = 128,
                 do_sample: Optional[bool] = None, temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, seed: int = 0, repetition_penalty: Optional[float] = None,
                 max_length: Optional[int] = None, add_special_tokens: bool = True,
                 allow_long_context: bool = False, greedy: Optional[bool] = None) -> GenerateOutput:
        """Generates for one prompt or a batch. Greedy unless ``do_sample=True`` or a sampling
        option is given (``do_sample=False`` with one is a ValueError); ``greedy`` is the CLI's
        name for ``not do_sample``."""
        if greedy is not None:
            if do_sample is not None and do_sample == greedy:
                raise ValueError(f"ipex_tool.llm: greedy={greedy} contradicts do_sample={do_sample}")
            do_sample = not greedy
        sampling = {k: v for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p))
                    if v is not None}
        if do_sample is False and sampling:
            raise ValueError(f"ipex_tool.llm: do_sample=False (greedy) with {', '.join(sampling)}; drop them "
                             "or set do_sample=True")
        request = dict(_prompts(prompt), max_new_tokens=max_new_tokens, seed=seed, no_special=not add_special_tokens,
                       allow_long_context=allow_long_context, greedy=not (do_sample or sampling), **sampling)
        if do_sample and not sampling:
            request["temperature"] = 1.0
        if repetition_penalty is not None:
            request["repetition_penalty"] = repetition_penalty
        if max_length is not None:
            request["max_length"] = max_length
        if self._handle is None:
            raise RuntimeError("ipex_tool.llm: the model was closed; load it again")
        report = _bridge.call_json("llm_generate", self._handle, json.dumps(request))
        seqs = report["sequences"]
        return GenerateOutput(prompt_ids=[s["prompt_ids"] for s in seqs], ids=[s["ids"] for s in seqs],
                              text=[s["text"] for s in seqs] if self.has_tokenizer else None,
                              stop_reason=[s["stop"] for s in seqs], report=report)

    def close(self) -> None:
        """Frees the weights now (otherwise when the object goes)."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            _bridge.call("llm_release", handle)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the bridge may be gone
            pass

    def __repr__(self) -> str:
        return f"ipex_tool.llm.Model({self.model_dir!r}, {self.architecture}, {self.weights})"


def load(model_dir: str, dtype=torch.bfloat16, woq_dtype: Optional[str] = None, group_size: Optional[int] = None,
         lowp_mode: Optional[str] = None, threads: Optional[int] = None) -> Model:
    """Loads a Hugging Face checkpoint directory with the native runtime."""
    return Model(model_dir, dtype=dtype, woq_dtype=woq_dtype, group_size=group_size, lowp_mode=lowp_mode,
                 threads=threads)


def generate(model: Union[str, Model], prompt, **kwargs) -> GenerateOutput:
    """``load(model).generate(prompt, ...)`` for a directory; ``model.generate`` for a loaded
    model. Load options (dtype, woq_dtype, group_size, lowp_mode, threads) go to ``load``."""
    if not isinstance(model, Model):
        load_keys = ("dtype", "woq_dtype", "group_size", "lowp_mode", "threads")
        model = load(model, **{k: kwargs.pop(k) for k in load_keys if k in kwargs})
    return model.generate(prompt, **kwargs)


__all__ = ["load", "generate", "Model", "GenerateOutput"]
