#!/usr/bin/env bash
# Builds the fuzz targets and the sanitized unit tests with clang (once per build tree), then
# runs one fuzz target for a bounded time from its checked-in corpus (a crash leaves its input
# in the work folder and fails), or, with TARGET "sanitizers", the sanitized unit tests; TARGET
# "build" only builds.
#   run.sh BUILD_DIR CMAKE TARGET SECONDS
set -euo pipefail
build=$(cd "$1" && pwd) cmake=$2 target=$3 seconds=$4
src=$(cd "$(dirname "$0")" && pwd)
if ! command -v clang++ >/dev/null; then
  echo "SKIPPED: clang++ (libFuzzer) not found"
  exit 77
fi
fuzz_build="$build/fuzz"
# Configure and build under a lock: the four fuzz tests may start at once.
(
  flock 9
  if [ ! -f "$fuzz_build/build.ninja" ]; then
    CC=clang CXX=clang++ "$cmake" -S "$src" -B "$fuzz_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  "$cmake" --build "$fuzz_build" >/dev/null
) 9>"$build/fuzz.lock"
[ "$target" = build ] && exit 0
if [ "$target" = sanitizers ]; then
  # Every UBSan report fails the unit tests (the build recovers for the fuzzers' sake).
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 exec "$fuzz_build/sanitized_unit_tests"
fi
work="$fuzz_build/work-$target"
rm -rf "$work" && mkdir -p "$work/corpus"
cp "$src/corpus/$target"/* "$work/corpus/"
cd "$work"
"$fuzz_build/fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 corpus 2>&1 | tail -n 12
