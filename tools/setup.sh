#!/usr/bin/env bash
# Installs what opfuse needs and configures + builds it. Safe to run twice: every step
# checks before it installs, and the second run reuses the apt packages, the venv and
# the build tree.
#
#   Debian packages   doctest, Google Benchmark, nlohmann-json, CLI11, PoCL + ocl-icd,
#                     ONNX + protobuf (graph import), OpenBLAS + oneDNN (vendor baselines),
#                     graphviz (plan drawings), clang + its runtimes (libFuzzer, sanitizers)
#   Python venv       halide==21.0.0 (C++ library, headers, CMake package, autoscheduler
#                     plugins), cmake>=3.28, ninja — kept in a per-user cache outside the
#                     clone so that a fresh clone reuses it.
#   Peers (optional)  OPFUSE_WITH_PEERS=1 adds ONNX Runtime and numpy to the venv, for the
#                     ONNX comparison (bench/onnx/, tests/frontend).
#   Torch (optional)  OPFUSE_WITH_TORCH=1 adds PyTorch (with torchvision, timm, transformers,
#                     onnx, onnxscript), for the demo's eager and torch.compile rows and
#                     PyTorch's own exports: PyPI's Linux wheel brings the CUDA stack (about
#                     5 GB) to a CPU machine, so it has a flag of its own.
#
# Sourced by tools/run.sh and tools/test.sh; exports OPFUSE_VENV, OPFUSE_BUILD.
set -euo pipefail

OPFUSE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OPFUSE_VENV=${OPFUSE_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/opfuse/venv-halide21}
OPFUSE_BUILD=${OPFUSE_BUILD:-$OPFUSE_ROOT/build}
export OPFUSE_ROOT OPFUSE_VENV OPFUSE_BUILD

APT_PACKAGES=(build-essential python3-dev doctest-dev libbenchmark-dev nlohmann-json3-dev
              libcli11-dev pocl-opencl-icd ocl-icd-opencl-dev libonnx-dev libprotobuf-dev
              protobuf-compiler libopenblas-dev libdnnl-dev graphviz clang libclang-rt-14-dev
              libopenmpi-dev openmpi-bin python3-matplotlib)
PIP_PACKAGES=("halide==21.0.0" "cmake>=3.28,<5" "ninja")
if [ "${OPFUSE_WITH_PEERS:-0}" = 1 ]; then
  PIP_PACKAGES+=("onnxruntime" "numpy")
fi
# PyTorch for the demo's eager and torch.compile rows: about 5 GB with the CUDA wheels PyPI's
# torch depends on, so a flag of its own.
# With it, the model definitions (torchvision, timm, transformers) and what both ONNX
# exporters need (onnx, onnxscript), for PyTorch's own networks (test_torch_export and
# bench/networks/torch_networks.py).
if [ "${OPFUSE_WITH_TORCH:-0}" = 1 ]; then
  PIP_PACKAGES+=("torch" "torchvision" "timm" "transformers" "onnx" "onnxscript")
fi

log() { printf '[setup] %s\n' "$*" >&2; }

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}

install_venv() {
  # The stamp lists every package installed so far: the main job and the test command want
  # different sets, and alternating them must not rebuild the venv.
  local stamp="$OPFUSE_VENV/.opfuse-stamp" missing=() p
  for p in "${PIP_PACKAGES[@]}"; do
    [ -f "$stamp" ] && grep -qxF -- "$p" "$stamp" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)) && [ -x "$OPFUSE_VENV/bin/cmake" ]; then
    return
  fi
  if [ ! -x "$OPFUSE_VENV/bin/pip" ]; then
    log "creating a Python venv in $OPFUSE_VENV"
    mkdir -p "$(dirname "$OPFUSE_VENV")"
    python3 -m venv "$OPFUSE_VENV"
    "$OPFUSE_VENV/bin/pip" install -q --upgrade pip
    missing=("${PIP_PACKAGES[@]}")
  fi
  log "installing ${missing[*]} into $OPFUSE_VENV"
  "$OPFUSE_VENV/bin/pip" install -q "${missing[@]}"
  { [ -f "$stamp" ] && cat "$stamp"; printf '%s\n' "${missing[@]}"; } | sort -u >"$stamp.new"
  mv "$stamp.new" "$stamp"
}

configure_and_build() {
  local halide_dir
  halide_dir=$("$OPFUSE_VENV/bin/python" -c 'import halide; print(halide.install_dir())')
  if [ ! -f "$OPFUSE_BUILD/build.ninja" ]; then
    log "configuring in $OPFUSE_BUILD"
    "$OPFUSE_VENV/bin/cmake" -S "$OPFUSE_ROOT" -B "$OPFUSE_BUILD" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_MAKE_PROGRAM="$OPFUSE_VENV/bin/ninja" \
      -DHalide_DIR="$halide_dir/lib64/cmake/Halide" \
      -DHalideHelpers_DIR="$halide_dir/lib64/cmake/HalideHelpers" >&2
  fi
  # The host profile (FMA peak, bandwidths) is measured once per machine and cached outside
  # the clone, before the build: measured during it, the other core's compile jobs halve it.
  "$OPFUSE_VENV/bin/cmake" --build "$OPFUSE_BUILD" --target opfuse_host_profile >&2
  "$OPFUSE_BUILD/fusion/opfuse_host_profile" >&2
  # Then each anchor class's share of that peak, timed on layers at the networks' shapes
  # (tools/anchor_calibration.h), also once per machine: the generators plan with it.
  "$OPFUSE_VENV/bin/cmake" --build "$OPFUSE_BUILD" --target opfuse-calibrate-anchors >&2
  # Its failure leaves the roofline profile, and plans say so; it does not stop the set-up.
  "$OPFUSE_BUILD/tools/opfuse-calibrate-anchors" >&2 ||
    log "the anchor calibration failed (above): plans for the host take every anchor at the peak"
  log "building"
  "$OPFUSE_VENV/bin/cmake" --build "$OPFUSE_BUILD" >&2
}

install_apt
install_venv
export PATH="$OPFUSE_VENV/bin:$PATH"
configure_and_build
