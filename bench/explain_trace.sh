#!/usr/bin/env bash
# Times `tcc explain` on 1,000,000-call traces (figures, not a pass/fail test):
# a training loop's repeated shapes (the caption example's 1,000 batches x 1,000)
# and the worst case, a float scalar with a new value on every call.
# Usage: bench/explain_trace.sh [TCC_BINARY]
set -euo pipefail
tcc=${1:-build/tcc}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq 1000); do cat "$root/examples/caption_padding/longest.jsonl"; done > "$tmp/captions.jsonl"
awk 'BEGIN { for (i = 0; i < 1000000; i++)
  printf "{\"param\": {\"shape\": [1024], \"dtype\": \"float32\"}, \"grad\": {\"shape\": [1024], \"dtype\": \"float32\"}, \"lr\": {\"scalar\": %.17g}}\n", 0.01 + i * 1e-9 }' > "$tmp/lr.jsonl"
run() {
  local start end
  start=$(date +%s.%N)
  "$tcc" explain "$@" -o /dev/null
  end=$(date +%s.%N)
  printf '%-60s %6.2f s\n' "$*" "$(echo "$end - $start" | bc)"
}
run "$root/examples/caption_padding/model.tir" --trace "$tmp/captions.jsonl" --dynamic false
run "$root/examples/adam_lr_schedule/model.tir" --trace "$tmp/lr.jsonl"
