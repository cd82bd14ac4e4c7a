#!/usr/bin/env bash
# perf/keeping_up.sh — freshness of readers that keep up, at three loads,
# tickfan (default flags) against redis-server and the raw byte forwarder
# (`tickfan forward`), all measured in one run of this script; plus, in
# the same run, tickfan with slow readers beside the normal ones.
#
#   replay --stamp --record-sent ──▶ server ──▶ subscribe --sent
#   (open loop, CPU 1)               (CPU 0)    (ONE process, ONE mio thread
#                                                for all readers of a load, CPU 1)
#
# Loads (1,000 Zipf symbols, every reader PSUBSCRIBE *):
#   L1  50,000 ticks/s,  10 readers
#   L2  10,000 ticks/s, 100 readers
#   L3   2,000 ticks/s, 500 readers
# Servers at each load: forward (the floor: bytes copied, nothing else),
# redis (redis-server, PUBLISH), tickfan (serve, default flags).
# Slow-reader runs at L1, tickfan only (the forwarder blocks on a slow
# reader, Redis disconnects it), 2 readers at SLOW_RATE B/s with the OS
# default receive buffer, beside the 10 normal readers:
#   tickfan-slow    the slow readers PSUBSCRIBE * in the normal readers' process
#   tickfan-slow50  the slow readers SUBSCRIBE to 50 symbols, own process
# Freshness (tools/freshness.rs): per sent tick, the first time a reader
# holds that symbol at that tick or newer, minus the intended send time.
#
# Each run is REPS times (interleaved), and the summary gives the median
# over the repetitions of each class's p99 and p99.9.
#
# PAUSE=AT_MS:FOR_MS stops the readers' client process (SIGSTOP) AT_MS
# after the sender starts, for FOR_MS, then lets it go on (SIGCONT): the
# whole client thread away at once, as a descheduled one is, at the same
# moment for every server (e.g. PAUSE=300:150, in its readers' first
# 256 KiB at L3). Several, comma-separated, in time order:
# PAUSE=5:20,50:100 (at L2: a hiccup in the readers' first 25 KB, then
# 100 ms away before they have taken 64 KiB).
#
# Usage: bash perf/keeping_up.sh   (DUR=20 REPS=3; OUT=perf/out/keepup-<date>;
#        LOADS="L1 L2 L3"; SERVERS="forward redis tickfan tickfan-slow tickfan-slow50";
#        BEFORE_BIN=path adds servers tickfan-before, tickfan-before-slow and
#        tickfan-before-slow50: another build's defaults, e.g. main's; ALT_BIN=path
#        likewise adds tickfan-alt, tickfan-alt-slow and tickfan-alt-slow50: a third
#        build in the same runs)
# tickfan runs with RUST_LOG=tickfan::publish=debug (SERVER_LOG overrides):
# its pacing events are counted per run at the end.
# Besides the server's CPU, each run records the readers' process's CPU and
# how busy the tools' core was (CPU 1 when pinned): at L1 that core, which
# the sender shares with the readers, is what saturates first.
# LOGS=1 also writes, per run, the readers' freshness per class per second
# (`freshness.hlog`; the 50-symbol readers' in `slow50/`) and the
# sender's lag behind its schedule per second (`replay.hlog`): where in
# the run a tail came from (`tickfan report <run dir>` reads them).
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-20}
REPS=${REPS:-3}
OUT=${OUT:-perf/out/keepup-$(date -u +%Y%m%d-%H%M%S)}
SLOW_RATE=${SLOW_RATE:-65536}
LOADS=${LOADS:-"L1 L2 L3"}
SERVERS=${SERVERS:-"forward redis tickfan tickfan-slow tickfan-slow50"}
mkdir -p "$OUT"
command -v redis-server >/dev/null || { echo "keeping_up: redis-server not found (apt-get install redis-server)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "keeping_up: python3 not found" >&2; exit 2; }
BIN=${BIN:-target/release/tickfan}
[ -x "$BIN" ] || cargo build --release --quiet
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi
TOOLS_CORE=cpu; [ ${#CLI[@]} -gt 0 ] && TOOLS_CORE=cpu1

. perf/lib.sh
trap stop_pids EXIT INT TERM

# Stops process $2 (SIGSTOP) at each AT_MS of $1 (AT_MS:FOR_MS,...; ms
# from now) for FOR_MS, then continues it; continues it also when stopped
# itself (the trap), so no reader is left stopped.
pause_client() { # at_ms:for_ms[,at_ms:for_ms...] pid
  trap 'kill -CONT "$2" 2>/dev/null; exit 0' TERM INT
  local at for now=0 p
  for p in ${1//,/ }; do
    at=${p%%:*}; for=${p##*:}
    [ "$at" -gt "$now" ] && sleep "$(awk -v m="$((at - now))" 'BEGIN { print m / 1000 }')"
    kill -STOP "$2" 2>/dev/null || return 0
    sleep "$(awk -v m="$for" 'BEGIN { print m / 1000 }')"
    kill -CONT "$2" 2>/dev/null || true
    now=$((at + for))
  done
}

TICKS=$OUT/ticks.csv
gen_ticks "$BIN" "$TICKS"
SYMS50=$(first_symbols "$TICKS" 50)

ROWS=$OUT/rows.tsv
: > "$ROWS"

run() { # load server rep
  local load=$1 server=$2 rep=$3 rate k pport sport spid fmt
  case $load in
    L1) rate=50000; k=10 ;;
    L2) rate=10000; k=100 ;;
    L3) rate=2000;  k=500 ;;
  esac
  local logs=$OUT/$load-$server-$rep
  mkdir -p "$logs"
  pport=$(free_port); sport=$(free_port)
  case $server in
    tickfan*)
      local bin=$BIN
      case $server in
        tickfan-before*) bin=${BEFORE_BIN:?tickfan-before needs BEFORE_BIN} ;;
        tickfan-alt*) bin=${ALT_BIN:?tickfan-alt needs ALT_BIN} ;;
      esac
      RUST_LOG=${SERVER_LOG:-tickfan::publish=debug} "${SRV[@]}" "$bin" serve --no-journal --data-dir "$logs/data" --feed-listen "127.0.0.1:$pport" \
        --sub-listen "127.0.0.1:$sport" --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
        --dedup-capacity 1000 --quiet --report-json "$logs/engine.json" ${SERVE_FLAGS:-} \
        > "$logs/server.out" 2> "$logs/server.err" &
      spid=$!; fmt=csv ;;
    redis)
      sport=$pport
      start_redis "$pport" "$logs/redis.log" SRV
      spid=$REDIS_PID; fmt=redis-publish ;;
    forward)
      start_forward "$BIN" "$pport" "$sport" "$logs" SRV
      spid=$FORWARD_PID; fmt=pmessage ;;
  esac
  case $server in redis|forward|floor) ;; *) PIDS+=("$spid") ;; esac
  wait_port "$sport"
  local common=(--to "127.0.0.1:$sport" --duration "$((DUR + 2))s" --quiet --sent "$logs/sent.csv")
  local hlogs=()
  [ "${LOGS:-0}" = 1 ] && { hlogs=(--log-dir "$logs"); mkdir -p "$logs/slow50"; }
  local slow=0 subpid2=""
  case $server in *-slow) slow=2 ;; esac
  "${CLI[@]}" "$BIN" subscribe "${common[@]}" -k "$k" --slow "$slow" --slow-bytes-per-sec "$SLOW_RATE" \
    --json "$logs/sub.json" "${hlogs[@]}" > "$logs/sub.out" 2> "$logs/sub.err" &
  local subpid=$!
  PIDS+=("$subpid")
  wait_line "$logs/sub.err" "subscribed to"
  if [[ $server == *-slow50 ]]; then
    "${CLI[@]}" "$BIN" subscribe "${common[@]}" -k 0 --slow 2 --slow-bytes-per-sec "$SLOW_RATE" \
      --channel "$SYMS50" --json "$logs/sub50.json" ${hlogs[@]:+--log-dir "$logs/slow50"} > "$logs/sub50.out" 2> "$logs/sub50.err" &
    subpid2=$!
    PIDS+=("$subpid2")
    wait_line "$logs/sub50.err" "subscribed to"
  fi
  local rss0 rss1 cpu0 cpu1 t0 t1 cli0 cli1 core0 core1 t2
  rss0=$(rss_kib "$spid")
  cpu0=$(cpu_ticks "$spid"); t0=$(date +%s.%N)
  cli0=$(cpu_ticks "$subpid"); core0=$(core_jiffies "$TOOLS_CORE")
  local pauser=""
  if [ -n "${PAUSE:-}" ]; then
    pause_client "$PAUSE" "$subpid" &
    pauser=$!
    PIDS+=("$pauser")
  fi
  "${CLI[@]}" "$BIN" replay "$TICKS" --to "127.0.0.1:$pport" --send-as "$fmt" --stamp \
    --record-sent "$logs/sent.csv" --rate "$rate" --loops 1000 --duration "${DUR}s" --no-progress "${hlogs[@]}" \
    2> "$logs/replay.err" || true
  # The readers' share up to the sender's end (they then idle to exit).
  cli1=$(cpu_ticks "$subpid" 2>/dev/null || echo "$cli0"); core1=$(core_jiffies "$TOOLS_CORE"); t2=$(date +%s.%N)
  [ -n "$pauser" ] && { wait "$pauser" || true; }
  wait "$subpid" || true
  [ -n "$subpid2" ] && { wait "$subpid2" || true; }
  rss1=$(rss_kib "$spid")
  cpu1=$(cpu_ticks "$spid"); t1=$(date +%s.%N)
  local cpu_pct
  cpu_pct=$(awk -v a="$cpu0" -v b="$cpu1" -v s="$t0" -v e="$t1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.0f", 100 * (b - a) / hz / (e - s) }')
  local cli_pct core_pct
  cli_pct=$(awk -v a="$cli0" -v b="$cli1" -v s="$t0" -v e="$t2" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.0f", 100 * (b - a) / hz / (e - s) }')
  core_pct=$(echo "$core0 $core1" | awk '{ printf "%.0f", ($4 > $2) ? 100 * ($3 - $1) / ($4 - $2) : 0 }')
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  local slowjson=""
  case $server in
    *-slow) slowjson=$logs/sub.json ;;
    *-slow50) slowjson=$logs/sub50.json ;;
  esac
  python3 - "$logs/sub.json" "$slowjson" "$load" "$server" "$rep" "$rss0" "$rss1" "$cpu_pct" "$cli_pct" "$core_pct" >> "$ROWS" <<'PY'
import json, sys
sub, slow, load, server, rep, rss0, rss1, cpu, cli, core = sys.argv[1:]
n = {c["class"]: c for c in json.load(open(sub))["classes"]}["normal"]
fn = n["freshness"]["freshness"]
row = [load, server, rep, fn["p50_us"], fn["p99_us"], fn["p999_us"], fn["max_us"],
       n["freshness"]["unserved_at_end"], n["disconnects"], n["gaps"]]
if slow:
    s = {c["class"]: c for c in json.load(open(slow))["classes"]}["slow"]
    fs = s["freshness"]["freshness"]
    row += [fs["p50_us"], fs["p99_us"], fs["p999_us"], fs["max_us"], s["disconnects"]]
else:
    row += ["-"] * 5
row.append(round((int(rss1) - int(rss0)) / 1024, 1))
row += [cpu, cli, core]
print("\t".join(str(x) for x in row))
PY
  rm -f "$logs/sent.csv"
  echo "keeping_up: $load $server rep $rep done" >&2
}

for rep in $(seq 1 "$REPS"); do
  for load in $LOADS; do
    for server in $SERVERS; do
      case $server in *-slow*) [ "$load" = L1 ] || continue ;; esac
      run "$load" "$server" "$rep"
    done
  done
done
rm -f "$TICKS"

python3 - "$ROWS" > "$OUT/results.md" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
ms = lambda us: f"{float(us) / 1000:.2f}"
print("Per run (freshness in ms; normal = readers that keep up, slow = 64 KiB/s readers):\n")
print("| load | server | rep | normal p50 | p99 | p99.9 | max | unserved | disconnects | seq gaps | slow p50 | slow p99 | slow p99.9 | slow max | slow disconnects | RSS growth MiB | server CPU % | readers' CPU % | tools' core busy % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    cells = [ms(r[i]) if i in (3, 4, 5, 6) else r[i] for i in range(10)]
    cells += [ms(x) if x != "-" and i < 4 else x for i, x in enumerate(r[10:15])]
    cells.append(r[15])
    cells += [r[i] if len(r) > i else "-" for i in (16, 17, 18)]
    print("| " + " | ".join(cells) + " |")
print("\nMedian over repetitions (ms):\n")
print("| load | server | runs | normal p99 | normal p99.9 | slow p99 | slow p99.9 | p99 ÷ forward's | p99 ÷ redis's | server CPU % | readers' CPU % | tools' core busy % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
groups = {}
for r in rows:
    groups.setdefault((r[0], r[1]), []).append(r)
med = lambda v: statistics.median(v) if v else float("nan")
p99 = {k: med([float(r[4]) for r in v]) for k, v in groups.items()}
for (load, server), v in groups.items():
    n99, n999 = p99[(load, server)], med([float(r[5]) for r in v])
    s = [r for r in v if r[11] != "-"]
    s99 = ms(med([float(r[11]) for r in s])) if s else "-"
    s999 = ms(med([float(r[12]) for r in s])) if s else "-"
    fw, rd = p99.get((load, "forward")), p99.get((load, "redis"))
    rf = f"{n99 / fw:.2f}" if fw else "-"
    rr = f"{n99 / rd:.2f}" if rd else "-"
    cm = []
    for i in (16, 17, 18):
        c = [float(r[i]) for r in v if len(r) > i]
        cm.append(f"{med(c):.0f}" if c else "-")
    print(f"| {load} | {server} | {len(v)} | {ms(n99)} | {ms(n999)} | {s99} | {s999} | {rf} | {rr} | {' | '.join(cm)} |")
PY
{
  echo
  echo "Pacing events in tickfan's debug log (paced / by the backlog check / re-trials failed / unpaced / of them caught up for 1 s / trials ended apart from their stall's crowd / spared in a shared stall), per run:"
  for d in "$OUT"/L*-tickfan*-*; do
    [ -f "$d/server.err" ] || continue
    printf '  %s: %s / %s / %s / %s / %s / %s / %s\n' "$(basename "$d")" "$(grep -c ': paced (' "$d/server.err" || true)" \
      "$(grep -c 'paced (backlog' "$d/server.err" || true)" "$(grep -c 're-trial failed' "$d/server.err" || true)" \
      "$(grep -c ': unpaced' "$d/server.err" || true)" "$(grep -c 'it took all it was offered' "$d/server.err" || true)" \
      "$(grep -c 'apart from the readers paced with it' "$d/server.err" || true)" \
      "$(grep -c ': spared (' "$d/server.err" || true)"
  done
  echo
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "tools: $(redis-server --version | cut -d' ' -f1-3)"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ), DUR=${DUR}s, REPS=$REPS, slow readers ${SLOW_RATE} B/s, pinning: ${SRV[*]:-none} (server) / ${CLI[*]:-none} (tools), client pause: ${PAUSE:-none}"
} >> "$OUT/results.md"
cat "$OUT/results.md"
