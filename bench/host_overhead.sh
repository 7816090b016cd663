#!/usr/bin/env bash
# The runtime's host time per kernel step (bench/host_overhead.cc, on the fake
# CUDA driver) next to the fake driver's own cuLaunchKernel, measured in one
# process; writes bench/results/<date>-cpu-host-overhead.json. On a GPU, each
# kernel step costs the driver's real launch (a few microseconds) plus this.
# Usage: bench/host_overhead.sh [BUILD_DIR]   (default: build; configured already)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target tcc tcc_host_overhead -j "$(nproc)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bench/tcc_host_overhead" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$work/out.json" --benchmark_out_format=json

mkdir -p "$root/bench/results"
out="$root/bench/results/$(date +%F)-cpu-host-overhead.json"
python3 - "$work/out.json" "$out" "$root" <<'PY'
import json, os, sys

data_path, out, root = sys.argv[1:4]
sys.path.insert(0, os.path.join(root, "bench"))
from results_meta import run_metadata, write_result

medians = {b["run_name"]: b for b in json.load(open(data_path))["benchmarks"] if b.get("aggregate_name") == "median"}
if not medians:
    sys.exit("host_overhead produced no medians")
driver_ns = medians["BM_DriverLaunch"]["ns_per_kernel_step"] * 1e9
rows = {}
for name, b in medians.items():
    row = {"ns_per_step": round(b["real_time"], 1)}
    if "kernel_steps" in b:
        ns = b["ns_per_kernel_step"] * 1e9
        row.update(kernel_steps=int(b["kernel_steps"]), ns_per_kernel_step=round(ns, 1),
                   over_driver_launch=round(ns / driver_ns, 2))
    rows[name] = row
result = {
    **run_metadata(root),
    "what": "runtime host time per kernel step on the fake CUDA driver (tests/fake_cuda), median of 3 repetitions; "
            "over_driver_launch: the ratio to the fake driver's own cuLaunchKernel in the same process",
    "benchmarks": rows,
}
write_result(out, result)
for name, row in rows.items():
    print(f"{name:40} {row}")
print(out)
PY
