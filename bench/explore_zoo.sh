#!/usr/bin/env bash
# Explores every zoo model (cpu size) with a budget of ~50 candidates, then calibrates the
# profile's correction factors (7.4.1) over all of them and reports the model's error per
# model. Usage: bench/explore_zoo.sh [BUILD_DIR] [OUT_DIR] [BUDGET]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
out="${2:-$here/explore-zoo}"
budget="${3:-50}"
mkdir -p "$out"
dirs=()
for g in "$here"/models/cpu/*.json; do
  name="$(basename "$g" .json)"
  echo "== $name"
  "$build/tools/opfuse-explore" "$g" --budget "$budget" --out "$out/$name" --quiet |
    grep -E "^- "
  dirs+=("$out/$name")
done
echo "== calibration over the zoo"
"$build/tools/opfuse-explore" calibrate --out "$out/profile_calibrated.json" "${dirs[@]}"
