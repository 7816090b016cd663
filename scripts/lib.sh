# Shared by scripts/demo, scripts/test and the other scripts: installs what a
# fresh machine lacks, then configures and builds tcc into build/.
# Sourced, not run.

TCC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TCC_VENV=${TCC_VENV:-$TCC_ROOT/.venv}
TCC_BUILD=${TCC_BUILD:-$TCC_ROOT/build}

TCC_APT_PACKAGES=(cmake ninja-build g++ pkg-config ccache chromium
  libcli11-dev libspdlog-dev libfmt-dev libprotobuf-dev protobuf-compiler libonnx-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev libzip-dev)
TCC_PY_PACKAGES=(onnx numpy onnxruntime jsonschema)

tcc_log() { printf '\033[1m[tcc]\033[0m %s\n' "$*"; }

tcc_install_apt() {
  local missing=()
  for p in "${TCC_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  tcc_log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

tcc_install_python() {
  if [ ! -x "$TCC_VENV/bin/python" ]; then
    tcc_log "creating Python environment in $TCC_VENV"
    python3 -m venv "$TCC_VENV"
  fi
  if ! "$TCC_VENV/bin/python" -c "import onnx, numpy, onnxruntime, jsonschema" 2>/dev/null; then
    tcc_log "installing Python packages: ${TCC_PY_PACKAGES[*]}"
    "$TCC_VENV/bin/pip" install -q --disable-pip-version-check "${TCC_PY_PACKAGES[@]}"
  fi
}

tcc_build() {
  local type=${TCC_BUILD_TYPE:-RelWithDebInfo}
  if [ ! -f "$TCC_BUILD/build.ninja" ]; then
    cmake -S "$TCC_ROOT" -B "$TCC_BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$type" \
      -DTCC_PYTHON="$TCC_VENV/bin/python" >/dev/null
  fi
  tcc_log "building ($(nproc) jobs)"
  cmake --build "$TCC_BUILD" -j "$(nproc)"
}

tcc_setup() {
  tcc_install_apt
  tcc_install_python
  tcc_build
}
