#!/usr/bin/env python3
"""Writes the ten-layer Linear training example (deterministic, no torch needed).

model.tir: ten bias-free Linear(width, width) layers (x @ W, as torch exports them),
  weights uniform in +-1/sqrt(width) like torch's default init. The committed file uses
  --width 32; `--width 1024` writes the compiled-optimizer documents' size (40 MB of
  weights), which `tcc explain --train` reads just the same.
trace.jsonl: 20 training steps of batch 8 with Adam's lr from LinearLR(start_factor=1/3,
  total_iters=5) on a base lr of 0.01, recorded as a Python float; the step count is a
  0-d tensor, as in torch's compiled optimizer.
"""
import argparse
import json
import pathlib
import random
import struct

HERE = pathlib.Path(__file__).resolve().parent
LAYERS = 10


def model(width, seed):
    rng = random.Random(seed)
    bound = width ** -0.5
    lines = [
        f"// Ten bias-free Linear({width}, {width}) layers, written by make_example.py --width {width}.",
        "graph main opset(ai.onnx: 17) {",
        f"  input %x: f32[batch, {width}]",
    ]
    for i in range(LAYERS):
        data = struct.pack(f"<{width * width}f", *(rng.uniform(-bound, bound) for _ in range(width * width)))
        lines.append(f'  const %layers.{i}.weight: f32[{width}, {width}] = hex"{data.hex()}"')
    prev = "%x"
    for i in range(LAYERS):
        out = "%y" if i == LAYERS - 1 else f"%h{i}"
        lines.append(f'  {out}: f32[batch, {width}] = MatMul({prev}, %layers.{i}.weight) name("/layers.{i}/MatMul")')
        prev = out
    lines += ["  output %y", "}"]
    return "\n".join(lines) + "\n"


def trace(width, batch=8, steps=20):
    base, start, total = 0.01, 1.0 / 3.0, 5
    calls = []
    for i in range(steps):
        lr = base * (start + (1.0 - start) * min(i, total) / total)
        t = {"shape": [batch, width], "dtype": "float32"}
        calls.append({"x": t, "target": t, "lr": {"scalar": lr}, "step": {"shape": [], "dtype": "float32"}})
    return "".join(json.dumps(c) + "\n" for c in calls)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model.tir").write_text(model(args.width, seed=0))
    (args.out / "trace.jsonl").write_text(trace(args.width))


if __name__ == "__main__":
    main()
