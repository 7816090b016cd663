#!/usr/bin/env bash
# Builds the libFuzzer targets in a clang build of their own and runs each for
# a bounded time on its seed corpus; fails on any crash, sanitizer report,
# escaped InternalError, timeout or out-of-memory.
#
# Usage: fuzz_smoke.sh SOURCE_DIR FUZZ_BUILD_DIR [SECONDS_PER_FUZZER]
# Exits 77 (ctest's skip code) when clang++ or libFuzzer is not installed.
set -euo pipefail

src=$1
build=$2
seconds=${3:-25}

clangxx=$(command -v clang++ || true)
if [[ -z $clangxx ]]; then
  echo "fuzz_smoke: clang++ not found, skipping"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' >"$probe/probe.cc"
if ! "$clangxx" -fsanitize=fuzzer,address "$probe/probe.cc" -o "$probe/probe" 2>/dev/null; then
  echo "fuzz_smoke: $clangxx cannot link libFuzzer, skipping"
  exit 77
fi

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$clangxx" -DCMAKE_C_COMPILER="${clangxx%++}" -DTCC_FUZZ=ON >/dev/null
cmake --build "$build" --target tcc_fuzzers -j 2

status=0
for target in fuzz_onnx_import fuzz_pt2_import fuzz_torch_pickle fuzz_text_parser; do
  # New inputs go to a corpus inside the build, never into the source tree.
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz_smoke: running $target for ${seconds}s"
  if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$src/tests/fuzz/corpus/${target#fuzz_}"; then
    echo "fuzz_smoke: $target failed; reproduce with: $build/tests/fuzz/$target $artifacts/<crash file>"
    status=1
  fi
done
exit $status
