#!/usr/bin/env bash
# perf/rss_start.sh — the engine's resident memory at start, and what each
# part of it is: `serve` with its defaults, then with one reservation at a
# time taken away, each on ephemeral loopback ports and its own data dir.
#
#   serve (variant) ──▶ wait for the subscriber port ──▶ VmRSS, then stop
#
# Usage: bash perf/rss_start.sh   (BIN=target/release/tickfan; OUT=perf/out/rss-<date>)
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-perf/out/rss-$(date -u +%Y%m%d-%H%M%S)}
BIN=${BIN:-target/release/tickfan}
[ -x "$BIN" ] || cargo build --release --quiet
mkdir -p "$OUT"
. perf/lib.sh
trap stop_pids EXIT INT TERM

variants=(
  "defaults|"
  "--no-journal|--no-journal"
  "--dedup-capacity 1000|--dedup-capacity 1000"
  "--dedup-capacity 1000 --no-journal|--dedup-capacity 1000 --no-journal"
)
printf '| variant | RSS at start MiB |\n|---|---|\n' > "$OUT/results.md"
for v in "${variants[@]}"; do
  name=${v%%|*}; flags=${v#*|}
  dir=$(mktemp -d "$OUT/data.XXXX")
  sport=$(free_port)
  # shellcheck disable=SC2086
  "$BIN" serve --data-dir "$dir" --feed-listen 127.0.0.1:0 --sub-listen "127.0.0.1:$sport" \
    --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --quiet $flags \
    > "$dir/server.out" 2> "$dir/server.err" &
  pid=$!
  PIDS+=("$pid")
  wait_port "$sport"
  # The order path's tables are written at start; give the threads a
  # moment to touch what they touch before reading (not a measurement of
  # time: RSS only grows here).
  for _ in 1 2 3 4 5; do rss_kib "$pid" >> "$dir/rss"; sleep 0.2; done
  rss=$(sort -n "$dir/rss" | tail -1)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf '| %s | %s |\n' "$name" "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')" >> "$OUT/results.md"
  rm -rf "$dir"
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ)" >> "$OUT/results.md"
cat "$OUT/results.md"
