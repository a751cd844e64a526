#!/usr/bin/env bash
# The exploration command end to end: two shards in two processes and a 2-rank MPI run each
# measure the same candidate list as one process does; both merges hold exactly its
# candidates. Timings differ from run to run, so candidate ids (and their predictions) are
# compared, not times. Usage: cli.sh OPFUSE_EXPLORE GRAPH
set -euo pipefail
tool="$1"
graph="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
common=(--budget 8 --no-gate --quiet --min-time 0.005)

ids() {  # sorted "id predicted_s" pairs of a results file
  /usr/bin/python3 -c '
import json, sys
rows = sorted((j["id"], round(j["predicted_s"], 15)) for j in map(json.loads, open(sys.argv[1])))
for r in rows: print(*r)
assert all(json.loads(l)["ok"] for l in open(sys.argv[1])), "a candidate failed"
' "$1"
}

"$tool" "$graph" "${common[@]}" --out "$work/single" > /dev/null
"$tool" "$graph" "${common[@]}" --shard 0/2 --out "$work/s0" > /dev/null &
"$tool" "$graph" "${common[@]}" --shard 1/2 --out "$work/s1" > /dev/null &
wait %1 %2
"$tool" merge --graph "$graph" --out "$work/merged" "$work/s0" "$work/s1" > /dev/null
diff <(ids "$work/single/results.jsonl") <(ids "$work/merged/results.jsonl")
echo "shards: $(wc -l < "$work/merged/results.jsonl") candidates, merge equals the single run"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "$tool" "$graph" "${common[@]}" --mpi --out "$work/mpi" > /dev/null
diff <(ids "$work/single/results.jsonl") <(ids "$work/mpi/results.jsonl")
test -f "$work/mpi/best_plan.json"
echo "mpi: 2 ranks, $(wc -l < "$work/mpi/results.jsonl") candidates, merge equals the single run"
echo "1 passed, 0 failed"
