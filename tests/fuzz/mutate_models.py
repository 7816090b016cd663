#!/usr/bin/env python3
"""Structural mutation testing of the whole tool: the libFuzzer targets beside
this file cover the two readers of untrusted bytes; this drives what comes
after them (shape rules, passes, fusion, lowering, NVRTC, the interpreter)
with models that parse but are wrong in the ways real ones are: an attribute
out of range, an op swapped for another, an input rewired or dropped, a dtype
or dim changed, a node deleted or duplicated.

Each case is a bundled model (ONNX through the onnx package, text IR token by
token, a torch.export .pt2 archive through its program's JSON and weights
config) mutated one to three times, then given to `tcc explain`, `tcc compile`,
with --reference `tcc run --reference`, and with --train `tcc explain --train`
(autodiff, the saved-activation partition and Adam on an MSE loss of the first
output). Every run must end in exit 0, 1 or 2 (a result, a gate, a clear error): exit 3 (an internal error), a signal
or a timeout is a finding, and the case is kept in --out.

  tests/fuzz/mutate_models.py --tcc build/tcc --cases 150 --seed 1 --train MODELS...   (what ctest runs)
  tests/fuzz/mutate_models.py --tcc build/tcc --seconds 900 --reference --train MODELS...

Exits 1 when any run was a finding, 77 (ctest's skip) without the onnx package.
"""
import argparse
import copy
import io
import json
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time
import zipfile

OPS = ["Add", "Mul", "Div", "Sub", "Pow", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Neg", "Gelu",
       "Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Tile", "Slice", "Split",
       "Concat", "Gather", "GatherElements", "ScatterElements", "Where", "Cast", "Min", "Max", "Softmax",
       "ReduceMean", "ReduceSum", "ReduceMax", "LayerNormalization", "MatMul", "Gemm", "Conv", "MaxPool",
       "AveragePool", "Pad", "Range", "Shape", "ConstantOfShape"]
INTS = [-5, -3, -1, 0, 1, 2, 3, 7, 9, 64, 1 << 31, 1 << 40, -(1 << 40)]
DTYPES = {"f32": 1, "i32": 6, "i64": 7, "bool": 9, "f16": 10, "f64": 11, "bf16": 16}
ATEN = ["aten.relu.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.view.default", "aten.permute.default",
        "aten.sum.dim_IntList", "aten.mm.default", "aten.softmax.int", "aten.cat.default", "aten.linear.default",
        "aten.slice.Tensor", "aten.expand.default", "aten.embedding.default", "aten.no_such_op.default"]

NUMBER = re.compile(r"(?<![A-Za-z_%.\"])-?\d+(?:\.\d+)?")
OP_CALL = re.compile(r"= ([A-Z][A-Za-z]+)\(")
DTYPE = re.compile(r"\b(" + "|".join(DTYPES) + r")\b")


def mutate_onnx(model, rng):
    import onnx
    g = model.graph
    nodes = list(g.node)
    values = [v.name for v in g.input] + [t.name for t in g.initializer] + [o for n in nodes for o in n.output]
    kind = rng.randrange(9)
    if kind == 0 and nodes:
        for a in rng.choice(nodes).attribute:
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(INTS)
            elif a.type == onnx.AttributeProto.INTS and a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice(INTS)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30])
    elif kind == 1 and nodes:
        rng.choice(nodes).op_type = rng.choice(OPS)
    elif kind == 2 and nodes:
        n = rng.choice(nodes)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(values + [""])
    elif kind == 3 and nodes:
        n = rng.choice(nodes)
        if n.input and rng.random() < 0.5:
            del n.input[-1]
        else:
            n.input.append(rng.choice(values))
    elif kind == 4 and g.input:
        t = rng.choice(list(g.input)).type.tensor_type
        if t.shape.dim and rng.random() < 0.7:
            d = t.shape.dim[rng.randrange(len(t.shape.dim))]
            if rng.random() < 0.5:
                d.dim_value = rng.choice([0, 1, 3, 5, 1 << 31])
            else:
                d.dim_param = rng.choice(["batch", "seq", "n", "batch*2"])
        else:
            t.elem_type = rng.choice(list(DTYPES.values()))
    elif kind == 5 and g.initializer:
        t = rng.choice(list(g.initializer))
        if t.dims and rng.random() < 0.7:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 2, 7])
        else:
            t.data_type = rng.choice(list(DTYPES.values()))
    elif kind == 6 and nodes:
        del g.node[rng.randrange(len(nodes))]
    elif kind == 7 and nodes:
        n = rng.choice(nodes)
        if n.output:
            n.output[0] = rng.choice(values)
    elif kind == 8:
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = rng.choice([7, 11, 13, 17, 18, 21, 23])
    return model


def mutate_text(text, rng):
    kind = rng.randrange(6)
    if kind <= 2:
        numbers = list(NUMBER.finditer(text))
        if numbers:
            m = rng.choice(numbers)
            text = text[:m.start()] + str(rng.choice(INTS + [0.5, -2.5])) + text[m.end():]
    elif kind == 3:
        calls = list(OP_CALL.finditer(text))
        if calls:
            m = rng.choice(calls)
            text = text[:m.start(1)] + rng.choice(OPS) + text[m.end(1):]
    elif kind == 4:
        types = list(DTYPE.finditer(text))
        if types:
            m = rng.choice(types)
            text = text[:m.start()] + rng.choice(list(DTYPES)) + text[m.end():]
    else:
        lines = text.split("\n")
        body = [i for i, line in enumerate(lines) if " = " in line and not line.lstrip().startswith("//")]
        if body:
            i = rng.choice(body)
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(rng.choice(body), lines[i])
        text = "\n".join(lines)
    return text


def pt2_entry(entries, tail):
    """The archive entry <root>/<tail>, or None."""
    return next((name for name in entries if name.endswith("/" + tail)), None)


def mutate_pt2(entries, rng):
    """A .pt2 archive (entry name -> bytes) with its program or its weights config changed once."""
    entries = dict(entries)
    program_entry = pt2_entry(entries, "models/model.json")
    config_entry = pt2_entry(entries, "data/weights/model_weights_config.json")
    program = json.loads(entries[program_entry])
    graph = program["graph_module"]["graph"]
    nodes, tensors = graph["nodes"], graph["tensor_values"]
    kind = rng.randrange(8)
    if kind == 0 and nodes:
        rng.choice(nodes)["target"] = "torch.ops." + rng.choice(ATEN)
    elif kind == 1 and nodes:
        args = [a["arg"] for a in rng.choice(nodes)["inputs"] if "as_int" in a["arg"] or "as_ints" in a["arg"]]
        if args:
            a = rng.choice(args)
            if "as_int" in a:
                a["as_int"] = rng.choice(INTS)
            elif a["as_ints"]:
                a["as_ints"][rng.randrange(len(a["as_ints"]))] = rng.choice(INTS)
    elif kind == 2 and nodes:
        args = [a["arg"]["as_tensor"] for a in rng.choice(nodes)["inputs"] if "as_tensor" in a["arg"]]
        if args:
            rng.choice(args)["name"] = rng.choice(list(tensors) + ["nowhere"])
    elif kind == 3 and nodes:
        del nodes[rng.randrange(len(nodes))]
    elif kind == 4 and tensors:
        t = tensors[rng.choice(list(tensors))]
        if t["sizes"] and rng.random() < 0.7:
            t["sizes"][rng.randrange(len(t["sizes"]))] = {"as_int": rng.choice([0, 1, 2, 7, 1 << 31])}
        else:
            t["dtype"] = rng.randrange(-1, 20)
    elif kind == 5 and program.get("range_constraints"):
        r = program["range_constraints"][rng.choice(list(program["range_constraints"]))]
        r[rng.choice(["min_val", "max_val"])] = rng.choice([0, 1, 3, 5, 1 << 40, -3, None])
    elif kind == 6 and nodes:
        nodes.insert(rng.randrange(len(nodes) + 1), copy.deepcopy(rng.choice(nodes)))
    elif config_entry:
        config = json.loads(entries[config_entry])
        if config.get("config"):
            e = config["config"][rng.choice(list(config["config"]))]
            meta = e.get("tensor_meta", {})
            if rng.random() < 0.5 and meta.get("sizes"):
                meta["sizes"][rng.randrange(len(meta["sizes"]))] = {"as_int": rng.choice([0, 1, 3, 1 << 40])}
            else:
                e["path_name"] = rng.choice(["weight_0", "weight_9", "../models/model.json", ""])
        entries[config_entry] = json.dumps(config).encode()
    entries[program_entry] = json.dumps(program).encode()
    return entries


def pt2_bytes(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


def first_output(case, suffix):
    """The name of the case's first graph output, or None."""
    if suffix == ".onnx":
        return case.graph.output[0].name if case.graph.output else None
    if suffix == ".pt2":
        try:
            spec = json.loads(case[pt2_entry(case, "models/model.json")])["graph_module"]["signature"]["output_specs"][0]
            return next(iter(spec.values()))["arg"]["as_tensor"]["name"]
        except (KeyError, IndexError, TypeError, StopIteration, ValueError):
            return None
    m = re.search(r"^\s*output %(\S+)", case, re.MULTILINE)
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help=".onnx, .tir and .pt2 models to mutate")
    ap.add_argument("--tcc", required=True, help="the tcc binary")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=0, help="stop after this many cases (0: run --seconds)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--reference", action="store_true", help="also `tcc run --reference` (slow on huge mutated shapes)")
    ap.add_argument("--train", action="store_true", help="also `tcc explain --train` on an MSE loss of the first output")
    ap.add_argument("--timeout", type=float, default=120, help="seconds for one tcc run")
    ap.add_argument("--out", default="mutation-findings", help="where cases that found something are kept")
    args = ap.parse_args()
    try:
        import onnx
    except ImportError:
        print("mutate_models: the onnx package is not installed, skipping")
        return 77

    rng = random.Random(args.seed)
    seeds = []
    for path in sorted(args.models):
        p = pathlib.Path(path)
        if p.suffix == ".onnx":
            seeds.append((p.suffix, onnx.load(str(p))))
        elif p.suffix == ".pt2":
            with zipfile.ZipFile(p) as z:
                seeds.append((p.suffix, {name: z.read(name) for name in z.namelist()}))
        else:
            seeds.append((p.suffix, p.read_text()))
    out = pathlib.Path(args.out)
    work = pathlib.Path(tempfile.mkdtemp(prefix="tcc-mutate-"))
    deadline = time.time() + args.seconds
    cases = runs = findings = 0
    while (args.cases and cases < args.cases) or (not args.cases and time.time() < deadline):
        suffix, seed = rng.choice(seeds)
        case = copy.deepcopy(seed) if suffix == ".onnx" else seed
        mutate = {".onnx": mutate_onnx, ".pt2": mutate_pt2}.get(suffix, mutate_text)
        for _ in range(rng.randint(1, 3)):
            case = mutate(case, rng)
        path = work / f"case{suffix}"
        if suffix == ".onnx":
            path.write_bytes(case.SerializeToString())
        elif suffix == ".pt2":
            path.write_bytes(pt2_bytes(case))
        else:
            path.write_text(case)
        cases += 1
        commands = [["explain", str(path)],
                    ["compile", str(path), "-o", str(work / "module"), "--no-host", "--no-ptx", "--arch", "sm_90",
                     "--jobs", "1"]]
        if args.reference:
            commands.append(["run", str(path), "--reference", "-o", str(work / "outputs")])
        output = first_output(case, suffix)
        if args.train and output:
            commands.append(["explain", str(path), "--train", "--loss-fn", "mse", "--loss-on", output, "--label",
                             "tcc_mutation_label", "--optimizer", "adam"])
        for command in commands:
            runs += 1
            try:
                r = subprocess.run([args.tcc] + command, capture_output=True, text=True, timeout=args.timeout)
                code, err = r.returncode, r.stderr.strip()
            except subprocess.TimeoutExpired:
                code, err = "timeout", ""
            if code in (0, 1, 2):
                continue
            findings += 1
            out.mkdir(parents=True, exist_ok=True)
            kept = out / f"{findings}_{command[0]}{suffix}"
            kept.write_bytes(path.read_bytes())
            print(f"finding: tcc {command[0]} exited {code} on {kept}\n  {err[-400:]}", flush=True)
            break
    print(f"mutate_models: {cases} cases, {runs} runs, {findings} findings (seed {args.seed})")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
