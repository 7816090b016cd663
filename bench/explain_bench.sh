#!/usr/bin/env bash
# Runs bench/tcc_explain_bench (tcc explain on a generated 100,000-node graph,
# and 1,000,000-call trace simulations), each benchmark in its own process so
# that its peak RSS is its own, and writes bench/results/<date>-cpu-explain.json
# with the date, the machine, the git commit and the figures.
# Usage: bench/explain_bench.sh [BUILD_DIR]   (default: build; configured already)
# Extra benchmark flags come from TCC_BENCH_FLAGS (e.g. --benchmark_repetitions=3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target tcc_explain_bench -j "$(nproc)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
benchmarks=(ExplainAnalyze ExplainCommand Trace/captions Trace/new_lr Trace/stack)
for b in "${benchmarks[@]}"; do
  echo "BM_$b"
  # shellcheck disable=SC2086
  "$build/bench/tcc_explain_bench" --benchmark_filter="^BM_$b/" \
    --benchmark_out="$work/${b//\//_}.json" --benchmark_out_format=json ${TCC_BENCH_FLAGS:-}
done

mkdir -p "$root/bench/results"
out="$root/bench/results/$(date +%F)-cpu-explain.json"
python3 - "$work" "$out" "$root" "${benchmarks[@]}" <<'PY'
import json, os, sys

work, out, root, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
sys.path.insert(0, os.path.join(root, "bench"))
from results_meta import run_metadata, write_result

figures = {}
for name in names:
    runs = [b for b in json.load(open(os.path.join(work, name.replace("/", "_") + ".json")))["benchmarks"]
            if b.get("run_type") == "iteration"]
    if not runs:
        sys.exit(f"BM_{name} produced no result")
    b = runs[0]
    if b.get("error_occurred"):
        sys.exit(f"BM_{name} failed: {b.get('error_message')}")
    counters = {k: (int(v) if k != "peak_rss_mb" else round(v, 1)) for k, v in b.items()
                if k in ("nodes", "json_bytes", "calls", "compiles", "eager_fallback_calls", "advice", "peak_rss_mb")}
    figures["BM_" + name] = {"real_time_ms": round(b["real_time"], 1), "cpu_time_ms": round(b["cpu_time"], 1),
                             "iterations": b["iterations"], **counters}
result = {
    **run_metadata(root),
    "targets": "explain on a 100,000-node graph under 2 s; a 1,000,000-call trace under 2 s (issue 3)",
    "peak_rss_mb": max(f["peak_rss_mb"] for f in figures.values()),
    "benchmarks": figures,
}
write_result(out, result)
for name, f in figures.items():
    print(f"{name}: {f['real_time_ms']} ms ({f['cpu_time_ms']} ms CPU), peak RSS {f['peak_rss_mb']} MB")
print(out)
PY
