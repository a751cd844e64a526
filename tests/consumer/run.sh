#!/usr/bin/env bash
# Installs opfuse from BUILD into a fresh prefix, builds the outside project against it, runs it.
#   run.sh BUILD_DIR CMAKE HALIDE_DIR HALIDE_HELPERS_DIR
set -euo pipefail
build=$1 cmake=$2 halide=$3 helpers=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cmake" --install "$build" --prefix "$work/prefix" >/dev/null
"$cmake" -S "$(dirname "$0")" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -Dopfuse_DIR="$work/prefix/lib/cmake/opfuse" -DHalide_DIR="$halide" -DHalideHelpers_DIR="$helpers" >/dev/null
"$cmake" --build "$work/build" >/dev/null
"$work/build/consumer"
