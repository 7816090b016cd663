#!/usr/bin/env python3
"""Writes tests/unit/ops/recurrent_golden.inc: RNN / GRU / LSTM cases for
ops_recurrent_test.cc with expected outputs computed here with numpy, straight
from the ONNX spec's equations, for what the ONNX node tests leave out:
sequence_lens (a length of 0 gives zero states), layout 1 with two
directions, clip (of every activation's input, LSTM's h(C) included),
activations with alpha and beta, GRU's linear_before_reset, LSTM's peepholes
and input_forget.

The whole batch steps at once. A reverse direction runs forward over each
sequence reversed within its own length, and a batch entry's state stops
changing once its length is reached.

Run: python3 tests/unit/ops/recurrent_golden.py > tests/unit/ops/recurrent_golden.inc
"""
import numpy as np

ACTIVATIONS = {  # name: (function of x, alpha, beta; default alpha; default beta)
    "Relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "Tanh": (lambda x, a, b: np.tanh(x), None, None),
    "Sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), None, None),
    "Affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "LeakyRelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "ThresholdedRelu": (lambda x, a, b: np.where(x >= a, x, 0), 1.0, None),
    "ScaledTanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "HardSigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "Elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None),
    "Softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "Softplus": (lambda x, a, b: np.log(1 + np.exp(x)), None, None),
}


def functions(names, alphas, betas):
    """alpha / beta lists are consumed in order by the functions that take them."""
    alphas, betas, out = list(alphas), list(betas), []
    for name in names:
        f, a, b = ACTIVATIONS[name]
        if a is not None and alphas:
            a = alphas.pop(0)
        if b is not None and betas:
            b = betas.pop(0)
        out.append(lambda x, f=f, a=a, b=b: f(x, a, b))
    return out


def cell_step(op, x, h, c, W, R, Wb, Rb, P, acts, clip, lbr, input_forget):
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    H = h.shape[1]
    xw = x @ W.T + Wb
    if op == "RNN":
        return acts[0](cl(xw + h @ R.T + Rb)), c
    if op == "GRU":
        Wz, Wr, Wh = np.split(xw, 3, axis=1)
        Rz, Rr, Rh = np.split(R, 3)
        Rbz, Rbr, Rbh = np.split(Rb, 3)
        z = acts[0](cl(Wz + h @ Rz.T + Rbz))
        r = acts[0](cl(Wr + h @ Rr.T + Rbr))
        if lbr:
            cand = acts[1](cl(Wh + r * (h @ Rh.T + Rbh)))
        else:
            cand = acts[1](cl(Wh + (r * h) @ Rh.T + Rbh))
        return (1 - z) * cand + z * h, c
    gi, go, gf, gc = np.split(xw + h @ R.T + Rb, 4, axis=1)
    Pi, Po, Pf = P[:H], P[H:2 * H], P[2 * H:]
    i = acts[0](cl(gi + Pi * c))
    f = 1 - i if input_forget else acts[0](cl(gf + Pf * c))
    c_new = f * c + i * acts[1](cl(gc))
    o = acts[0](cl(go + Po * c_new))
    return o * acts[2](cl(c_new)), c_new


def run(op, X, W, R, B, lens, h0, c0, P, direction="forward", layout=0, activations=None,
        alphas=(), betas=(), clip=None, lbr=0, input_forget=0):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    if layout == 1:
        X = X.transpose(1, 0, 2)
        h0 = h0.transpose(1, 0, 2)
        c0 = c0.transpose(1, 0, 2) if c0 is not None else None
    T, N, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    per_dir = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    acts = functions(activations, alphas, betas)
    Y = np.zeros((T, D, N, H))
    Yh = np.zeros((D, N, H))
    Yc = np.zeros((D, N, H))
    rows = np.arange(N)
    for d in range(D):
        backward = direction == "reverse" or (direction == "bidirectional" and d == 1)
        # pos[k, n]: the time step that step k of batch entry n reads.
        pos = np.array([[(lens[n] - 1 - k if backward else k) for n in range(N)] for k in range(T)])
        h = h0[d].astype(np.float64)
        c = c0[d].astype(np.float64) if c0 is not None else np.zeros_like(h)
        for k in range(T):
            live = (k < lens)[:, None]
            t = np.clip(pos[k], 0, T - 1)
            h_new, c_new = cell_step(op, X[t, rows], h, c, W[d], R[d], B[d, :gates * H], B[d, gates * H:],
                                     P[d] if P is not None else np.zeros(3 * H), acts[d * per_dir:(d + 1) * per_dir],
                                     clip, lbr, input_forget)
            h = np.where(live, h_new, h)
            c = np.where(live, c_new, c)
            for n in range(N):
                if k < lens[n]:
                    Y[pos[k, n], d, n] = h[n]
        empty = (lens == 0)[:, None]
        Yh[d], Yc[d] = np.where(empty, 0, h), np.where(empty, 0, c)
    if layout == 1:
        return Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


def values(a):
    return "{" + ", ".join(f"{v:.9g}" for v in np.asarray(a, dtype=np.float64).ravel()) + "}"


def case(name, op, T, N, I, H, rng, direction="forward", layout=0, peepholes=False, **attrs):
    D = 2 if direction == "bidirectional" else 1
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    lens = attrs.pop("lens")
    X = rng.uniform(-1, 1, (N, T, I) if layout else (T, N, I)).astype(np.float32)
    W = rng.uniform(-1, 1, (D, gates * H, I)).astype(np.float32)
    R = rng.uniform(-1, 1, (D, gates * H, H)).astype(np.float32)
    B = rng.uniform(-1, 1, (D, 2 * gates * H)).astype(np.float32)
    state = (N, D, H) if layout else (D, N, H)
    h0 = rng.uniform(-1, 1, state).astype(np.float32)
    c0 = rng.uniform(-1, 1, state).astype(np.float32) if op == "LSTM" else None
    P = rng.uniform(-1, 1, (D, 3 * H)).astype(np.float32) if peepholes else None
    Y, Yh, Yc = run(op, X.astype(np.float64), W.astype(np.float64), R.astype(np.float64), B.astype(np.float64),
                    np.array(lens), h0.astype(np.float64), None if c0 is None else c0.astype(np.float64),
                    None if P is None else P.astype(np.float64), direction, layout, **attrs)
    print(f"// {name}: {op}, direction {direction}, layout {layout}, sequence_lens {lens}, {attrs}")
    print(f"const RecurrentCase {name} = {{")
    print(f'    "{op}", "{direction}", {layout}, {T}, {N}, {I}, {H}, {{{", ".join(map(str, lens))}}},')
    print(f'    {{{", ".join(chr(34) + a + chr(34) for a in attrs.get("activations", []))}}},')
    print(f"    {values(attrs.get('alphas', []))}, {values(attrs.get('betas', []))}, "
          f"{attrs.get('clip') or 0}, {attrs.get('lbr', 0)}, {attrs.get('input_forget', 0)},")
    for a in (X, W, R, B, h0):
        print(f"    {values(a)},")
    print(f"    {values(c0 if c0 is not None else [])},")
    print(f"    {values(P if P is not None else [])},")
    print(f"    {values(Y)},")
    print(f"    {values(Yh)},")
    print(f"    {values(Yc if op == 'LSTM' else [])},")
    print("};\n")


def main():
    rng = np.random.default_rng(7)
    print("// Generated by tests/unit/ops/recurrent_golden.py; do not edit.")
    print("// clang-format off\n")
    case("kGruBidirectionalBatchFirst", "GRU", 3, 2, 2, 2, rng, direction="bidirectional", layout=1,
         lens=[3, 1], activations=["Sigmoid", "Tanh", "HardSigmoid", "Softsign"], alphas=[0.3], betas=[0.4],
         lbr=1)
    case("kGruClipped", "GRU", 2, 2, 3, 2, rng, lens=[2, 2], activations=["Sigmoid", "Tanh"], clip=0.25)
    case("kLstmReversePeepholes", "LSTM", 3, 3, 2, 2, rng, direction="reverse", peepholes=True, lens=[2, 0, 3],
         activations=["HardSigmoid", "LeakyRelu", "Softsign"], alphas=[0.25, 0.1], betas=[0.45], clip=0.3,
         input_forget=1)
    case("kRnnBidirectional", "RNN", 3, 2, 2, 3, rng, direction="bidirectional", lens=[2, 3],
         activations=["Elu", "ScaledTanh"], alphas=[0.5, 0.8], betas=[1.5])
    case("kRnnAffineThresholded", "RNN", 2, 1, 2, 2, rng, direction="bidirectional", lens=[2],
         activations=["Affine", "ThresholdedRelu"], alphas=[0.7, 0.1], betas=[0.2])
    case("kLstmSoftplusRelu", "LSTM", 2, 2, 2, 2, rng, layout=1, lens=[1, 2],
         activations=["Sigmoid", "Softplus", "Relu"])


if __name__ == "__main__":
    main()
