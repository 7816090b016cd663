#!/usr/bin/env python3
"""Peer benchmark of training steps: PyTorch eager and torch.compile against tcc.

Runs on the GPU machine (torch, onnx and onnxruntime installed there). For each
model it builds the training step in PyTorch (forward, MSE loss, backward, Adam
update), measures it eagerly and under torch.compile's default, reduce-overhead
and max-autotune modes, exports the forward to ONNX, and compiles the same
training step with `tcc compile --train` in tcc's modes. Columns, per model and
mode:

  steps_per_s            training steps per second after warm-up, steps enqueued back to
                         back with one synchronization at the end (tcc bench's throughput
                         batches count them the same way since 2026-11-25; earlier tcc rows
                         were one over the median latency of steps waited for one by one)
  speedup_vs_eager       steps_per_s over PyTorch eager's
  first_step_s           cold compile + first step (empty compile caches)
  warm_compile_s         first step again with the caches the cold run filled
  peak_mem_bytes         torch.cuda.max_memory_allocated over the measured steps
  max_diff_loss          |loss - eager loss| after one step from the same weights
  max_diff_grad          max |grad - eager grad| over the parameters (torch modes)

tcc's rows: `tcc compile --train --emit-onnx` builds the training step from the
exported forward (its wall time is train_build_s, autodiff and a default compile
for every arch, PTX and host.so included); cold_compile_s is the same compile
for this GPU alone (`--arch native --no-ptx --no-host`, no --emit-onnx), the
figure to set beside torch.compile's first_step_s; `tcc run` runs that step once on the GPU from the same weights and
inputs as PyTorch, and max_diff_loss / max_diff_param compare its loss and
updated parameters with PyTorch eager's first step (parameters matched by name;
an exporter's renamed weights are left out); `tcc bench` times the step in each
mode, compile_s being that mode's compile of the training graph (tuning
included in max-autotune). peak_mem_bytes is PyTorch's only: tcc's memory is
its planned arena, shown by `tcc compile`. Every subprocess runs under a
timeout, and the JSON is rewritten after every row, so a run cut short keeps
what it measured. Results go to bench/results/<date>-<device>-peer.json.

Models (--models):
  mlp     Linear(1024, 4096) ReLU Linear(4096, 4096) ReLU Linear(4096, 1024), batch 256, Adam
  block   a GPT-2 block (d 768, 12 heads, causal attention, GELU MLP), batch 8 x seq 512, Adam

Usage: bench/peer_train.py [--tcc build/tcc] [--steps 50] [--models mlp,block] [--torch-modes ...] [--tcc-modes ...]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TORCH_MODES = ["eager", "default", "reduce-overhead", "max-autotune"]
TCC_MODES = ["eager", "default", "reduce-overhead", "max-autotune"]  # the columns; see tcc_modes()
LR = 1e-3
DEFAULT_MODELS = "mlp,block"
TRAIN_FLAGS = ["--train", "--loss-fn", "mse", "--loss-on", "output", "--label", "target", "--optimizer", "adam"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "tcc"), help="the tcc binary (default: build/tcc)")
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated: mlp, block")
    ap.add_argument("--steps", type=int, default=50, help="measured steps per mode")
    ap.add_argument("--warmup", type=int, default=5, help="steps before measuring")
    ap.add_argument("--out-dir", default=str(ROOT / "bench" / "results"), help="where the JSON goes")
    ap.add_argument("--device-name", default=None, help="name for the file (default: torch's device name)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds for each tcc subprocess")
    ap.add_argument("--torch-modes", default=",".join(TORCH_MODES),
                    help="comma-separated PyTorch modes (eager always runs first: the others compare with it)")
    ap.add_argument("--tcc-modes", default=",".join(TCC_MODES), help="comma-separated tcc modes")
    return ap.parse_args(argv)


# ----------------------------------------------------------------------------- models (torch imported lazily)

def build_models(torch):
    nn = torch.nn
    F = torch.nn.functional

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(1024, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 1024)

        def forward(self, x):
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    class Block(nn.Module):
        def __init__(self, d=768, heads=12, ctx=1024):
            super().__init__()
            self.heads = heads
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)).view(1, 1, ctx, ctx),
                                 persistent=False)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            w = torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5
            w = torch.where(self.bias[:, :, :s, :s], w, torch.finfo(w.dtype).min)
            a = torch.matmul(F.softmax(w, dim=-1), v).transpose(1, 2).reshape(b, s, d)
            x = x + self.c_proj(a)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    return {
        "mlp": {"module": Mlp, "input": (256, 1024), "dynamic": {"input": {0: "batch"}, "output": {0: "batch"}},
                "hints": "batch=256"},
        "block": {"module": Block, "input": (8, 512, 768),
                  "dynamic": {"input": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}},
                  "hints": "batch=8,seq=512"},
    }


def export(torch, spec, path):
    """The forward as ONNX (opset 17) with the same weights as the PyTorch rows' model."""
    torch.manual_seed(0)
    model, x = spec["module"]().eval(), (torch.randn(*spec["input"]),)
    try:  # the TorchScript exporter, while this torch still has it
        torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"],
                          dynamic_axes=spec["dynamic"], opset_version=17, dynamo=False)
    except Exception as e:  # newer torch: the dynamo exporter
        print(f"note: TorchScript export failed ({type(e).__name__}: {e}); using dynamo=True", file=sys.stderr)
        torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"],
                          dynamic_axes=spec["dynamic"], opset_version=17, dynamo=True)


def make_step(torch, model, opt):
    def step(x, target):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss

    return step


def torch_row(torch, spec, mode, args, reference):
    """One torch mode: a fresh model from the same seed, cold and warm first steps, timed steps."""
    cache = tempfile.mkdtemp(prefix="inductor-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    row = {"framework": "pytorch", "mode": mode}
    try:
        def fresh():
            torch.manual_seed(0)
            model = spec["module"]().cuda()
            step = make_step(torch, model, torch.optim.Adam(model.parameters(), lr=LR))
            if mode != "eager":
                torch._dynamo.reset()
                step = torch.compile(step, mode=mode)
            return model, step

        gen = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(*spec["input"], device="cuda", generator=gen)
        target = torch.randn(*spec["input"], device="cuda", generator=gen)

        model, step = fresh()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step(x, target)
        torch.cuda.synchronize()
        row["first_step_s"] = time.perf_counter() - t0
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        if reference is None:  # eager's first step: tcc's rows compare with it too
            params = {n: p.detach().clone() for n, p in model.named_parameters()}
            reference = {"loss": float(loss), "grads": grads, "params": params, "x": x, "target": target}
        else:
            row["max_diff_loss"] = abs(float(loss) - reference["loss"])
            row["max_diff_grad"] = max(float((grads[n] - g).abs().max()) for n, g in reference["grads"].items())

        if mode != "eager":  # dynamo reset, the inductor caches the cold run filled kept
            model, step = fresh()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(x, target)
            torch.cuda.synchronize()
            row["warm_compile_s"] = time.perf_counter() - t0

        for _ in range(args.warmup):
            step(x, target)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step(x, target)
        torch.cuda.synchronize()
        row["steps_per_s"] = args.steps / (time.perf_counter() - t0)
        row["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
    except Exception as e:  # a mode that fails is a row that says so, not a lost run
        row["error"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return row, reference


# ----------------------------------------------------------------------------- tcc

def tcc_modes(tcc):
    """The modes this tcc build has: the unindented lines of `tcc compile --list-modes`."""
    r = subprocess.run([tcc, "compile", "--list-modes"], capture_output=True, text=True)
    return {line.strip() for line in r.stdout.splitlines() if line and not line[0].isspace()}


def run_tcc(args, cmd):
    """(ok, output, seconds) of one tcc command under --timeout."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(cmd[:2])} timed out after {args.timeout} s", time.perf_counter() - t0
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0:
        return False, f"{' '.join(cmd[:2])} exited {r.returncode}: {out[-400:]}", time.perf_counter() - t0
    return True, out, time.perf_counter() - t0


def tcc_check(args, train, work, x, target, reference):
    """One training step through `tcc run` on the GPU, against PyTorch eager's first step."""
    import numpy as np
    inputs, outputs = os.path.join(work, "inputs"), os.path.join(work, "outputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "input.npy"), x.cpu().numpy())
    np.save(os.path.join(inputs, "target.npy"), target.cpu().numpy())
    np.save(os.path.join(inputs, "lr.npy"), np.array(LR, dtype=np.float32))
    np.save(os.path.join(inputs, "step.npy"), np.array(1, dtype=np.float32))
    ok, out, _ = run_tcc(args, [args.tcc, "run", train, "--inputs", inputs, "-o", outputs, "--format", "npy"])
    if not ok:
        return {"check_error": out}
    check = {"max_diff_loss": abs(float(np.load(os.path.join(outputs, "loss.npy"))) - reference["loss"])}
    diffs = [float(np.abs(np.load(path) - p.cpu().numpy()).max())
             for n, p in reference["params"].items()
             if os.path.exists(path := os.path.join(outputs, f"{n}.updated.npy"))]
    check["params_compared"] = len(diffs)
    if diffs:
        check["max_diff_param"] = max(diffs)
    return check


def tcc_rows(args, name, spec, onnx_path, x, target, reference, work):
    known, wanted = tcc_modes(args.tcc), args.tcc_modes.split(",")
    modes = [m for m in TCC_MODES if m in known and m in wanted]
    rows = [{"framework": "tcc", "mode": m, "steps_per_s": None, "why": f"tcc has no '{m}' mode"}
            for m in TCC_MODES if m in wanted and m not in known]
    train = os.path.join(work, f"{name}-train.onnx")
    module = os.path.join(work, f"{name}-module")
    ok, out, build_s = run_tcc(args, [args.tcc, "compile", onnx_path, "-o", module, "--shape-hint", spec["hints"],
                                      *TRAIN_FLAGS, "--emit-onnx", train])
    if not ok:
        return rows + [{"framework": "tcc", "mode": m, "error": out} for m in modes]
    common = {"train_build_s": build_s, "compile_summary": out}
    ok, out, cold_s = run_tcc(args, [args.tcc, "compile", onnx_path, "-o", module + "-native", "--shape-hint",
                                     spec["hints"], *TRAIN_FLAGS, "--arch", "native", "--no-ptx", "--no-host"])
    common.update({"cold_compile_s": cold_s} if ok else {"cold_compile_error": out})
    common.update(tcc_check(args, train, work, x, target, reference))
    for m in modes:  # one bench per mode: a mode that runs out of time costs only its own row
        report = os.path.join(work, f"{name}-{m}-report")
        ok, out, _ = run_tcc(args, [args.tcc, "bench", train, "--modes", m, "--shapes", spec["hints"],
                                    "--warmup", str(args.warmup), "--iterations", str(args.steps), "--report", report])
        if not ok:
            rows.append({"framework": "tcc", "mode": m, "error": out, **common})
            continue
        with open(os.path.join(report, "report.json")) as f:
            r = json.load(f)["modes"][0]
        rows.append({"framework": "tcc", "mode": m, "steps_per_s": r["steps_per_s"], "compile_s": r["compile_s"],
                     "note": r["note"], **common})
    return rows


# ----------------------------------------------------------------------------- main

def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        sys.exit("peer_train.py needs torch (run it on the GPU machine)")
    if not torch.cuda.is_available():
        sys.exit("peer_train.py needs a CUDA device")
    device_name = args.device_name or torch.cuda.get_device_name(0).replace(" ", "-")
    specs = build_models(torch)

    results = {"date": datetime.date.today().isoformat(), "device": device_name, "torch": torch.__version__,
               "torch_modes": args.torch_modes, "tcc_modes": args.tcc_modes,
               "python": platform.python_version(), "steps": args.steps, "warmup": args.warmup, "models": {}}
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    subset = "" if args.models == DEFAULT_MODELS else "-" + args.models.replace(",", "-")
    path = out_dir / f"{results['date']}-{device_name}-peer{subset}.json"

    def save():  # after every row, so a run cut short keeps what it measured
        path.write_text(json.dumps(results, indent=2, default=str) + "\n")

    work = tempfile.mkdtemp(prefix="peer-train-")
    for name in args.models.split(","):
        if name not in specs:
            sys.exit(f"--models: unknown model '{name}' (known: {', '.join(specs)})")
        spec = specs[name]
        rows, reference = [], None
        results["models"][name] = rows
        torch_modes = ["eager"] + [m for m in args.torch_modes.split(",") if m in TORCH_MODES and m != "eager"]
        for mode in torch_modes:
            row, reference = torch_row(torch, spec, mode, args, reference)
            rows.append(row)
            save()
            print(f"{name} pytorch {mode}: {row}", file=sys.stderr, flush=True)

        onnx_path = os.path.join(work, f"{name}.onnx")
        export(torch, spec, onnx_path)
        if reference is None or "x" not in reference:
            rows.append({"framework": "tcc", "error": "PyTorch eager failed: nothing to compare tcc with"})
        else:
            for row in tcc_rows(args, name, spec, onnx_path, reference["x"], reference["target"], reference, work):
                rows.append(row)
                shown = {k: v for k, v in row.items() if k != "compile_summary"}
                print(f"{name} tcc {row['mode']}: {shown}", file=sys.stderr, flush=True)
        eager = rows[0].get("steps_per_s")
        for row in rows:
            if eager and row.get("steps_per_s"):
                row["speedup_vs_eager"] = row["steps_per_s"] / eager
        summaries = {row.pop("compile_summary", None) for row in rows} - {None}
        results.setdefault("tcc_compile_summary", {})[name] = "".join(summaries)
        save()
    shutil.rmtree(work, ignore_errors=True)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
