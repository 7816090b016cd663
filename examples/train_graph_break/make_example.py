#!/usr/bin/env python3
"""Writes the backward-capture example (deterministic, no torch needed).

A two-layer MLP whose output is divided by the number of active hidden units,
counted with torch.nonzero (a data-dependent shape, so a graph break):

    def forward(self, x):
        a = torch.relu(self.fc1(x))
        n = torch.nonzero(a > 0).shape[0]      # model.py:12, graph break
        return self.fc2(a) / n

The compiled-autograd tutorial's first point: a break in the forward splits
torch's backward as well, one backward graph per forward graph. `tcc explain
--train` predicts torch's frames for the step: the two forward graphs, their two
backward graphs, the recompile of the graph after the break when nonzero's
count changes, and the compiled optimizer step.

model.tir   the model (weights uniform in +-1/sqrt(16), seeded)
trace.jsonl 20 training steps of batch 8, lr and step as 0-d tensors
"""
import json
import pathlib
import random

HERE = pathlib.Path(__file__).resolve().parent


def floats(rng, n, bound):
    return "[" + ", ".join(repr(round(rng.uniform(-bound, bound), 6)) for _ in range(n)) + "]"


def model():
    rng = random.Random(0)
    return "\n".join([
        "// Two-layer MLP normalized by the count of active units (nonzero: a graph break); make_example.py.",
        "graph main opset(ai.onnx: 17) {",
        "  input %x: f32[batch, 16]",
        f"  const %fc1.weight: f32[16, 16] = {floats(rng, 256, 0.25)}",
        f"  const %fc2.weight: f32[16, 4] = {floats(rng, 64, 0.25)}",
        "  const %zero: f32[] = [0.0]",
        "  const %one: i64[] = [1]",
        '  %h: f32[batch, 16] = MatMul(%x, %fc1.weight) name("/fc1/MatMul") loc("model.py:11")',
        '  %a: f32[batch, 16] = Relu(%h) name("/Relu") loc("model.py:11")',
        '  %active: bool[batch, 16] = Greater(%a, %zero) name("/Greater") loc("model.py:12")',
        '  %idx: i64[2, n] = NonZero(%active) name("/NonZero") loc("model.py:12")',
        '  %dims: i64[2] = Shape(%idx) name("/Shape") loc("model.py:12")',
        '  %count: i64[] = Gather(%dims, %one) {axis = 0} name("/Gather") loc("model.py:12")',
        '  %countf: f32[] = Cast(%count) {to = 1} name("/Cast") loc("model.py:13")',
        '  %y: f32[batch, 4] = MatMul(%a, %fc2.weight) name("/fc2/MatMul") loc("model.py:13")',
        '  %out: f32[batch, 4] = Div(%y, %countf) name("/Div") loc("model.py:13")',
        "  output %out",
        "}",
    ]) + "\n"


def trace():
    scalar = {"shape": [], "dtype": "float32"}
    t = {"shape": [8, 16], "dtype": "float32"}
    target = {"shape": [8, 4], "dtype": "float32"}
    return "".join(json.dumps({"x": t, "target": target, "lr": scalar, "step": scalar}) + "\n" for _ in range(20))


if __name__ == "__main__":
    (HERE / "model.tir").write_text(model())
    (HERE / "trace.jsonl").write_text(trace())
