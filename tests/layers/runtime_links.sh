#!/usr/bin/env bash
# A program that loads compiled modules links the runtime alone: no NVRTC,
# spdlog, protobuf or ONNX, by dynamic dependency or by symbol.
# Usage: runtime_links.sh PROGRAM
set -euo pipefail
program=$1
forbidden='nvrtc|nvJitLink|spdlog|protobuf|onnx'
status=0
if deps=$(ldd "$program" | grep -Ei "lib($forbidden)"); then
  echo "$program needs: $deps"
  status=1
fi
if syms=$(nm -C "$program" | grep -E ' (spdlog::|onnx::|google::protobuf|nvrtc[A-Z]|nvJitLink[A-Z])' | head -5); [ -n "$syms" ]; then
  echo "$program holds symbols of the compiler's dependencies:"
  echo "$syms"
  status=1
fi
[ $status -eq 0 ] && echo "$program links the runtime alone"
exit $status
