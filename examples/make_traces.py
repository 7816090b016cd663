#!/usr/bin/env python3
"""Writes the examples' call traces (deterministic: fixed seeds, no torch needed).

adam_lr_schedule: 20 Adam steps, lr from LinearLR(start_factor=1/3, total_iters=5) on a base
  lr of 0.01, passed as a Python float (scalar.jsonl) or as a 0-d tensor (tensor.jsonl); the step
  count is a 0-d tensor in both, as in torch's compiled optimizer.
caption_padding: 1000 batches of 64 captions, lengths 90% short (5-31), 9% medium (33-63),
  1% long (65-255), plus an end token; padded to the longest caption (longest.jsonl) or to
  the next multiple of 32 (multiple32.jsonl).
bool_mask_selection: 50 calls with batch sizes 32 and 48.
"""
import json
import pathlib
import random

HERE = pathlib.Path(__file__).resolve().parent


def write(path, calls):
    with open(HERE / path, "w") as f:
        for c in calls:
            f.write(json.dumps(c) + "\n")


def vec(n, dtype="float32"):
    return {"shape": [n], "dtype": dtype}


def adam():
    base, start, total = 0.01, 1.0 / 3.0, 5
    lrs = [base * (start + (1.0 - start) * min(i, total) / total) for i in range(20)]
    state = {name: vec(1024) for name in ("param", "grad", "exp_avg", "exp_avg_sq")}
    state["step"] = {"shape": [], "dtype": "float32"}
    write("adam_lr_schedule/scalar.jsonl", [{**state, "lr": {"scalar": lr}} for lr in lrs])
    write("adam_lr_schedule/tensor.jsonl", [{**state, "lr": {"shape": [], "dtype": "float32"}} for _ in lrs])


def captions():
    rng = random.Random(42)
    bins = [((5, 32), 0.90), ((33, 64), 0.09), ((65, 256), 0.01)]
    longest, mult32 = [], []
    for _ in range(1000):
        lengths = []
        for _ in range(64):
            (lo, hi), = rng.choices([b for b, _ in bins], weights=[w for _, w in bins], k=1)
            lengths.append(rng.randint(lo, hi - 1) + 1)  # caption plus its end token
        n = max(lengths)
        for out, seq in ((longest, n), (mult32, (n + 31) // 32 * 32)):
            t = {"shape": [64, seq], "dtype": "int64"}
            out.append({"input_ids": t, "labels": t})
    write("caption_padding/longest.jsonl", longest)
    write("caption_padding/multiple32.jsonl", mult32)


def mask():
    write("bool_mask_selection/calls.jsonl",
          [{"x": {"shape": [32 if i % 5 else 48, 16], "dtype": "float32"}} for i in range(50)])


if __name__ == "__main__":
    adam()
    captions()
    mask()
