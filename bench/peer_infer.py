#!/usr/bin/env python3
"""Peer benchmark of inference: PyPI PyTorch eager and torch.compile against tcc, on the zoo's models.

Runs on the GPU machine (torch, torchvision, transformers, onnx, onnxscript and
onnxruntime installed there; no network needed). The models are the zoo's
(bench/zoo_models.py, the configurations scripts/gen-zoo exports to tests/zoo)
at GPU-sized shapes: the language models at batch 8 x seq 512, the vision
models at batch 64-256, the speech model at batch 16 x 16000 samples (one
second of 16 kHz audio). Per model it first prepares, in a subprocess: builds the
module from the zoo's seed, writes the inputs as <input name>.npy, exports the
module to ONNX with the zoo's exporter and saves PyPI PyTorch eager's output on
the GPU (the reference every row is compared with). Then one row per framework
and mode:

  pytorch  eager, default, reduce-overhead (max-autotune with --torch-max-autotune):
           each row in a fresh process with an empty inductor cache
  tcc      eager, default, reduce-overhead, max-autotune: `tcc profile MODEL --modes M
           --inputs DIR` on the exported model, one mode per command (timed as `tcc bench`
           times, then a few steps traced with CUPTI: the row keeps its heaviest kernels
           and where the traced step's time went)

A mode may name a precision, `default@bf16` or `tcc:default@fp16`: PyTorch's row runs
under torch.autocast("cuda", dtype) (tf32: with allow_tf32 for matmuls and cuDNN), tcc's
compiles with `--precision`; without one a row is fp32. Every row records its precision.

Columns, per row:

  steps_per_s        forward passes per second, steps enqueued back to back with one
                     synchronization at the end (the median of three batches; tcc bench's
                     throughput batches count them the same way)
  speedup_vs_eager   steps_per_s over PyPI PyTorch eager's
  cold_compile_s     pytorch: first_call_s less one steady step (the compile alone, near
                     enough; none for eager); tcc: bench's compile_s, that mode's compile
                     for this GPU (`--arch native --no-ptx --no-host`; tuning included in
                     max-autotune)
  first_call_s       from nothing compiled to the first output: pytorch, the first call
                     (cold inductor cache, CUDA context and weights already up); tcc,
                     cold_compile_s plus `tcc run` of the compiled default module
                     (process start, module load, upload, one step), tcc_first_run_s
  max_abs_diff       max |output - PyTorch eager's output| (tcc: of that `tcc run`)
  peak_mem_bytes     torch.cuda.max_memory_allocated over the timed steps (pytorch only)

Resumable: the JSON is rewritten after every row, and a row already in it is
skipped (rerun with --force; a row that failed, with --retry-errors). The work
directory (inputs, exported model, reference output) is kept between runs.
Every subprocess runs under --timeout. Results go to
bench/results/<date>-<device>-peer-infer.json with the date, the device, the
git commit and the versions.

Usage: bench/peer_infer.py [--tcc build/tcc] [--models gpt2,vit] [--modes eager,tcc:default,default@bf16] [--dry-run]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import zoo_models  # noqa: E402  (no torch at import)
from peer_train import TCC_MODES, TORCH_MODES, run_tcc  # noqa: E402

DEFAULT_MODES = ["eager", "default", "reduce-overhead", "max-autotune"]
PRECISIONS = ["fp32", "tf32", "fp16", "bf16"]
# gpt2_legacy's PyTorch rows would be gpt2's again (the same module), and gen-zoo's TorchScript
# export of it fails; name it in --models to run it.
DEFAULT_MODELS = [n for n in zoo_models.MODELS if n != "gpt2_legacy"]
WORK = pathlib.Path(tempfile.gettempdir()) / "tcc-peer-infer"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcc", default=str(ROOT / "build" / "tcc"), help="the tcc binary (default: build/tcc)")
    ap.add_argument("--python", default=sys.executable, help="the Python with torch, for the row subprocesses")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated, of: " + ", ".join(zoo_models.MODELS) + " (default: all but gpt2_legacy)")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES),
                    help="comma-separated modes: a plain mode is a row of each framework, pytorch:M or tcc:M "
                         "one framework's, M@bf16 (fp16, tf32) at that precision; torch's max-autotune only "
                         "with --torch-max-autotune")
    ap.add_argument("--torch-max-autotune", action="store_true", help="add PyTorch's max-autotune rows (slow)")
    ap.add_argument("--steps", type=int, default=100, help="steps per timed batch")
    ap.add_argument("--warmup", type=int, default=10, help="steps before timing")
    ap.add_argument("--timeout", type=int, default=300, help="seconds for each subprocess")
    ap.add_argument("--out", default=None,
                    help="the results JSON (default bench/results/<date>-<device>-peer-infer.json); resumed if present")
    ap.add_argument("--work-dir", default=str(WORK), help="inputs, exported models, reference outputs (kept)")
    ap.add_argument("--device-name", default=None, help="name for the file (default: torch's device name)")
    ap.add_argument("--force", action="store_true", help="rerun rows already in the results")
    ap.add_argument("--retry-errors", action="store_true", help="rerun rows that failed")
    ap.add_argument("--dry-run", action="store_true", help="print the commands it would run; run nothing")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # prepare|torch-row|device-name ... (internal)
    return ap.parse_args(argv)


def wanted_rows(args):
    """[(framework, mode, precision)] in the order they run: PyTorch eager first, the reference of
    the others."""
    rows = []
    for item in args.modes.split(","):
        spec, _, precision = item.partition("@")
        framework, _, mode = spec.rpartition(":")
        precision = precision or "fp32"
        if precision not in PRECISIONS:
            sys.exit(f"--modes: unknown precision in '{item}' (precisions: {', '.join(PRECISIONS)})")
        frameworks = [framework] if framework else ["pytorch", "tcc"]
        for fw in frameworks:
            known = TORCH_MODES if fw == "pytorch" else TCC_MODES if fw == "tcc" else []
            if mode not in known:
                sys.exit(f"--modes: unknown mode '{item}' (modes: {', '.join(DEFAULT_MODES)}; "
                         "frameworks: pytorch, tcc)")
            if fw == "pytorch" and mode == "max-autotune" and not args.torch_max_autotune and not framework:
                continue
            if (fw, mode, precision) not in rows:
                rows.append((fw, mode, precision))
    order = {("pytorch", m): i for i, m in enumerate(TORCH_MODES)}
    order.update({("tcc", m): len(TORCH_MODES) + i for i, m in enumerate(TCC_MODES)})
    return sorted(rows, key=lambda r: (order[r[:2]], PRECISIONS.index(r[2])))


def size_hints(spec):
    return ",".join(f"{k}={v}" for k, v in spec.bench_sizes.items())


# ----------------------------------------------------------------------------- subprocesses (torch inside)

def child_main(argv, args):
    """The work done in a subprocess: `--child prepare MODEL DIR`, `--child torch-row MODEL MODE
    PRECISION DIR RESULT`, `--child device-name RESULT`. Each writes its result as JSON to the file
    named last."""
    what = argv[0]
    if what == "torch-row":  # before torch is imported: this process's compiles start cold
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cache-")
    import torch
    if what == "device-name":
        result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    elif what == "prepare":
        result = prepare(torch, argv[1], pathlib.Path(argv[2]))
    elif what == "torch-row":
        try:
            result = torch_row(torch, argv[1], argv[2], argv[3], pathlib.Path(argv[4]), args)
        finally:
            shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    else:
        raise SystemExit(f"unknown child task {what}")
    pathlib.Path(argv[-1]).write_text(json.dumps(result, default=str))


def prepare(torch, name, work):
    """Inputs (<name>.npy), the exported model and PyTorch eager's output on the GPU."""
    import numpy as np
    spec = zoo_models.MODELS[name]
    inputs_dir = work / "inputs"
    inputs_dir.mkdir(parents=True, exist_ok=True)
    model = zoo_models.build(torch, name)
    inputs = zoo_models.make_inputs(torch, name, spec.bench_sizes)
    for n, t in inputs.items():
        np.save(inputs_dir / f"{n}.npy", t.numpy())
    result = {"source": spec.source, "exporter": spec.exporter, "sizes": spec.bench_sizes}
    try:  # the export's example inputs are the zoo's: the dims are symbolic either way
        t0 = time.perf_counter()
        zoo_models.export(torch, name, model, zoo_models.make_inputs(torch, name, spec.zoo_sizes),
                          str(work / "model.onnx"))
        result["export_s"] = time.perf_counter() - t0
        result["onnx"] = "exported here"
    except Exception as e:  # the committed zoo model: the same configuration, gen-zoo's torch and weights
        committed = ROOT / "tests" / "zoo" / name / "model.onnx"
        if not committed.exists():
            raise
        shutil.copy(committed, work / "model.onnx")
        result["onnx"] = (f"tests/zoo/{name}/model.onnx (export failed here: {type(e).__name__}: "
                          f"{str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}); "
                          "its weights may differ from this torch's, so max_abs_diff of tcc may too")
    import onnx
    proto = onnx.load(str(work / "model.onnx"))
    result["opset"] = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    result["output"] = proto.graph.output[0].name
    with torch.inference_mode():
        out = model.cuda()(*(t.cuda() for t in inputs.values()))
    np.save(work / "expected.npy", out.float().cpu().numpy())
    return result


def torch_row(torch, name, mode, precision, work, args):
    import contextlib
    import numpy as np
    row = {"framework": "pytorch", "mode": mode, "precision": precision}
    try:
        model = zoo_models.build(torch, name).cuda()
        spec = zoo_models.MODELS[name]
        inputs = [torch.from_numpy(np.load(work / "inputs" / f"{n}.npy")).cuda() for n, _ in spec.inputs]
        fn = model if mode == "eager" else torch.compile(model, mode=mode)
        if precision == "tf32":  # fp32 keeps torch's defaults (cuDNN may use TF32, matmuls do not)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        autocast = torch.autocast("cuda", dtype=low) if low else contextlib.nullcontext()
        with torch.inference_mode(), autocast:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*inputs)
            torch.cuda.synchronize()
            row["first_call_s"] = time.perf_counter() - t0
            expected = np.load(work / "expected.npy")
            row["max_abs_diff"] = float(np.abs(out.float().cpu().numpy() - expected).max())
            for _ in range(args.warmup):
                fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            rates = []
            for _ in range(3):  # batches of steps enqueued back to back, one wait at the end
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    fn(*inputs)
                torch.cuda.synchronize()
                rates.append(args.steps / (time.perf_counter() - t0))
        row["steps_per_s"] = sorted(rates)[1]
        row["peak_mem_bytes"] = torch.cuda.max_memory_allocated()
        if mode != "eager":
            row["cold_compile_s"] = max(0.0, row["first_call_s"] - 1 / row["steps_per_s"])
    except Exception as e:  # a mode that fails is a row that says so
        row["error"] = f"{type(e).__name__}: {str(e)[:600]}"
    return row


# ----------------------------------------------------------------------------- the parent (no torch)

class Runner:
    def __init__(self, args):
        self.args = args

    def show(self, cmd):
        print("$ " + " ".join(shlex.quote(str(c)) for c in cmd), flush=True)

    def child(self, task, *params):
        """(result or None, error or None) of one child task under --timeout."""
        cmd = [self.args.python, str(pathlib.Path(__file__).resolve()), "--steps", str(self.args.steps),
               "--warmup", str(self.args.warmup), "--child", task, *map(str, params)]
        if self.args.dry_run:
            self.show(cmd + ["RESULT.json"])
            return None, "dry run"
        fd, result_path = tempfile.mkstemp(prefix="peer-infer-", suffix=".json")
        os.close(fd)
        cmd.append(result_path)
        ok, out, _ = run_tcc(self.args, cmd)
        try:
            if not ok:
                return None, out
            with open(result_path) as f:
                return json.load(f), None
        except (OSError, ValueError) as e:
            return None, f"{task}: no result ({e}); output: {out[-400:]}"
        finally:
            os.unlink(result_path)

    def tcc(self, cmd):
        """(ok, output, seconds) of one tcc command under --timeout."""
        if self.args.dry_run:
            self.show(cmd)
            return False, "dry run", 0.0
        return run_tcc(self.args, cmd)


def tcc_known_modes(runner):
    """The modes this tcc build has (the unindented lines of `tcc compile --list-modes`); None
    without a tcc binary."""
    if not os.access(runner.args.tcc, os.X_OK):
        return set(TCC_MODES) if runner.args.dry_run else None
    ok, out, _ = run_tcc(runner.args, [runner.args.tcc, "compile", "--list-modes"])
    return {line.strip() for line in out.splitlines() if line and not line[0].isspace()} if ok else set()


def tcc_first_call(runner, spec, work):
    """Cold compile of the default module for this GPU, then one `tcc run` of it, against eager."""
    args = runner.args
    module, outputs = work / "module-default", work / "tcc-outputs"
    ok, out, compile_s = runner.tcc([args.tcc, "compile", str(work / "model.onnx"), "-o", str(module),
                                     "--arch", "native", "--no-ptx", "--no-host", "--shape-hint", size_hints(spec)])
    if args.dry_run:
        runner.show([args.tcc, "run", module, "--inputs", work / "inputs", "-o", outputs, "--format", "npy"])
        return {}
    if not ok:
        return {"error": out}
    result = {"cold_compile_s": compile_s, "compile_summary": out[-1500:]}
    ok, out, run_s = runner.tcc([args.tcc, "run", str(module), "--inputs", str(work / "inputs"), "-o",
                                 str(outputs), "--format", "npy"])
    if not ok:
        return {**result, "error": out}
    result["first_run_s"] = run_s
    try:
        import numpy as np
        files = sorted(outputs.glob("*.npy"))
        result["max_abs_diff"] = float(np.abs(np.load(files[0]) - np.load(work / "expected.npy")).max())
    except Exception as e:  # numpy missing or no output: the timing still stands
        result["diff_error"] = f"{type(e).__name__}: {e}"
    return result


def tcc_row(runner, spec, mode, precision, work, first_call):
    args = runner.args
    report = work / f"report-{mode}-{precision}"
    row = {"framework": "tcc", "mode": mode, "precision": precision}
    ok, out, wall_s = runner.tcc([args.tcc, "profile", str(work / "model.onnx"), "--modes", mode, "--inputs",
                                  str(work / "inputs"), "--warmup", str(args.warmup), "--iterations",
                                  str(args.steps), "--precision", precision, "--report", str(report)])
    if args.dry_run:
        return row
    if not ok:
        return {**row, "error": out}
    with open(report / "report.json") as f:
        r = json.load(f)["modes"][0]
    row.update({"steps_per_s": r["steps_per_s"], "steps_per_s_from": r.get("steps_per_s_from"),
                "cold_compile_s": r["compile_s"], "median_latency_ms": r["latency_ms"]["median"],
                "note": r.get("note", ""), "bench_wall_s": wall_s,
                "step_us": r.get("step_time", {}).get("us_per_step"),
                "kernels": [{key: k.get(key) for key in ("name", "kind", "schedule", "time_per_step_us",
                                                          "roofline_fraction", "bound")}
                            for k in sorted(r.get("kernels", []), key=lambda k: -k["time_per_step_us"])[:8]]})
    if "first_run_s" in first_call:
        row["first_call_s"] = r["compile_s"] + first_call["first_run_s"]
        row["tcc_first_run_s"] = first_call["first_run_s"]
    if "max_abs_diff" in first_call and precision == "fp32":  # the fp32 default module's run
        row["max_abs_diff"] = first_call["max_abs_diff"]
    if "error" in first_call:
        row["first_call_error"] = first_call["error"]
    return row


def git_commit():
    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True, timeout=60).stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "HEAD") + ("-dirty" if dirty else "")


def main(argv):
    args = parse_args(argv)
    if args.child:
        return child_main(args.child, args)
    names = args.models.split(",")
    for n in names:
        if n not in zoo_models.MODELS:
            sys.exit(f"--models: unknown model '{n}' (known: {', '.join(zoo_models.MODELS)})")
    rows_wanted = wanted_rows(args)
    runner = Runner(args)

    versions = {"python": platform.python_version()}
    if args.dry_run:
        device = args.device_name or "DEVICE"
    else:
        info, err = runner.child("device-name")
        if info is None:
            sys.exit(f"peer_infer.py needs torch and a CUDA device: {err}")
        device = args.device_name or info["device"].replace(" ", "-").lower()
        versions["torch"] = info["torch"]
    today = datetime.date.today().isoformat()
    path = pathlib.Path(args.out or ROOT / "bench" / "results" / f"{today}-{device}-peer-infer.json")
    results = json.loads(path.read_text()) if path.exists() else {"models": {}}
    commit = os.environ.get("TCC_COMMIT") or git_commit()  # gpu-check's package names the binary's
    results.update({"date": today, "device": device, "git_commit": commit, **versions,
                    "steps": args.steps, "warmup": args.warmup})
    os.environ["TCC_COMMIT"] = commit  # tcc profile's report records it

    def save():  # after every row, so a run cut short keeps what it measured
        for entry in results["models"].values():
            entry["rows"] = entry.pop("rows")  # last, under what describes the model
            eager = next((r.get("steps_per_s") for r in entry["rows"]
                          if r["framework"] == "pytorch" and r["mode"] == "eager"
                          and r.get("precision", "fp32") == "fp32"), None)
            for r in entry["rows"]:
                if eager and r.get("steps_per_s"):
                    r["speedup_vs_eager"] = r["steps_per_s"] / eager
        if not args.dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=2, default=str) + "\n")

    known = tcc_known_modes(runner) if any(fw == "tcc" for fw, _, _ in rows_wanted) else set()
    for name in names:
        spec = zoo_models.MODELS[name]
        work = pathlib.Path(args.work_dir) / name
        entry = results["models"].setdefault(name, {"rows": []})

        def key(r):
            return r["framework"], r["mode"], r.get("precision", "fp32")

        def done(wanted):
            row = next((r for r in entry["rows"] if key(r) == wanted), None)
            return row is not None and not args.force and not (args.retry_errors and "error" in row)

        todo = [w for w in rows_wanted if not done(w)]
        if not todo:
            print(f"{name}: every row already measured (--force reruns them)", file=sys.stderr)
            continue
        if args.force or not (work / "expected.npy").exists() or not (work / "model.onnx").exists():
            info, err = runner.child("prepare", name, work)
            if info is None and not args.dry_run:
                entry["prepare_error"] = err
                save()
                print(f"{name}: prepare failed: {err}", file=sys.stderr)
                continue
            entry.update(info or {})
            entry.pop("prepare_error", None)
        first_call_ran = False
        for fw, mode, precision in todo:
            failed = {"framework": fw, "mode": mode, "precision": precision}
            if fw == "pytorch":
                row, err = runner.child("torch-row", name, mode, precision, work)
                row = row or {**failed, "error": err}
            elif known is None:
                row = {**failed, "error": f"no tcc binary at {args.tcc} (build it, or --tcc)"}
            elif mode not in known:
                row = {**failed, "error": f"tcc has no '{mode}' mode"}
            else:
                stale = "tcc_first_call" not in entry or args.force or (
                    args.retry_errors and "error" in entry["tcc_first_call"])
                if stale and not first_call_ran:  # once per model and run
                    entry["tcc_first_call"] = tcc_first_call(runner, spec, work)
                    first_call_ran = True
                row = tcc_row(runner, spec, mode, precision, work, entry["tcc_first_call"])
            if args.dry_run:
                continue
            entry["rows"] = [r for r in entry["rows"] if key(r) != (fw, mode, precision)] + [row]
            save()
            print(f"{name} {fw} {mode} {precision}: " + json.dumps({k: v for k, v in row.items() if k != "note"}),
                  file=sys.stderr, flush=True)
    save()
    if not args.dry_run:
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
