#!/usr/bin/env bash
# Renders report.html (from a recorded measurement) in headless Chromium and
# checks the screenshot. Exit 77 (ctest's skip) only when Chromium is absent.
# Usage: screenshot_test.sh TCC PYTHON RECORDING
set -euo pipefail
tcc=$1 python=$2 recording=$3
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "chromium is not installed (Debian package chromium, in TCC_APT_PACKAGES)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tcc" bench --from-recorded "$recording" --report "$tmp/report" >/dev/null
# Chromium wants a writable home for its profile; nothing may reach the network.
HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
  --screenshot="$tmp/shot.png" --window-size=1200,1600 "file://$tmp/report/report.html" 2>"$tmp/chromium.log" ||
  { cat "$tmp/chromium.log"; exit 1; }
"$python" "$(dirname "$0")/check_screenshot.py" "$tmp/shot.png" 1200 1600
