#!/usr/bin/env python3
"""Writes the toy image-captioning training example (deterministic, no torch needed).

The practical guide's model, small: a VisionEncoderDecoder with a ViT encoder
(32x32 images, 8x8 patches, one layer) and a GPT-2 decoder (one layer with
causal self-attention and cross-attention to the image, vocabulary 64), random
weights, written node for node with onnx.helper. As the guide's model does
when given labels, it computes its own loss: token cross-entropy where labels
of -100 (padding) count for nothing, so `tcc explain --train --loss loss`
trains it as it stands.

model.onnx   the model (inputs pixel_values, decoder_input_ids, labels; output loss)
fixed.jsonl  100 training steps of batch 8 padded to MAX_SEQ_LEN (256): one shape
longest.jsonl the same captions padded to the longest in each batch (the guide's
             lengths: 90% 5-31 tokens, 9% 33-63, 1% 65-255, plus an end token)
Both traces pass lr and step as 0-d tensors, as tcc's training step takes them.
"""
import argparse
import json
import pathlib
import random

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = pathlib.Path(__file__).resolve().parent
D, HEADS, VOCAB, IMAGE, PATCH, MAX_SEQ_LEN, BATCH = 32, 2, 64, 32, 8, 256, 8


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def op(self, op_type, inputs, scope, **attrs):
        self.count += 1
        name = f"{scope}/{op_type}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def const(self, value, dtype=np.int64):
        self.count += 1
        name = f"const_{self.count}"
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def param(self, name, shape, scale=None):
        fan_in = shape[0]
        data = self.rng.standard_normal(shape) * (scale if scale is not None else fan_in ** -0.5)
        self.inits.append(numpy_helper.from_array(data.astype(np.float32), name))
        return name

    def linear(self, scope, x, d_in, d_out):
        w = self.param(f"{scope}.weight", (d_in, d_out))
        b = self.param(f"{scope}.bias", (d_out,), 0.02)
        return self.op("Add", [self.op("MatMul", [x, w], scope), b], scope)

    def layer_norm(self, scope, x):
        self.inits.append(numpy_helper.from_array(np.ones(D, np.float32), f"{scope}.weight"))
        self.inits.append(numpy_helper.from_array(np.zeros(D, np.float32), f"{scope}.bias"))
        return self.op("LayerNormalization", [x, f"{scope}.weight", f"{scope}.bias"], scope, axis=-1, epsilon=1e-5)

    def gelu(self, scope, x):  # nn.GELU at opset 17: x * (erf(x / sqrt(2)) + 1) * 0.5
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0), np.float32)], scope)], scope)
        e = self.op("Add", [e, self.const(1.0, np.float32)], scope)
        return self.op("Mul", [self.op("Mul", [x, e], scope), self.const(0.5, np.float32)], scope)

    def heads(self, scope, x, perm):  # [B, S, D] -> [B, H, S, D/H] (perm [0,2,3,1] for keys: [B, H, D/H, S])
        x = self.op("Reshape", [x, self.const([0, 0, HEADS, D // HEADS])], scope)
        return self.op("Transpose", [x], scope, perm=perm)

    def attention(self, scope, x, memory, mask=None):
        q = self.heads(scope, self.linear(f"{scope}.q", x, D, D), [0, 2, 1, 3])
        k = self.heads(scope, self.linear(f"{scope}.k", memory, D, D), [0, 2, 3, 1])
        v = self.heads(scope, self.linear(f"{scope}.v", memory, D, D), [0, 2, 1, 3])
        w = self.op("Div", [self.op("MatMul", [q, k], scope), self.const(np.sqrt(D // HEADS), np.float32)], scope)
        if mask is not None:
            w = self.op("Where", [mask, w, self.const(-1e9, np.float32)], scope)
        w = self.op("Softmax", [w], scope, axis=-1)
        a = self.op("Transpose", [self.op("MatMul", [w, v], scope)], scope, perm=[0, 2, 1, 3])
        a = self.op("Reshape", [a, self.const([0, 0, D])], scope)
        return self.linear(f"{scope}.out", a, D, D)

    def mlp(self, scope, x):
        return self.linear(f"{scope}.fc2", self.gelu(scope, self.linear(f"{scope}.fc1", x, D, 4 * D)), 4 * D, D)


def model(seed=0):
    b = Builder(seed)
    n = IMAGE // PATCH
    # ViT patch embedding as a matmul over flattened patches (a Conv with stride = kernel).
    s = "encoder.embeddings"
    x = b.op("Reshape", ["pixel_values", b.const([-1, 3, n, PATCH, n, PATCH])], s)
    x = b.op("Transpose", [x], s, perm=[0, 2, 4, 1, 3, 5])
    x = b.op("Reshape", [x, b.const([-1, n * n, 3 * PATCH * PATCH])], s)
    x = b.op("Add", [b.linear(f"{s}.patch", x, 3 * PATCH * PATCH, D), b.param(f"{s}.position", (n * n, D), 0.02)], s)
    s = "encoder.layer.0"
    h = b.layer_norm(f"{s}.ln_1", x)
    x = b.op("Add", [x, b.attention(f"{s}.attn", h, h)], s)
    x = b.op("Add", [x, b.mlp(f"{s}.mlp", b.layer_norm(f"{s}.ln_2", x))], s)
    memory = b.layer_norm("encoder.ln_f", x)

    s = "decoder.embeddings"
    length = b.op("Gather", [b.op("Shape", ["decoder_input_ids"], s), b.const(1)], s, axis=0)
    seq = b.op("Unsqueeze", [length, b.const([0])], s)
    tokens = b.op("Gather", [b.param("decoder.wte", (VOCAB, D), 0.02), "decoder_input_ids"], s, axis=0)
    # GPT-2's position_ids = arange(seq): the position embeddings are a lookup, as the tokens'.
    position_ids = b.op("Range", [b.const(0), length, b.const(1)], s)
    positions = b.op("Gather", [b.param("decoder.wpe", (MAX_SEQ_LEN, D), 0.02), position_ids], s, axis=0)
    y = b.op("Add", [tokens, positions], s)
    causal = b.const(np.tril(np.ones((MAX_SEQ_LEN, MAX_SEQ_LEN), dtype=bool)), bool)
    mask = b.op("Slice", [causal, b.const([0, 0]), b.op("Concat", [seq, seq], s, axis=0), b.const([0, 1])], s)
    s = "decoder.h.0"
    h = b.layer_norm(f"{s}.ln_1", y)
    y = b.op("Add", [y, b.attention(f"{s}.attn", h, h, mask)], s)
    y = b.op("Add", [y, b.attention(f"{s}.crossattention", b.layer_norm(f"{s}.ln_cross", y), memory)], s)
    y = b.op("Add", [y, b.mlp(f"{s}.mlp", b.layer_norm(f"{s}.ln_2", y))], s)
    logits = b.op("MatMul", [b.layer_norm("decoder.ln_f", y), b.param("decoder.lm_head", (D, VOCAB))], "decoder")

    # Token cross-entropy over labels != -100, as the model computes it when given labels.
    s = "loss"
    logp = b.op("LogSoftmax", [logits], s, axis=-1)
    # Compared in f32 (exact for token ids), so the vocabulary range is a buffer a kernel reads.
    labels_f = b.op("Cast", [b.op("Unsqueeze", ["labels", b.const([-1])], s)], s, to=TensorProto.FLOAT)
    onehot = b.op("Cast", [b.op("Equal", [labels_f, b.const(np.arange(VOCAB), np.float32)], s)], s,
                  to=TensorProto.FLOAT)
    picked = b.op("ReduceSum", [b.op("Mul", [logp, onehot], s), b.const([-1])], s, keepdims=0)
    valid = b.op("Cast", [b.op("Not", [b.op("Equal", ["labels", b.const(-100)], s)], s)], s, to=TensorProto.FLOAT)
    total = b.op("ReduceSum", [picked], s, keepdims=0)
    count = b.op("ReduceSum", [valid], s, keepdims=0)
    b.nodes.append(helper.make_node("Div", [b.op("Neg", [total], s), count], ["loss"], name="loss/Div"))

    graph = helper.make_graph(
        b.nodes, "captioning",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, IMAGE, IMAGE]),
         helper.make_tensor_value_info("decoder_input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], b.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_example.py")
    m.ir_version = 8
    return m


def lengths(rng, steps):
    """The guide's caption lengths: 90% 5-31 tokens, 9% 33-63, 1% 65-255, plus an end token."""
    bins = [((5, 32), 0.90), ((33, 64), 0.09), ((65, 256), 0.01)]
    for _ in range(steps):
        out = []
        for _ in range(BATCH):
            (lo, hi), = rng.choices([b for b, _ in bins], weights=[w for _, w in bins], k=1)
            out.append(rng.randint(lo, hi - 1) + 1)
        yield out


def traces(steps=100):
    rng = random.Random(42)
    fixed, longest = [], []
    scalar = {"shape": [], "dtype": "float32"}
    image = {"shape": [BATCH, 3, IMAGE, IMAGE], "dtype": "float32"}
    for batch in lengths(rng, steps):
        for out, seq in ((fixed, MAX_SEQ_LEN), (longest, max(batch))):
            ids = {"shape": [BATCH, seq], "dtype": "int64"}
            out.append({"pixel_values": image, "decoder_input_ids": ids, "labels": ids, "lr": scalar, "step": scalar})
    return fixed, longest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    save(model(), str(args.out / "model.onnx"))
    fixed, longest = traces()
    for name, calls in (("fixed.jsonl", fixed), ("longest.jsonl", longest)):
        (args.out / name).write_text("".join(json.dumps(c) + "\n" for c in calls))


if __name__ == "__main__":
    main()
