#!/usr/bin/env python3
"""Writes the synthetic recorded measurements the report-writer tests read.

Usage: make_recorded.py TCC_BINARY OUT_DIR

The kernels (names, source nodes, bytes, FLOP) are real: each fixture is
compiled with `tcc compile` in every mode. The timings are NOT measured: they
come from a simple H100 model (the roofline at 85% of 3.35 TB/s and 60% of
the compute peak, plus a fixed kernel overhead, launch gaps, host enqueue cost
per launch, host steps with their copies and waits, and seeded jitter), so the
writers have realistic input without a GPU. Every file says so in its "source"
field. Regenerate with this script after a change to the compiler's kernels,
then update the goldens with tests/profiler/update-goldens.
"""
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BW, FP32, TENSOR = 3.35e12 * 0.85, 67e12 * 0.6, 989e12 * 0.6
KERNEL_OVERHEAD_US, LAUNCH_GAP_US, ENQUEUE_PER_LAUNCH_US = 2.2, 1.4, 4.1
GRAPH_GAP_US, GRAPH_ENQUEUE_US, SYNC_US = 0.4, 7.5, 6.0
FALLBACK_US = 38.0  # a host fallback's copies and synchronization
# Inside it: the copy of its input to the host, the wait for it, the node on the
# host, the copy of its output back and the wait for that (us from its start).
FALLBACK_SPANS = [("copy", "d2h", 0, 2), ("sync", "stream", 2, 6), ("copy", "h2d", 30, 32), ("sync", "stream", 32, 38)]
FIRST_LAUNCH_US = 5.0  # from the step's first enqueue to its first kernel on the GPU
STREAM = 13

CASES = {
    "mlp": {"model": "mlp.onnx", "sizes": {"batch": 64}, "modes": ["eager", "default", "reduce-overhead"]},
    "gpt2_block": {"model": "gpt2_block.onnx", "sizes": {"batch": 8, "seq": 128},
                   "modes": ["eager", "default", "reduce-overhead"]},
    # A Scan, which runs on the host: a host step in every mode, and no CUDA graph.
    "region_captures": {"model": "region_captures.tir", "sizes": {"b": 4096},
                        "modes": ["eager", "default", "reduce-overhead"]},
}
COMPILE_S = {"eager": 0.9, "default": 1.1, "reduce-overhead": 1.1}


def count(v, sizes):
    return v if isinstance(v, int) else int(eval(v, {"__builtins__": {}}, dict(sizes)))


def kernel_us(k):
    peak = TENSOR if k["tensor_cores"] else FP32
    return max(k["bytes"] / BW, k["flop"] / peak) * 1e6 + KERNEL_OVERHEAD_US


def mode_record(tcc, model, mode, sizes, rng, tmp):
    out = Path(tmp) / mode
    hints = ",".join(f"{k}={v}" for k, v in sizes.items())
    subprocess.run([tcc, "compile", str(model), "-o", str(out), "--mode", mode, "--shape-hint", hints],
                   check=True, stdout=subprocess.DEVNULL)
    manifest = json.loads((out / "manifest.json").read_text())
    kernels = []
    for k in manifest["kernels"]:
        dtype = k["buffers"][0]["dtype"] if k["buffers"] else ""
        kernels.append({"name": k["name"], "kind": k["kind"], "schedule": k.get("schedule", ""), "nodes": k["nodes"],
                        "bytes": count(k["bytes_moved"], sizes), "flop": count(k["flop"], sizes),
                        "tensor_cores": k["kind"] == "gemm" and dtype in ("f16", "bf16")})
    schedule = manifest["schedule"]
    steps = [s["kernel"] for s in schedule if "kernel" in s]
    fallbacks = [s["fallback"] for s in manifest["schedule"] if "fallback" in s]
    graph = mode == "reduce-overhead" and not fallbacks
    note = ""
    if mode == "reduce-overhead" and fallbacks:
        note = f"skipping cudagraphs due to host fallback node '{fallbacks[0]}' (it synchronizes with the host)"
    gap = GRAPH_GAP_US if graph else LAUNCH_GAP_US
    gpu_us = sum(kernel_us(kernels[i]) + gap for i in steps) + FALLBACK_US * len(fallbacks)
    enqueue_us = GRAPH_ENQUEUE_US if graph else ENQUEUE_PER_LAUNCH_US * len(steps) + FALLBACK_US * len(fallbacks)
    lat, enq, gpu = [], [], []
    for i in range(200):
        # The mlp's eager run shares the machine with something else: a few slow steps.
        spike = 2.6 if model.stem == "mlp" and mode == "eager" and i % 40 == 7 else 1.0
        g = gpu_us * rng.uniform(0.98, 1.03) * spike
        e = enqueue_us * rng.uniform(0.97, 1.06)
        gpu.append(round(g / 1e3, 5))
        enq.append(round(e / 1e3, 5))
        lat.append(round((max(g, e) + SYNC_US * rng.uniform(0.9, 1.2)) / 1e3, 5))
    record = {"mode": mode, "note": note, "cuda_graph": graph, "compile_s": COMPILE_S[mode], "warmup": 10,
              "latencies_ms": lat, "enqueue_ms": enq, "gpu_ms": gpu, "kernels": kernels,
              "traced_steps": 0, "activities": []}
    if mode == "reduce-overhead":
        # tcc bench's counts: the capture in the set-up, then the warm-up and timed steps.
        runs = 10 + len(lat)
        record["graphs"] = {"captures": 1 if graph else 0, "replays": runs if graph else 0, "evictions": 0,
                            "uncaptured_steps": 0 if graph else runs,
                            "not_captured": "" if graph else note[len("skipping cudagraphs due to "):]}
    if not graph:
        record["traced_steps"] = 5
        record["step_windows"], record["spans"] = [], []
        t = 1_000_000_000 + (0 if mode == "eager" else 10_000_000)
        for _ in range(5):
            start = t
            t += int(FIRST_LAUNCH_US * 1e3)
            last = t
            for s in schedule:
                if "fallback" in s:
                    record["spans"].append({"kind": "host_step", "name": s["fallback"], "stream": 0, "bytes": 0,
                                            "start_ns": t, "end_ns": t + int(FALLBACK_US * 1e3)})
                    for kind, name, a, b in FALLBACK_SPANS:
                        record["spans"].append({"kind": kind, "name": name, "stream": STREAM,
                                                "bytes": 64 if kind == "copy" else 0,
                                                "start_ns": t + int(a * 1e3), "end_ns": t + int(b * 1e3)})
                    t += int((FALLBACK_US + gap) * 1e3)
                    continue
                k = kernels[s["kernel"]]
                d = int(kernel_us(k) * rng.uniform(0.97, 1.05) * 1e3)
                record["activities"].append({"kernel": k["name"], "stream": STREAM, "start_ns": t, "end_ns": t + d})
                last = t
                t += d + int(gap * 1e3)
            # The host's wait for the step: from its last launch to the step's end.
            end = t + int(SYNC_US * 1e3)
            record["spans"].append({"kind": "sync", "name": "stream", "stream": STREAM, "bytes": 0,
                                    "start_ns": last, "end_ns": end})
            record["step_windows"].append({"start_ns": start, "end_ns": end})
            t = end + 20_000
    return record


def main():
    tcc, out_dir = sys.argv[1], Path(sys.argv[2])
    for name, case in CASES.items():
        model = ROOT / "tests" / "fixtures" / case["model"]
        rng = random.Random(name)
        with tempfile.TemporaryDirectory() as tmp:
            modes = [mode_record(tcc, model, m, case["sizes"], rng, tmp) for m in case["modes"]]
        doc = {"format": "tcc-measurement", "format_version": 1,
               "source": "SYNTHETIC recorded input for the report-writer tests: kernels from tcc compile, timings "
                         "from a roofline model of an H100 (tests/profiler/make_recorded.py), not measured",
               "model": case["model"], "device": "h100", "device_name": "NVIDIA H100 80GB HBM3 (synthetic)",
               "date": "2026-11-23T00:00:00Z", "commit": "synthetic", "sizes": case["sizes"], "modes": modes}
        (out_dir / f"{name}.measurement.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
