#!/usr/bin/env bash
# scripts/gpu-check --package: the folder holds the binaries and the libraries
# they need, fits the device machine's 64 MiB, and its tcc runs with only the
# packaged libraries added to the library path.
set -euo pipefail
gpu_check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gpu_check" --package "$tmp/pkg"
for f in bin/tcc bin/tests/tcc_tests bin/examples/run_module/run_module bin/bench/tcc_gpt2_model package.env; do
  [ -e "$tmp/pkg/$f" ] || { echo "missing $f"; exit 1; }
done
for lib in libonnx_proto libprotobuf libspdlog libfmt; do
  ls "$tmp/pkg/lib/$lib".so* >/dev/null || { echo "missing $lib"; exit 1; }
done
if ls "$tmp/pkg/lib" | grep -E '^lib(c|cuda|nvrtc|nvJitLink)\.so'; then echo "packaged a library the device has"; exit 1; fi
[ "$(du -sb "$tmp/pkg" | cut -f1)" -lt $((64 * 1024 * 1024)) ] || { echo "package over 64 MiB"; exit 1; }
grep -q '^TCC_PKG_COMMIT=[0-9a-f]' "$tmp/pkg/package.env" || { echo "no commit in package.env"; exit 1; }
version=$(LD_LIBRARY_PATH="$tmp/pkg/lib" "$tmp/pkg/bin/tcc" --version)
[ "$version" = "tcc 0.1.0" ] || { echo "packaged tcc printed '$version'"; exit 1; }
# Every library tcc links resolves from the package or the system's C runtime.
LD_LIBRARY_PATH="$tmp/pkg/lib" ldd "$tmp/pkg/bin/tcc" | grep -E 'onnx_proto|protobuf|spdlog|fmt' | grep -v "$tmp/pkg/lib" &&
  { echo "a library resolved outside the package"; exit 1; }
echo "package ok"
