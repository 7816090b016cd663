"""Records the calls of a real training or inference loop as the JSON Lines
trace `tcc explain --trace` reads.

    import tcc_trace

    @tcc_trace.record("calls.jsonl")               # every call of a function
    def step(x, lr): ...

    tcc_trace.record(model, "calls.jsonl")         # every call of an nn.Module (a forward pre-hook)

    with tcc_trace.recording("calls.jsonl", model):  # only the calls made inside the block
        for batch in loader:
            model(batch)

`record(fn, path)` returns the function wrapped; given an nn.Module it
registers a forward pre-hook and returns the module itself, still an
nn.Module with its parameters. `recording(path, target)` records while the
block runs: a module through a hook removed at the end, a function through the
wrapper the `with` statement binds (`with recording(path, step) as step:`).
Record the callable torch.compile returns (or the module before compiling it
in place with `model.compile()`, whose hooks then run inside the compiled
frame): the recorder's own Python code must stay outside what dynamo traces.

Each call appends one line mapping each argument to the model input of the
same name (`names={"param": "input"}` renames; a module's arguments are its
forward's): a tensor as its shape and dtype, with "requires_grad", "device"
and "stride" where they are not the defaults (False, CPU, row-major), which
torch's TENSOR_MATCH guards; a Python float, int or bool as {"scalar": v},
which torch guards by value or makes symbolic. Other arguments (None, lists,
modules) are left out. A call made with grad mode off (under torch.no_grad())
adds "$grad_mode": false, which torch's GLOBAL_STATE guard checks. The
recorder reads tensors through their attributes only (shape, dtype, stride(),
requires_grad, device) and grad mode from the torch the program imported, so
it needs no import of torch itself.
"""
import contextlib
import functools
import inspect
import json
import os
import sys

__all__ = ["record", "recording", "entry"]


def _contiguous(shape):
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return list(reversed(strides))


def entry(value):
    """The trace entry of one argument, or None when explain has no use for it."""
    if isinstance(value, (bool, int, float)):
        return {"scalar": value}
    if not all(hasattr(value, a) for a in ("shape", "dtype", "stride")):
        return None
    shape = [int(s) for s in value.shape]
    e = {"shape": shape, "dtype": str(value.dtype).replace("torch.", "")}
    if getattr(value, "requires_grad", False):
        e["requires_grad"] = True
    device = str(getattr(value, "device", "cpu"))
    if device != "cpu":
        e["device"] = device
    stride = [int(s) for s in value.stride()]
    # Strides of dims of size 1 or 0 do not matter to the layout; torch compares them as the rest.
    if stride != _contiguous(shape):
        e["stride"] = stride
    return e


class _Trace:
    """The open trace file; a call written after close() is not recorded."""

    def __init__(self, path, names):
        self.names = dict(names or {})
        self.out = open(path, "w", encoding="utf-8")

    def write(self, signature, args, kwargs):
        if self.out.closed:
            return
        line = {}
        for name, value in signature.bind(*args, **kwargs).arguments.items():
            e = entry(value)
            if e is not None:
                line[self.names.get(name, name)] = e
        torch = sys.modules.get("torch")
        if torch is not None and not torch.is_grad_enabled():
            line["$grad_mode"] = False
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()

    def close(self):
        self.out.close()


def _is_module(target):
    return callable(getattr(target, "register_forward_pre_hook", None))


def _hook(module, trace):
    """A forward pre-hook writing each call of `module`; returns its handle.
    torch.compile's OptimizedModule is read through the module it compiles."""
    signature = inspect.signature(getattr(module, "_orig_mod", module).forward)
    return module.register_forward_pre_hook(lambda _, args, kwargs: trace.write(signature, args, kwargs),
                                            with_kwargs=True)


def _wrap(fn, trace):
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        trace.write(signature, args, kwargs)
        return fn(*args, **kwargs)

    wrapper.close = trace.close
    return wrapper


def record(target, path=None, names=None):
    """Records every call of `target` to `path` (truncated when recording starts).

    record(fn, path): fn wrapped, with a close() that ends the recording.
    record(module, path): the module, with a forward pre-hook that records it.
    record(path): a decorator doing record(fn, path)."""
    if isinstance(target, (str, os.PathLike)):
        return lambda fn: record(fn, target, names)
    trace = _Trace(path, names)
    if _is_module(target):
        _hook(target, trace)
        return target
    return _wrap(target, trace)


@contextlib.contextmanager
def recording(path, target, names=None):
    """Records the calls of `target` (a module or a function) made inside the
    `with` block to `path`. Binds the module itself, or the function wrapped."""
    trace = _Trace(path, names)
    handle = _hook(target, trace) if _is_module(target) else None
    try:
        yield target if handle else _wrap(target, trace)
    finally:
        if handle:
            handle.remove()
        trace.close()
