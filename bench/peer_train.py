#!/usr/bin/env python3
"""Peer benchmark of training steps: PyTorch eager and torch.compile against tcc.

Runs on the GPU machine (torch, onnx and onnxruntime installed there). For each
model it builds the training step in PyTorch (forward, MSE loss, backward, Adam
update), measures it eagerly and under torch.compile's default, reduce-overhead
and max-autotune modes, exports the forward to ONNX, and compiles the same
training step with `tcc compile --train` in tcc's modes. Columns, per model and
mode:

  steps_per_s            training steps per second after warm-up
  speedup_vs_eager       steps_per_s over PyTorch eager's
  first_step_s           cold compile + first step (empty compile caches)
  warm_compile_s         first step again with the caches the cold run filled
  peak_mem_bytes         torch.cuda.max_memory_allocated over the measured steps
  max_diff_loss          |loss - eager loss| after one step from the same weights
  max_diff_grad          max |grad - eager grad| over the parameters (torch modes)

tcc's columns: its cold and warm compile times always (tcc compile needs no
GPU); step timings through `tcc bench` when that subcommand is built, otherwise
the row says why they are missing. Results go to
bench/results/<date>-<device>-peer.json.

Models (--models):
  mlp     Linear(1024, 4096) ReLU Linear(4096, 4096) ReLU Linear(4096, 1024), batch 256, Adam
  block   a GPT-2 block (d 768, 12 heads, causal attention, GELU MLP), batch 8 x seq 512, Adam

Usage: bench/peer_train.py [--tcc build/tcc] [--steps 50] [--models mlp,block]
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
TRAIN_FLAGS = ["--train", "--loss-fn", "mse", "--loss-on", "output", "--label", "target", "--optimizer", "adam"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "tcc"), help="the tcc binary (default: build/tcc)")
    ap.add_argument("--models", default="mlp,block", help="comma-separated: mlp, block")
    ap.add_argument("--steps", type=int, default=50, help="measured steps per mode")
    ap.add_argument("--warmup", type=int, default=5, help="steps before measuring")
    ap.add_argument("--out-dir", default=str(ROOT / "bench" / "results"), help="where the JSON goes")
    ap.add_argument("--device-name", default=None, help="name for the file (default: torch's device name)")
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
            step = make_step(torch, model, torch.optim.Adam(model.parameters(), lr=1e-3))
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
        if reference is None:
            reference = {"loss": float(loss), "grads": grads}
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

def tcc_bench_available(tcc):
    """(available, why): the tcc binary exists and its bench subcommand is built."""
    if not os.path.exists(tcc):
        return False, f"{tcc} does not exist (build it first: scripts/test, or cmake --build build)"
    # --help succeeds either way; a bare `tcc bench` says "not built yet" until the subcommand lands.
    r = subprocess.run([tcc, "bench"], capture_output=True, text=True)
    text = (r.stdout + r.stderr).strip()
    if "not built" in text:
        return False, text.splitlines()[-1]
    return True, ""


def tcc_modes(tcc):
    """The modes this tcc build has: the unindented lines of `tcc compile --list-modes`."""
    r = subprocess.run([tcc, "compile", "--list-modes"], capture_output=True, text=True)
    return {line.strip() for line in r.stdout.splitlines() if line and not line[0].isspace()}


def tcc_rows(args, name, spec, onnx_path, bench_ok, bench_why):
    rows = []
    known = tcc_modes(args.tcc) if os.path.exists(args.tcc) else set()
    for mode in TCC_MODES:
        row = {"framework": "tcc", "mode": mode}
        if mode not in known:
            row.update(steps_per_s=None, why=f"tcc has no '{mode}' mode (tcc compile --list-modes: {sorted(known)})")
            rows.append(row)
            continue
        out = tempfile.mkdtemp(prefix=f"tcc-{name}-{mode}-")
        cmd = [args.tcc, "compile", onnx_path, "-o", out, "--mode", mode, "--shape-hint", spec["hints"], *TRAIN_FLAGS]
        times = []
        for _ in range(2):  # cold, then warm (whatever cache the mode keeps)
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                row["error"] = f"tcc compile exited {r.returncode}: {(r.stdout + r.stderr).strip()[-400:]}"
                break
        if "error" not in row:
            row["cold_compile_s"], row["warm_compile_s"] = times
            row["compile_summary"] = r.stdout
            if bench_ok:
                b = subprocess.run([args.tcc, "bench", out, "--steps", str(args.steps), "--warmup", str(args.warmup),
                                    "--format", "json"], capture_output=True, text=True)
                if b.returncode == 0:
                    row.update(json.loads(b.stdout))
                else:
                    row["error"] = f"tcc bench exited {b.returncode}: {(b.stdout + b.stderr).strip()[-400:]}"
            else:
                row["steps_per_s"] = None
                row["why"] = bench_why
        shutil.rmtree(out, ignore_errors=True)
        rows.append(row)
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
    bench_ok, bench_why = tcc_bench_available(args.tcc)
    if not bench_ok:
        print(f"note: tcc step timings are missing: {bench_why}", file=sys.stderr)

    results = {"date": datetime.date.today().isoformat(), "device": device_name, "torch": torch.__version__,
               "python": platform.python_version(), "steps": args.steps, "warmup": args.warmup, "models": {}}
    work = tempfile.mkdtemp(prefix="peer-train-")
    for name in args.models.split(","):
        if name not in specs:
            sys.exit(f"--models: unknown model '{name}' (known: {', '.join(specs)})")
        spec = specs[name]
        rows, reference = [], None
        for mode in TORCH_MODES:
            row, reference = torch_row(torch, spec, mode, args, reference)
            rows.append(row)
            print(f"{name} pytorch {mode}: {row}", file=sys.stderr)

        torch.manual_seed(0)
        onnx_path = os.path.join(work, f"{name}.onnx")
        torch.onnx.export(spec["module"]().eval(), (torch.randn(*spec["input"]),), onnx_path, input_names=["input"],
                          output_names=["output"], dynamic_axes=spec["dynamic"], opset_version=17, dynamo=False)
        for row in tcc_rows(args, name, spec, onnx_path, bench_ok, bench_why):
            rows.append(row)
            shown = {k: v for k, v in row.items() if k != "compile_summary"}
            print(f"{name} tcc {row['mode']}: {shown}", file=sys.stderr)
        eager = rows[0].get("steps_per_s")
        for row in rows:
            if eager and row.get("steps_per_s"):
                row["speedup_vs_eager"] = row["steps_per_s"] / eager
        results["models"][name] = rows
    shutil.rmtree(work, ignore_errors=True)

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{results['date']}-{device_name}-peer.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
