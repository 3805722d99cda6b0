"""From an eager ``nn.Module`` to TorchScript, and back into a trace.

``to_script_module`` traces a model with its example inputs and scripts it where tracing cannot
(an error, or control flow the trace would freeze); ``traceable_call`` runs an optimized
ScriptModule so that a ``torch.jit.trace`` in progress records one call of it.
"""

import contextlib
import inspect
import warnings

import torch


def as_input_tuple(sample_input) -> tuple:
    """IPEX's ``sample_input``: a tensor or a tuple of inputs."""
    if isinstance(sample_input, tuple):
        return sample_input
    if isinstance(sample_input, list):
        return tuple(sample_input)
    return (sample_input,)


def bind_positional(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple:
    """The call's arguments as positional arguments of forward's ``signature`` (tracing takes
    no keywords)."""
    if not kwargs:
        return args
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"ipex_tool.optimize: the call does not match the model's forward: {e}") from None
    bound.apply_defaults()
    positional = []
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
        elif kind == inspect.Parameter.VAR_KEYWORD:
            if value:
                raise TypeError("ipex_tool.optimize: forward(**kwargs) cannot be traced; "
                                f"pass {sorted(value)} positionally or give sample_input")
        else:
            positional.append(value)
    return tuple(positional)


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """The model in eval mode for the duration, then as it was."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@contextlib.contextmanager
def no_outer_trace():
    """Suspends a torch.jit.trace in progress (and autocast): what runs inside is not recorded."""
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        with torch.cpu.amp.autocast(enabled=False):
            yield
    finally:
        torch._C._set_tracing_state(state)


def _trace(model: torch.nn.Module, inputs: tuple):
    """(traced module or None, error text, whether the trace depends on input values)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        try:
            traced = torch.jit.trace(model, inputs, strict=False, check_trace=False)
        except Exception as e:  # the tracer raises many kinds
            return None, f"{type(e).__name__}: {e}".strip(), False
    value_dependent = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    for w in caught:
        if w not in value_dependent:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return traced, "", bool(value_dependent)


def to_script_module(model: torch.nn.Module, inputs: tuple) -> torch.jit.ScriptModule:
    """``model`` as TorchScript: traced with ``inputs`` (in eval mode, without gradients), or
    scripted when tracing fails or the trace depends on the inputs' values (a Python branch on
    a tensor); a value-dependent trace is kept, with a warning, only where scripting fails too."""
    with eval_mode(model), torch.no_grad(), torch.cpu.amp.autocast(enabled=False):
        traced, trace_error, value_dependent = _trace(model, inputs)
        if traced is not None and not value_dependent:
            return traced
        try:
            return torch.jit.script(model)
        except Exception as e:
            script_error = f"{type(e).__name__}: {e}".strip()
    if traced is not None:
        warnings.warn("ipex_tool.optimize: the model's trace depends on its inputs' values (the tracer warned) "
                      "and it cannot be scripted; the traced path is optimized", torch.jit.TracerWarning)
        return traced
    raise RuntimeError(
        f"ipex_tool.optimize: the model cannot be traced ({_first_lines(trace_error)}) "
        f"or scripted ({_first_lines(script_error)}); make its forward traceable with the sample input "
        "or scriptable, or pass a ScriptModule")


def _first_lines(text: str, count: int = 3) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " / ".join(lines[:count])


def graph_function(module: torch.jit.ScriptModule):
    """``module.forward`` as a TorchScript function (its graph without ``self``), which a trace
    in progress records as one call; None when forward reads the module's attributes."""
    frozen = module if not _reads_self(module.forward.graph) else torch.jit.freeze(module.eval())
    graph = frozen.forward.graph.copy()
    if _reads_self(graph):
        return None
    graph.eraseInput(0)
    return torch._C._create_function_from_graph("forward", graph)


def _reads_self(graph) -> bool:
    return len(list(graph.inputs())[0].uses()) > 0


def loaded_for_inference(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """A model the drivers wrote, as torch.jit.trace and torch.jit.freeze take it: a frozen module
    has no ``training`` attribute, which freeze asks for (it is an inference model: False)."""
    if not module._c.hasattr("training"):
        module.training = False
    return module
