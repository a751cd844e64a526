#!/usr/bin/env bash
# The whole test suite: install what is missing, build, and run every test with ctest.
set -euo pipefail
# The suite compares ONNX models with ONNX Runtime (a 20 MB wheel): install it unless told not to.
export OPFUSE_WITH_PEERS="${OPFUSE_WITH_PEERS:-1}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$OPFUSE_BUILD"
exec ctest --output-on-failure -j "$(nproc)" "$@"
