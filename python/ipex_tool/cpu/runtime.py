"""``ipex_tool.cpu.runtime``: IPEX's CPU runtime — CPU pools, pinning, asynchronous tasks and
multi-stream inference — over the library's pools and pinning (runtime/cpu_pool.h).

A stream is a thread pinned to its pool's CPUs with an OpenMP team of its own (one thread per
CPU): ``Task`` runs a module on one, ``MultiStreamModule`` splits a batch across several and
concatenates their outputs. A TorchScript module's forward runs without the GIL, so streams
compute at the same time; an eager ``nn.Module`` holds the GIL in its Python code (a warning
says so, as in IPEX). CPU ids are the logical CPUs the process may use.
"""

import concurrent.futures
import functools
import json
import queue
import threading
import warnings
import weakref
from typing import List, Optional, Union

import torch

from .. import _bridge
from .._bridge import IpexToolWarning


def _warn(message: str) -> None:
    warnings.warn(message, IpexToolWarning, stacklevel=_bridge.caller_stacklevel())


def get_core_list_of_node_id(node_id: int) -> List[int]:
    """The CPUs of NUMA node ``node_id`` this process may use."""
    return _bridge.call_json("cpu_pool", json.dumps({"node_id": int(node_id)}))["cpus"]


def _thread_info() -> dict:
    return _bridge.call_json("thread_info")


class CPUPool:
    """A set of CPUs for intra-op parallelism: ``core_ids`` (a list or range), else the CPUs of
    NUMA node ``node_id``, else all the process's CPUs. CPUs the process may not use are a
    ValueError."""

    def __init__(self, core_ids: Optional[Union[List[int], range]] = None, node_id: Optional[int] = None):
        if core_ids is not None:
            if node_id is not None:
                _warn("CPUPool: both core_ids and node_id are given; core_ids is used")
            if isinstance(core_ids, range):
                core_ids = list(core_ids)
            if not isinstance(core_ids, (list, tuple)) or not all(isinstance(c, int) for c in core_ids):
                raise TypeError("CPUPool: core_ids must be a list of CPU ids (ints)")
            options = {"core_ids": list(core_ids)}
        elif node_id is not None:
            options = {"node_id": int(node_id)}
        else:
            options = {}
        self.core_ids = _bridge.call_json("cpu_pool", json.dumps(options))["cpus"]

    def __repr__(self) -> str:
        return f"CPUPool(core_ids={self.core_ids})"


def _pin_calling_thread(cpus: List[int], threads: int = 0) -> dict:
    return _bridge.call_json("pin_thread", json.dumps({"cpus": list(cpus), "threads": threads}))


class pin:
    """Runs the code in a ``with`` block (or a decorated function) on the pool's CPUs with one
    OpenMP thread per CPU; the thread's CPUs and thread count are restored afterwards."""

    def __init__(self, cpu_pool: CPUPool):
        if not isinstance(cpu_pool, CPUPool):
            raise TypeError("pin: cpu_pool must be an ipex_tool.cpu.runtime.CPUPool")
        self.cpu_pool = cpu_pool
        self._saved = threading.local()

    def __enter__(self):
        stack = getattr(self._saved, "stack", [])
        info = _thread_info()
        stack.append((info["cpus"], info["threads"]))
        self._saved.stack = stack
        _pin_calling_thread(self.cpu_pool.core_ids)
        return self

    def __exit__(self, *exc):
        cpus, threads = self._saved.stack.pop()
        _pin_calling_thread(cpus, threads)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def pinned(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return pinned


class Future:
    """The result of a ``Task`` call: ``get()`` waits for it (and raises what the module raised)."""

    def __init__(self, future: concurrent.futures.Future):
        self._future = future

    def get(self, timeout: Optional[float] = None):
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._future.done()


_STOP = object()


def _stream_loop(work: "queue.Queue", cpus: List[int], started: concurrent.futures.Future) -> None:
    try:
        _pin_calling_thread(cpus)
    except BaseException as e:  # noqa: B902 - handed to the creator
        started.set_exception(e)
        return
    started.set_result(None)
    while True:
        item = work.get()
        if item is _STOP:
            return
        future, grad, fn, args, kwargs = item
        if not future.set_running_or_notify_cancel():
            continue
        try:
            with torch.set_grad_enabled(grad):  # the caller's mode (it is per thread)
                future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: B902 - delivered through the future
            future.set_exception(e)


class _Stream:
    """A thread pinned to `cpus` with its own OpenMP team, running submitted calls in order."""

    def __init__(self, cpus: List[int], name: str):
        self.cpus = list(cpus)
        self._work = queue.Queue()
        started = concurrent.futures.Future()
        self._thread = threading.Thread(target=_stream_loop, args=(self._work, self.cpus, started), name=name,
                                        daemon=True)
        self._thread.start()
        started.result()
        weakref.finalize(self, self._work.put, _STOP)

    def submit(self, fn, *args, **kwargs) -> Future:
        future = concurrent.futures.Future()
        self._work.put((future, torch.is_grad_enabled(), fn, args, kwargs))
        return Future(future)


class Task:
    """A module run asynchronously on a stream of its own pinned to ``cpu_pool``: calling the
    task returns a Future (``get()`` for the output); ``run_sync`` waits for it."""

    def __init__(self, module, cpu_pool: CPUPool):
        if not isinstance(cpu_pool, CPUPool):
            raise TypeError("Task: cpu_pool must be an ipex_tool.cpu.runtime.CPUPool")
        if not callable(module):
            raise TypeError(f"Task: module must be callable, not {type(module).__name__}")
        self.module = module
        self.cpu_pool = cpu_pool
        self._stream = _Stream(cpu_pool.core_ids, f"ipex_tool-task-{cpu_pool.core_ids[0]}")

    def __call__(self, *args, **kwargs) -> Future:
        return self._stream.submit(self.module, *args, **kwargs)

    def run_sync(self, *args, **kwargs):
        return self(*args, **kwargs).get()


class MultiStreamModuleHint:
    """How MultiStreamModule splits the inputs or concatenates the outputs: one entry per
    argument (positional, then keywords), each None (not split: every stream gets it whole), an
    int (the dim to split or concatenate along) or a list/tuple/dict of such entries for a
    container argument. For outputs the first positional entry describes the whole output."""

    def __init__(self, *args, **kwargs):
        self.args = list(args)
        self.kwargs = kwargs


default_multi_stream_module_split_hint = MultiStreamModuleHint(0)
default_multi_stream_module_concat_hint = MultiStreamModuleHint(0)


def get_default_num_streams(cpu_pool: CPUPool) -> int:
    """``num_streams="AUTO"``: one stream per CPU of the pool, as IPEX."""
    return len(cpu_pool.core_ids)


def _split_size(hint, value):
    """The size of the first split dimension the hint names in value, or None."""
    if isinstance(hint, int) and not isinstance(hint, bool):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"MultiStreamModule: input_split_hint {hint} names a {type(value).__name__}, not a tensor")
        return value.size(hint)
    if isinstance(hint, (list, tuple)):
        for h, v in zip(hint, value):
            size = _split_size(h, v)
            if size is not None:
                return size
    if isinstance(hint, dict):
        for k, h in hint.items():
            size = _split_size(h, value[k])
            if size is not None:
                return size
    return None


def _split(hint, value, start: int, length: int):
    if hint is None:
        return value
    if isinstance(hint, int) and not isinstance(hint, bool):
        return value.narrow(hint, start, length)
    if isinstance(hint, (list, tuple)):
        parts = [_split(h, v, start, length) for h, v in zip(hint, value)]
        parts += list(value[len(hint):])
        return tuple(parts) if isinstance(value, tuple) else parts
    if isinstance(hint, dict):
        return {k: _split(hint.get(k), v, start, length) for k, v in value.items()}
    raise TypeError(f"MultiStreamModule: unsupported hint entry {hint!r} (None, an int, or a list/tuple/dict of them)")


def _concat(hint, outputs):
    if hint is None:
        return outputs[0]
    if isinstance(hint, int) and not isinstance(hint, bool):
        return torch.cat(outputs, dim=hint)
    if isinstance(hint, (list, tuple)):
        first = outputs[0]
        merged = [_concat(h, [o[i] for o in outputs]) for i, h in enumerate(hint)]
        merged += list(first[len(hint):])
        return tuple(merged) if isinstance(first, tuple) else merged
    if isinstance(hint, dict):
        return {k: _concat(hint.get(k), [o[k] for o in outputs]) for k in outputs[0]}
    raise TypeError(f"MultiStreamModule: unsupported hint entry {hint!r} (None, an int, or a list/tuple/dict of them)")


class MultiStreamModule(torch.nn.Module):
    """Throughput mode: ``num_streams`` streams (``"AUTO"``: one per CPU of ``cpu_pool``), each a
    thread pinned to its share of the pool's CPUs (consecutive, the first pool-size % streams
    get one more) with its own OpenMP team. A call splits the batch along ``input_split_hint``
    (default: the first input's dim 0; a batch smaller than the streams uses as many streams
    as samples, the first batch % streams streams get one more sample), runs the pieces at once
    and concatenates the outputs along ``output_concat_hint`` (or returns the list of each
    stream's output with ``concat_output=False``)."""

    def __init__(self, model, num_streams: Union[int, str] = "AUTO", cpu_pool: Optional[CPUPool] = None,
                 concat_output: bool = True,
                 input_split_hint: MultiStreamModuleHint = default_multi_stream_module_split_hint,
                 output_concat_hint: MultiStreamModuleHint = default_multi_stream_module_concat_hint):
        super().__init__()
        cpu_pool = cpu_pool if cpu_pool is not None else CPUPool()
        if not isinstance(cpu_pool, CPUPool):
            raise TypeError("MultiStreamModule: cpu_pool must be an ipex_tool.cpu.runtime.CPUPool")
        if not isinstance(model, torch.jit.ScriptModule):
            _warn("MultiStreamModule on an eager nn.Module: its Python code holds the GIL, so streams wait for "
                  "each other; a TorchScript module (torch.jit.trace, ipex_tool.optimize) runs them at once")
        if isinstance(num_streams, str):
            if num_streams.upper() != "AUTO":
                raise ValueError(f"MultiStreamModule: num_streams {num_streams!r} is not a number or \"AUTO\"")
            num_streams = get_default_num_streams(cpu_pool)
        if isinstance(num_streams, bool) or not isinstance(num_streams, int) or num_streams < 1:
            raise ValueError(f"MultiStreamModule: num_streams must be a positive int or \"AUTO\", not {num_streams!r}")
        if num_streams > len(cpu_pool.core_ids):
            _warn(f"MultiStreamModule: {num_streams} streams on {len(cpu_pool.core_ids)} CPUs; using "
                  f"{len(cpu_pool.core_ids)}")
            num_streams = len(cpu_pool.core_ids)
        for name, hint in (("input_split_hint", input_split_hint), ("output_concat_hint", output_concat_hint)):
            if not isinstance(hint, MultiStreamModuleHint):
                raise TypeError(f"MultiStreamModule: {name} must be a MultiStreamModuleHint")
        self.model = model
        self.cpu_pool = cpu_pool
        self.num_streams = num_streams
        self.concat_output = concat_output
        self.input_split_hint = input_split_hint
        self.output_concat_hint = output_concat_hint
        cores = cpu_pool.core_ids
        per, extra = divmod(len(cores), num_streams)
        self.stream_core_ids = []
        start = 0
        for i in range(num_streams):
            n = per + (1 if i < extra else 0)
            self.stream_core_ids.append(cores[start:start + n])
            start += n
        self.tasks = [Task(model, CPUPool(ids)) for ids in self.stream_core_ids]

    def get_stream_number(self) -> int:
        return self.num_streams

    def forward(self, *args, **kwargs):
        hint = self.input_split_hint
        size = _split_size(tuple(hint.args), args)
        if size is None:
            size = _split_size(hint.kwargs, kwargs)
        if size is None:
            raise ValueError("MultiStreamModule: input_split_hint splits no input (give a dim for a tensor input)")
        used = min(self.num_streams, size)
        per, extra = divmod(size, used)
        futures = []
        start = 0
        for i in range(used):
            n = per + (1 if i < extra else 0)
            stream_args = _split(tuple(hint.args), args, start, n) if hint.args else args
            stream_kwargs = {k: _split(hint.kwargs.get(k), v, start, n) for k, v in kwargs.items()}
            futures.append(self.tasks[i](*stream_args, **stream_kwargs))
            start += n
        outputs = [f.get() for f in futures]
        if not self.concat_output:
            return outputs
        concat = self.output_concat_hint
        if concat.args and concat.kwargs:
            return (_concat(concat.args[0], outputs),
                    {k: _concat(h, [o[k] for o in outputs]) for k, h in concat.kwargs.items()})
        if concat.kwargs:
            return {k: _concat(h, [o[k] for o in outputs]) for k, h in concat.kwargs.items()}
        return _concat(concat.args[0] if concat.args else None, outputs)


__all__ = ["CPUPool", "pin", "Task", "Future", "MultiStreamModule", "MultiStreamModuleHint", "get_default_num_streams",
           "get_core_list_of_node_id", "default_multi_stream_module_split_hint",
           "default_multi_stream_module_concat_hint"]
