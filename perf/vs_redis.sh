#!/usr/bin/env bash
# perf/vs_redis.sh — end-to-end benchmark: tickfan vs redis-server pub/sub vs
# a raw loopback floor, measured in ONE run with the SAME subscriber client.
#
#   replay (open loop, --stamp) ──▶ server ──▶ subscribe (one mio thread:
#   ts_ns = intended send time      │           K normal + S slow connections,
#                                   │           PSUBSCRIBE *, HDR e2e latency)
#   server = tickfan serve   (replay sends feed CSV lines)
#          | redis-server    (replay sends pipelined PUBLISH symbol payload)
#          | tickfan forward (replay sends ready-made pmessage frames; the
#                             forwarder copies bytes, no processing: the floor)
#
# Scenarios (each ~DUR seconds of load):
#   a) 50,000 ticks/s, 1,000 symbols, 10 subscribers
#   b) the same + 2 slow subscribers (64 KiB/s each)       [no floor: its writes block]
#   c) maximum rate (replay unpaced), 4 subscribers
# Per run: delivered messages/s (all normal subscribers together), end-to-end
# p50/p99/p99.9/max (normal) and p99/p99.9 (slow; "-" without), the server's
# RSS (at load start, at the end, peak = VmHWM) and CPU seconds (utime+stime
# from /proc/PID/stat), slow-subscriber disconnects (seen by the client; for
# Redis also the closes its log reports, normal subscribers included).
#
# Usage: bash perf/vs_redis.sh            (DUR=10 by default; OUT=perf/out/<date>)
# Needs: cargo, redis-server (Debian package), python3 (to read the JSON).
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-10}
SCENARIOS=${SCENARIOS:-"a b c"}
# SERVERS="tickfan" runs only those; TICKFAN_FLAGS="--idle spin" adds serve
# flags (e.g. to compare idle policies and pinning in one session).
# BEFORE_BIN=path/to/an/older/tickfan adds the server "before" (that binary's
# serve, same flags; list it in SERVERS, e.g. SERVERS="before tickfan redis").
# PIN=1: the server on CPU 0, the load tools (replay, subscribe) on CPU 1, so
# each server gets the same one core and the clients never take it from
# it. PIN=0: let the scheduler place everything.
PIN=${PIN:-1}
OUT=${OUT:-perf/out/$(date -u +%Y%m%d-%H%M%S)}
SLOW_RATE=${SLOW_RATE:-65536}
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "vs_redis: redis-server not found (apt-get install redis-server)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "vs_redis: python3 not found" >&2; exit 2; }

cargo build --release --quiet
BIN=target/release/tickfan
SRV=(); CLI=()
if [ "$PIN" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
cleanup() {
  stop_pids
}
trap cleanup EXIT INT TERM

cpu_s() { # utime + stime in seconds
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"
}

echo "vs_redis: generating ticks (1,000 symbols, seed 1)" >&2
gen_ticks "$BIN" "$OUT/ticks.csv"

ROWS="$OUT/rows.tsv"
: > "$ROWS"

run() { # server scenario
  local server=$1 scen=$2 name="$1-$2" rate k slow fmt spid
  case $scen in
    a) rate=50000; k=10; slow=0 ;;
    b) rate=50000; k=10; slow=2 ;;
    c) rate=0;     k=4;  slow=0 ;;
  esac
  local pport sport logs="$OUT/$name"
  mkdir -p "$logs"
  pport=$(free_port); sport=$pport
  case $server in
    tickfan|before)
      local sbin=$BIN
      if [ "$server" = before ]; then
        sbin=${BEFORE_BIN:?vs_redis: SERVERS lists before but BEFORE_BIN is not set}
      fi
      sport=$(free_port)
      # No orders in this benchmark: the order path's dedup table (48 MiB
      # reserved at start by default) is sized down so RSS compares pub/sub;
      # no journal, and the order and admin ports ephemeral (so runs beside
      # another engine on this host do not collide on 9103/9104).
      "${SRV[@]}" "$sbin" serve --feed-listen "127.0.0.1:$pport" --sub-listen "127.0.0.1:$sport" \
        --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --no-journal \
        --dedup-capacity 1000 --quiet --report-interval 1s --log-dir "$logs" --report-json "$logs/engine.json" \
        ${TICKFAN_FLAGS:-} > "$logs/server.out" 2> "$logs/server.err" &
      spid=$!; fmt=csv ;;
    redis)
      start_redis "$pport" "$logs/redis.log" SRV
      spid=$REDIS_PID; fmt=redis-publish ;;
    floor)
      sport=$(free_port)
      start_forward "$BIN" "$pport" "$sport" "$logs" SRV
      spid=$FORWARD_PID; fmt=pmessage ;;
  esac
  case $server in redis|forward|floor) ;; *) PIDS+=("$spid") ;; esac
  wait_port "$sport"
  "${CLI[@]}" "$BIN" subscribe --to "127.0.0.1:$sport" -k "$k" --slow "$slow" --slow-bytes-per-sec "$SLOW_RATE" \
    --duration "$((DUR + 2))s" --log-dir "$logs" --json "$logs/sub.json" --quiet \
    > "$logs/sub.out" 2> "$logs/sub.err" &
  local subpid=$!
  PIDS+=("$subpid")
  wait_line "$logs/sub.err" "subscribed to"
  local rss0 cpu0
  rss0=$(rss_kib "$spid"); cpu0=$(cpu_s "$spid")
  # Sample the server's RSS while the load runs.
  ( while kill -0 "$spid" 2>/dev/null; do rss_kib "$spid" 2>/dev/null || true; sleep 0.5; done ) \
    > "$logs/rss.samples" &
  local sampler=$!
  PIDS+=("$sampler")
  "${CLI[@]}" "$BIN" replay "$OUT/ticks.csv" --to "127.0.0.1:$pport" --send-as "$fmt" --stamp \
    --rate "$rate" --loops 1000 --duration "${DUR}s" --no-progress --log-dir "$logs" \
    2> "$logs/replay.err" || true
  wait "$subpid" || true
  local rss1 hwm cpu1 disc_log=""
  rss1=$(rss_kib "$spid"); hwm=$(hwm_kib "$spid"); cpu1=$(cpu_s "$spid")
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  if [ "$server" = redis ]; then
    disc_log=$(grep -c "overcoming of output buffer limits" "$logs/redis.log" || true)
  fi
  "$BIN" report "$logs" > "$logs/report.txt" 2>&1 || true
  local rssmax
  rssmax=$(sort -n "$logs/rss.samples" | tail -1)
  python3 - "$logs/sub.json" "$scen" "$server" "$rss0" "$rss1" "$rssmax" "$hwm" "$cpu0" "$cpu1" "$disc_log" "$logs/replay.err" >> "$ROWS" <<'EOF'
import json, sys, re
sub, scen, server, rss0, rss1, rssmax, hwm, cpu0, cpu1, disc_log, replay_err = sys.argv[1:]
r = json.load(open(sub))
cls = {c["class"]: c for c in r["classes"]}
n = cls["normal"]; l = n["latency"]
s = cls.get("slow")
sent = re.search(r"sent (\d+) lines", open(replay_err).read())
sent = int(sent.group(1)) if sent else 0
mib = lambda kib: float(kib or 0) / 1024
row = [scen, server, sent, n["messages"], round(n["delivered_per_s"]), l["p50_us"], l["p99_us"], l["p999_us"], l["max_us"],
       round(mib(rss0), 1), round(mib(rssmax), 1), round(mib(rss1), 1), round(mib(hwm), 1),
       round(float(cpu1) - float(cpu0), 2), round(float(cpu1), 2), n["gaps"], n["disconnects"],
       s["messages"] if s else "-", s["latency"]["p99_us"] if s else "-", s["latency"]["p999_us"] if s else "-",
       s["disconnects"] if s else "-", disc_log or "-"]
print("\t".join(str(x) for x in row))
EOF
  echo "vs_redis: $name done" >&2
}

for scen in $SCENARIOS; do
  for server in ${SERVERS:-floor tickfan redis}; do
    [ "$scen" = b ] && [ "$server" = floor ] && continue
    run "$server" "$scen"
  done
done

{
  echo "| scenario | server | ticks sent | msgs delivered (normal subs) | delivered msg/s | e2e p50 µs | p99 µs | p99.9 µs | max µs | RSS at load start MiB | RSS max sampled MiB | RSS at end MiB | peak RSS (VmHWM) MiB | CPU s under load | CPU s total | seq gaps (conflated) | normal disconnects | slow msgs | slow e2e p99 µs | slow e2e p99.9 µs | slow disconnects (client) | slow disconnects (redis log) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  awk -F'\t' '{ printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; print "" }' "$ROWS"
} > "$OUT/results.md"

{
  echo
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, Linux $(uname -r)"
  echo "tools: $(rustc --version), $(redis-server --version | cut -d' ' -f1-3)"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ), DUR=${DUR}s, slow subscribers read ${SLOW_RATE} B/s, pinning: ${SRV[*]:-none} (server) / ${CLI[*]:-none} (load tools)"
  echo "raw files: $OUT (per run: sub.json, *.hlog, report.txt, plots)"
} >> "$OUT/results.md"
cat "$OUT/results.md"
