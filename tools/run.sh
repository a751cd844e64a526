#!/usr/bin/env bash
# The main job: install what is missing, build, and run opfuse on the built-in model zoo.
# Arguments are passed to `opfuse demo`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "$OPFUSE_BUILD/tools/opfuse" demo "$@"
