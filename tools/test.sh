#!/usr/bin/env bash
# The whole test suite: install what is missing, build, and run every test with ctest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$OPFUSE_BUILD"
exec ctest --output-on-failure -j "$(nproc)" "$@"
