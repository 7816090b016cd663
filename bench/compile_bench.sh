#!/usr/bin/env bash
# Compiles a generated 12-layer GPT-2-small-sized model (hidden 768, 12 heads,
# dynamic batch and seq; ~340 MB of weights, written into the build directory,
# never committed) with `tcc compile --time-passes`, cold: a fresh process and
# a fresh module directory. Prints the total beside the per-pass breakdown and
# the kernel and reuse counts, and writes bench/results/<date>-cpu-compile.json.
# Target (issue 4): under 10 s on the 2-core CI box.
# Usage: bench/compile_bench.sh [BUILD_DIR]   (default: build; configured already)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target tcc tcc_gpt2_model -j "$(nproc)"

model="$build/bench/gpt2_12layer.onnx"
[ -f "$model" ] || "$build/bench/tcc_gpt2_model" "$model" 12
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s.%N)
"$build/tcc" compile "$model" -o "$work/module" --time-passes --shape-hint batch=8,seq=128 \
  >"$work/stdout" 2>"$work/stderr"
end=$(date +%s.%N)
cat "$work/stderr" "$work/stdout"

mkdir -p "$root/bench/results"
out="$root/bench/results/$(date +%F)-cpu-compile.json"
python3 - "$work/module/report.json" "$out" "$root" "$start" "$end" <<'PY'
import json, os, sys

report_path, out, root, start, end = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
sys.path.insert(0, os.path.join(root, "bench"))
from results_meta import run_metadata, write_result

report = json.load(open(report_path))
t, s = report["timings"], report["summary"]
result = {
    **run_metadata(root),
    "model": "generated GPT-2-small-sized stack: 12 layers, hidden 768, 12 heads, f32[batch, seq, 768]",
    "target": "tcc compile cold under 10 s (issue 4)",
    "wall_s": round(end - start, 2),
    "kernels": s["kernels"],
    "kernel_steps": s["kernel_steps"],
    "fallback_steps": s["fallback_steps"],
    "stages_ms": {k: round(v, 1) for k, v in t.items() if k.endswith("_ms")},
    "passes_ms": {p["name"]: round(p["ms"], 1) for p in t["passes"]},
}
write_result(out, result)
print(f"compile: {result['wall_s']} s wall for {s['kernels']} kernels run by {s['kernel_steps']} steps "
      f"({s['kernel_steps'] - s['kernels']} reused), {s['fallback_steps']} fallbacks")
print(out)
PY
