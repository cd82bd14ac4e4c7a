#!/usr/bin/env bash
# perf/l1_syscalls.sh — where a server's and its readers' time goes at L1
# of perf/keeping_up.sh (50,000 ticks/s, 1,000 Zipf symbols, 10 readers of
# one client thread, open-loop sender): for each server in SERVERS, one
# run with `perf stat` on the server over 8 s of its middle, counting its
# system calls by kind (`sendto`/`write` per subscriber write, `recvfrom`/
# `read`, `epoll_wait` per turn), context switches and CPU; and how busy
# each core was (server on CPU 0, sender and readers on CPU 1).
#
# Usage: bash perf/l1_syscalls.sh   (SERVERS="redis tickfan"; BIN=target/release/tickfan;
#        BEFORE_BIN=path adds server tickfan-before; OUT=perf/out/l1-syscalls-<date>)
# Needs `perf` with the syscalls tracepoints (linux-perf) and redis-server.
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd /work/main

SERVERS=${SERVERS:-"redis tickfan"}
RATE=${RATE:-2000}; K=${K:-500}
OUT=${OUT:-perf/out/l1-syscalls-$(date -u +%Y%m%d-%H%M%S)}
BIN=${BIN:-target/release/tickfan}
[ -x "$BIN" ] || cargo build --release --quiet
command -v perf >/dev/null || { echo "l1_syscalls: perf not found (apt-get install linux-perf)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "l1_syscalls: redis-server not found" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "l1_syscalls: needs 2 cores (server on CPU 0, tools on CPU 1)" >&2; exit 2; }
mkdir -p "$OUT"
SRV=(taskset -c 0); CLI=(taskset -c 1)
. perf/lib.sh
trap stop_pids EXIT INT TERM
TICKS=$OUT/ticks.csv
gen_ticks "$BIN" "$TICKS"
EVENTS=raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield,syscalls:sys_enter_clock_nanosleep,context-switches,task-clock

for server in $SERVERS; do
  logs=$OUT/$server
  mkdir -p "$logs"
  pport=$(free_port); sport=$(free_port)
  case $server in
    redis)
      sport=$pport
      start_redis "$pport" "$logs/redis.log" SRV
      spid=$REDIS_PID; fmt=redis-publish ;;
    tickfan*)
      bin=$BIN
      [ "$server" = tickfan-before ] && bin=${BEFORE_BIN:?tickfan-before needs BEFORE_BIN}
      "${SRV[@]}" "$bin" serve --no-journal --data-dir "$logs/data" --feed-listen "127.0.0.1:$pport" \
        --sub-listen "127.0.0.1:$sport" --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
        --dedup-capacity 1000 --quiet > "$logs/server.out" 2> "$logs/server.err" &
      spid=$!; PIDS+=("$spid"); fmt=csv ;;
    *) echo "l1_syscalls: unknown server $server" >&2; exit 2 ;;
  esac
  wait_port "$sport"
  "${CLI[@]}" "$BIN" subscribe --to "127.0.0.1:$sport" --duration 22s --quiet --sent "$logs/sent.csv" \
    -k "$K" --json "$logs/sub.json" > "$logs/sub.out" 2> "$logs/sub.err" &
  subpid=$!; PIDS+=("$subpid")
  wait_line "$logs/sub.err" "subscribed to"
  "${CLI[@]}" "$BIN" replay "$TICKS" --to "127.0.0.1:$pport" --send-as "$fmt" --stamp \
    --record-sent "$logs/sent.csv" --rate "$RATE" --loops 1000 --duration 20s --no-progress \
    2> "$logs/replay.err" &
  rpid=$!; PIDS+=("$rpid")
  sleep 5 # into the run's middle (a measuring window, not a synchronisation)
  c0=$(core_jiffies cpu0); t0=$(core_jiffies cpu1); s0=$(cpu_ticks "$subpid")
  perf stat -e "$EVENTS" -p "$subpid" -o "$logs/perf-stat-sub.txt" -- sleep 8 &
  ppid=$!
  perf stat -e "$EVENTS" -p "$spid" -o "$logs/perf-stat.txt" -- sleep 8
  wait $ppid
  c1=$(core_jiffies cpu0); t1=$(core_jiffies cpu1); s1=$(cpu_ticks "$subpid")
  wait "$rpid" || true; wait "$subpid" || true
  kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
  rm -f "$logs/sent.csv"
  {
    echo "== $server"
    grep -E 'sys_enter|context-switches|task-clock' "$logs/perf-stat.txt" | tr -d , \
      | awk '$2 == "msec" {printf "  %-40s %12s ms\n", $3, $1; next} {printf "  %-40s %12s  (%s/s)\n", $2, $1, int($1/8)}'
    echo "  -- readers"
    grep -E 'sys_enter|context-switches|task-clock' "$logs/perf-stat-sub.txt" | tr -d , \
      | awk '$2 == "msec" {printf "  %-40s %12s ms\n", $3, $1; next} {printf "  %-40s %12s  (%s/s)\n", $2, $1, int($1/8)}'
    echo "$c0 $c1" | awk '{printf "  server core (CPU 0) busy %.0f %%\n", 100*($3-$1)/($4-$2)}'
    echo "$t0 $t1" | awk '{printf "  tools core (CPU 1) busy %.0f %%\n", 100*($3-$1)/($4-$2)}'
    echo "$s0 $s1" | awk -v hz="$(getconf CLK_TCK)" '{printf "  readers process CPU %.0f %%\n", 100*($2-$1)/hz/8}'
    python3 -c "
import json
for c in json.load(open('$logs/sub.json'))['classes']:
    f = c['freshness']['freshness']
    print('  freshness', c['class'], 'p50', f['p50_us'], 'p99', f['p99_us'], 'p99.9', f['p999_us'], 'µs')
"
  } | tee -a "$OUT/summary.txt"
done
rm -f "$TICKS"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ)" | tee -a "$OUT/summary.txt"
