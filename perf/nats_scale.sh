#!/usr/bin/env bash
# Freshness and delivered rate across the NATS backbone (issue 15, item 6):
# the same demo load on one single node and through an ingest + 1, 2, 4
# edges over a 3-server NATS cluster (steady state: --keep-nats), then a
# run with a NATS server killed halfway (the failover's cost). Runs are
# alternated, RUNS rounds. Raw output: perf/raw/nats/. Loopback only;
# every run is bounded by --duration; the demo stops what it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/tickfan}
RUNS=${RUNS:-3}
RATE=${RATE:-50000}
DUR=${DUR:-10s}
SUBS=${SUBS:-40}
OUT=${OUT:-perf/raw/nats}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--rate "$RATE" --duration "$DUR" --subscribers "$SUBS" --slow 0 --order-rate 0 --symbols 1000)
for r in $(seq 1 "$RUNS"); do
  (cd "$work" && "$OLDPWD/$BIN" demo "${common[@]}" --report-dir "$work/rep") \
    > "$OUT/single-run$r.txt" 2>&1
  for e in 1 2 4; do
    (cd "$work" && "$OLDPWD/$BIN" demo --cluster --keep-nats --edges "$e" "${common[@]}") \
      > "$OUT/edges$e-run$r.txt" 2>&1
  done
  (cd "$work" && "$OLDPWD/$BIN" demo --cluster --edges 2 "${common[@]}") \
    > "$OUT/failover-run$r.txt" 2>&1
done
echo "raw output in $OUT"
