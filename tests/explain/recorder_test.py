"""scripts/tcc_trace.py records a loop's calls as the trace explain reads.

Tensors are stand-ins with torch's attributes (shape, dtype, stride(),
requires_grad, device), and grad mode a stand-in torch module's, so the test
needs no torch: the loops of tests/fidelity/2.15/requires_grad_change,
stride_change and grad_mode_change, recorded, give the prediction tcc gives
for the oracle's traces, which matches what real torch did (the recording's
compiles and first guard failure). The ways of recording (a wrapped
function, the decorator, a module's forward pre-hook, a `with` region) each
write the lines of the calls they cover.

Usage: recorder_test.py TCC SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import types


class FakeTensor:
    def __init__(self, shape, stride=None, requires_grad=False, device="cpu", dtype="torch.float32"):
        self.shape, self.dtype, self.requires_grad, self.device = tuple(shape), dtype, requires_grad, device
        self._stride = stride

    def stride(self):
        if self._stride is not None:
            return tuple(self._stride)
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))


class FakeModule:
    """nn.Module's call protocol: forward pre-hooks (with kwargs), then forward."""

    def __init__(self):
        self.hooks = {}

    def forward(self, input_ids, lr, steps, flag, cache=None):
        return input_ids

    def register_forward_pre_hook(self, hook, with_kwargs=False):
        assert with_kwargs
        key = object()
        self.hooks[key] = hook
        return types.SimpleNamespace(remove=lambda: self.hooks.pop(key))

    def __call__(self, *args, **kwargs):
        for hook in list(self.hooks.values()):
            hook(self, args, kwargs)
        return self.forward(*args, **kwargs)


def expect_lines(what, path, want):
    with open(path) as f:
        got = [json.loads(line) for line in f]
    if got != want:
        print(f"FAIL {what} recorded {got}, expected {want}")
        return 1
    return 0


def explain(tcc, root, model, trace):
    r = subprocess.run([tcc, "explain", model, "--trace", trace, "--format", "json"], cwd=root,
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tcc explain {model} --trace {trace} exited {r.returncode}: {r.stderr}")
    j = json.loads(r.stdout)
    return j["compiles"], [rc["reasons"][0] for rc in j["recompiles"]]


def main():
    tcc, root = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(root, "scripts"))
    import tcc_trace

    failures = 0
    model = "tests/fidelity/models/relu2d.tir"
    # Each call: its tensor and whether grad mode is on.
    loops = {
        "requires_grad_change": [(FakeTensor([4, 8]), True), (FakeTensor([4, 8], requires_grad=True), True)],
        "stride_change": [(FakeTensor([4, 8]), True), (FakeTensor([4, 8], stride=[1, 4]), True)],
        "grad_mode_change": [(FakeTensor([4, 8]), True), (FakeTensor([4, 8]), False), (FakeTensor([4, 8]), True)],
    }
    grad = [True]
    sys.modules["torch"] = types.SimpleNamespace(is_grad_enabled=lambda: grad[0])
    with tempfile.TemporaryDirectory() as tmp:
        for scenario, calls in loops.items():
            path = os.path.join(tmp, scenario + ".jsonl")
            step = tcc_trace.record(lambda x: x, path)
            for x, grad[0] in calls:
                step(x)
            step.close()
            got = explain(tcc, root, model, path)
            want = explain(tcc, root, model, f"tests/fidelity/2.15/{scenario}/trace.jsonl")
            with open(os.path.join(root, "tests", "fidelity", "2.15", scenario, "recording.json")) as f:
                torch = json.load(f)["recorded"]
            torch_view = (torch["compiles"], [rc["reasons"][0] for rc in torch["recompiles"]])
            for what, other in (("the oracle's trace", want), ("real torch", torch_view)):
                if got != other:
                    print(f"FAIL {scenario}: recorded trace predicts {got}, {what}: {other}")
                    failures += 1

        # Scalars, a renamed argument, what is left out, a module's forward, a device.
        path = os.path.join(tmp, "module.jsonl")
        module = FakeModule()
        if tcc_trace.record(module, path, names={"input_ids": "x"}) is not module:
            print("FAIL record(module) replaced the module")
            failures += 1
        module(FakeTensor([2, 3], device="cuda:0", dtype="torch.int64"), 0.5, 3, True, cache=[1])
        want = {"x": {"shape": [2, 3], "dtype": "int64", "device": "cuda:0"}, "lr": {"scalar": 0.5},
                "steps": {"scalar": 3}, "flag": {"scalar": True}}
        failures += expect_lines("record(module)", path, [want])

        # The decorator, with its path.
        path = os.path.join(tmp, "decorated.jsonl")

        @tcc_trace.record(path)
        def step(x, lr):
            return x

        step(FakeTensor([4]), 0.1)
        step(FakeTensor([5]), lr=0.2)
        step.close()
        step(FakeTensor([6]), 0.3)
        failures += expect_lines("@record(path)", path, [
            {"x": {"shape": [4], "dtype": "float32"}, "lr": {"scalar": 0.1}},
            {"x": {"shape": [5], "dtype": "float32"}, "lr": {"scalar": 0.2}}])

        # A region: only the calls inside the block, of a module (hooked, then unhooked) or a function.
        path = os.path.join(tmp, "region_module.jsonl")
        module = FakeModule()
        module(FakeTensor([1, 1]), 0.0, 0, False)
        with tcc_trace.recording(path, module) as bound:
            if bound is not module:
                print("FAIL recording(module) bound another object")
                failures += 1
            module(FakeTensor([2, 2]), 0.5, 1, False)
        module(FakeTensor([3, 3]), 0.0, 0, False)
        if module.hooks:
            print("FAIL recording(module) left its hook")
            failures += 1
        failures += expect_lines("recording(module)", path, [
            {"input_ids": {"shape": [2, 2], "dtype": "float32"}, "lr": {"scalar": 0.5}, "steps": {"scalar": 1},
             "flag": {"scalar": False}}])
        path = os.path.join(tmp, "region_function.jsonl")
        with tcc_trace.recording(path, lambda x: x) as f:
            f(FakeTensor([7]))
        f(FakeTensor([8]))
        failures += expect_lines("recording(function)", path, [{"x": {"shape": [7], "dtype": "float32"}}])

    if failures:
        sys.exit(1)
    print("recorded traces give the recordings' predictions")


if __name__ == "__main__":
    main()
