"""Records the calls of a real training or inference loop as the JSON Lines
trace `tcc explain --trace` reads.

    import tcc_trace
    step = tcc_trace.record(step, "calls.jsonl")    # a function
    model = tcc_trace.record(model, "calls.jsonl")  # an nn.Module: its forward

Each call appends one line mapping each argument to the model input of the
same name (`names={"param": "input"}` renames): a tensor as its shape and
dtype, with "requires_grad", "device" and "stride" where they are not the
defaults (False, CPU, row-major), which torch's TENSOR_MATCH guards; a Python
float, int or bool as {"scalar": v}, which torch guards by value or makes
symbolic. Other arguments (None, lists, modules) are left out. A call made
with grad mode off (under torch.no_grad()) adds "$grad_mode": false, which
torch's GLOBAL_STATE guard checks. The recorder reads tensors through their
attributes only (shape, dtype, stride(), requires_grad, device) and grad mode
from the torch the program imported, so it needs no import of torch itself.
"""
import functools
import inspect
import json
import sys

__all__ = ["record", "entry"]


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


def record(fn, path, names=None):
    """fn (a function, or an nn.Module whose forward is read), wrapped so that
    each call appends its line to `path` (truncated when recording starts)."""
    target = fn.forward if hasattr(fn, "forward") and callable(fn.forward) else fn
    signature = inspect.signature(target)
    names = dict(names or {})
    out = open(path, "w", encoding="utf-8")

    @functools.wraps(target)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        line = {}
        for name, value in bound.arguments.items():
            e = entry(value)
            if e is not None:
                line[names.get(name, name)] = e
        torch = sys.modules.get("torch")
        if torch is not None and not torch.is_grad_enabled():
            line["$grad_mode"] = False
        out.write(json.dumps(line) + "\n")
        out.flush()
        return fn(*args, **kwargs)

    wrapper.close = out.close
    return wrapper
