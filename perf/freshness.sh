#!/usr/bin/env bash
# perf/freshness.sh — freshness of normal and slow subscribers, tickfan
# (with and without --sub-max-lag) and redis-server side by side, measured
# with the project's own tools in one run of this script.
#
#   replay --stamp --record-sent sent.csv ──▶ server ──▶ subscribe --sent sent.csv
#
# Freshness (see tools/freshness.rs): for every tick sent, the time from its
# intended send time until a connection first holds that symbol at that tick
# or newer; ticks never held by the end count at the end of the run.
#
# Scenarios (each DUR seconds of load at 50,000 ticks/s, 1,000 Zipf symbols):
#   all   10 normal subscribers + 2 slow readers at SLOW_RATE B/s, PSUBSCRIBE *
#   s50   the same 10 normal subscribers; 2 slow readers SUBSCRIBE to 50 symbols
# Each with the slow readers' receive buffer at the OS default and at 4 KiB
# (subscribe --slow-rcvbuf 4096).
# Servers: tickfan (default --sub-max-lag 50ms, --sub-pending-order fifo),
# tickfan-sqrt (--sub-pending-order sqrt-rate), tickfan-nolag (--sub-max-lag 0,
# the behaviour before), redis (scenario `all`; it disconnects the slow readers
# whatever their receive buffer), tickfan-before (the defaults of another
# build, BEFORE_BIN=path/to/tickfan: an earlier commit side by side).
#
# Usage: bash perf/freshness.sh   (DUR=20; OUT=perf/out/fresh-<date>; RUNS="...")
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-20}
OUT=${OUT:-perf/out/fresh-$(date -u +%Y%m%d-%H%M%S)}
SLOW_RATE=${SLOW_RATE:-65536}
RUNS=${RUNS:-"tickfan:all:0 tickfan:all:4096 tickfan-sqrt:all:0 tickfan-sqrt:all:4096 tickfan-nolag:all:0 redis:all:0 tickfan:s50:0 tickfan:s50:4096 tickfan-sqrt:s50:0 tickfan-sqrt:s50:4096"}
mkdir -p "$OUT"
BIN=${BIN:-target/release/tickfan}
[ -x "$BIN" ] || cargo build --release --quiet
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
cleanup() {
  stop_pids
}
trap cleanup EXIT INT TERM


TICKS=$OUT/ticks.csv
gen_ticks "$BIN" "$TICKS"
# 50 symbols for the s50 readers: the first 50 distinct ones of the file.
SYMS50=$(first_symbols "$TICKS" 50)

ROWS=$OUT/rows.tsv
: > "$ROWS"

run() { # server scenario rcvbuf
  local server=$1 scen=$2 rcv=$3 name="$1-$2-rcv$3" pport sport spid fmt
  local logs=$OUT/$name
  mkdir -p "$logs"
  pport=$(free_port); sport=$pport
  case $server in
    tickfan|tickfan-nolag|tickfan-sqrt|tickfan-before)
      sport=$(free_port)
      local lag=50ms order=fifo bin=$BIN
      [ "$server" = tickfan-before ] && bin=${BEFORE_BIN:?tickfan-before needs BEFORE_BIN}
      [ "$server" = tickfan-nolag ] && lag=0s
      [ "$server" = tickfan-sqrt ] && order=sqrt-rate
      "${SRV[@]}" "$bin" serve --no-journal --data-dir "$logs/data" --feed-listen "127.0.0.1:$pport" --sub-listen "127.0.0.1:$sport" \
        --admin-listen 127.0.0.1:0 --dedup-capacity 1000 --quiet --sub-max-lag "$lag" --sub-pending-order "$order" --report-json "$logs/engine.json" \
        > "$logs/server.out" 2> "$logs/server.err" &
      spid=$!; fmt=csv ;;
    redis)
      start_redis "$pport" "$logs/redis.log" SRV
      spid=$REDIS_PID; fmt=redis-publish ;;
  esac
  [ "$server" = redis ] || PIDS+=("$spid")
  wait_port "$sport"
  local common=(--to "127.0.0.1:$sport" --duration "$((DUR + 2))s" --quiet --sent "$logs/sent.csv")
  local sub2=""
  if [ "$scen" = all ]; then
    "${CLI[@]}" "$BIN" subscribe "${common[@]}" -k 10 --slow 2 --slow-bytes-per-sec "$SLOW_RATE" \
      --slow-rcvbuf "$rcv" --json "$logs/sub.json" > "$logs/sub.out" 2> "$logs/sub.err" &
  else
    "${CLI[@]}" "$BIN" subscribe "${common[@]}" -k 10 --json "$logs/sub.json" > "$logs/sub.out" 2> "$logs/sub.err" &
    sub2=1
  fi
  local subpid=$! subpid2=""
  PIDS+=("$subpid")
  wait_line "$logs/sub.err" "subscribed to"
  if [ -n "$sub2" ]; then
    "${CLI[@]}" "$BIN" subscribe "${common[@]}" -k 0 --slow 2 --slow-bytes-per-sec "$SLOW_RATE" \
      --slow-rcvbuf "$rcv" --channel "$SYMS50" --json "$logs/sub50.json" > "$logs/sub50.out" 2> "$logs/sub50.err" &
    subpid2=$!
    PIDS+=("$subpid2")
    wait_line "$logs/sub50.err" "subscribed to"
  fi
  local rss0 rss1
  rss0=$(rss_kib "$spid")
  "${CLI[@]}" "$BIN" replay "$TICKS" --to "127.0.0.1:$pport" --send-as "$fmt" --stamp --record-sent "$logs/sent.csv" \
    --rate 50000 --loops 1000 --duration "${DUR}s" --no-progress 2> "$logs/replay.err" || true
  wait "$subpid" || true
  [ -n "$subpid2" ] && { wait "$subpid2" || true; }
  rss1=$(rss_kib "$spid")
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  local slowjson=$logs/sub.json
  [ -n "$sub2" ] && slowjson=$logs/sub50.json
  python3 - "$logs/sub.json" "$slowjson" "$server" "$scen" "$rcv" "$rss0" "$rss1" >> "$ROWS" <<'PY'
import json, sys
sub, slow, server, scen, rcv, rss0, rss1 = sys.argv[1:]
n = {c["class"]: c for c in json.load(open(sub))["classes"]}["normal"]
s = {c["class"]: c for c in json.load(open(slow))["classes"]}["slow"]
ms = lambda p: round(p / 1000, 1)
fn, fs = n["freshness"]["freshness"], s["freshness"]["freshness"]
row = [scen, server, rcv if rcv != "0" else "default",
       fn["p50_us"], fn["p99_us"], fn["p999_us"], ms(fn["max_us"]), n["disconnects"], n["gaps"],
       ms(fs["p50_us"]), ms(fs["p99_us"]), ms(fs["p999_us"]), ms(fs["max_us"]),
       s["freshness"]["unserved_at_end"], s["messages"], s["disconnects"],
       round((int(rss1) - int(rss0)) / 1024, 1)]
print("\t".join(str(x) for x in row))
PY
  rm -f "$logs/sent.csv"
  echo "freshness: $name done" >&2
}

for r in $RUNS; do
  IFS=: read -r server scen rcv <<< "$r"
  run "$server" "$scen" "$rcv"
done
rm -f "$TICKS"

{
  echo "| scenario | server | slow rcvbuf | normal fresh p50 µs | p99 µs | p99.9 µs | max ms | normal disconnects | normal seq gaps | slow fresh p50 ms | p99 ms | p99.9 ms | max ms | slow ticks unserved at end | slow msgs | slow disconnects | RSS growth MiB |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk -F'\t' '{ printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; print "" }' "$ROWS"
  echo
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ), DUR=${DUR}s, 50,000 ticks/s, slow readers ${SLOW_RATE} B/s, pinning: ${SRV[*]:-none} (server) / ${CLI[*]:-none} (tools)"
} > "$OUT/results.md"
cat "$OUT/results.md"
