#!/usr/bin/env bash
# perf/stalled_fsync.sh — subscriber freshness while the order journal's
# fdatasync stalls (issue 29 item 3): the same engine, ticks, subscribers
# and order flow, with every journal sync FAULT_MS slower (the fault
# injection TICKFAN_FAULT_FSYNC_MS, off by default) and without, in one
# run of this script.
#
#   replay --stamp --record-sent (CPU 1) ──▶ ┐
#   orders --rate ORATE (CPU 1) ───────────▶ ├─ tickfan serve (CPU 0), journal on,
#   subscribe --sent, K readers (CPU 1) ◀──┘   2 instant venues, --order-queue-capacity QUEUE
#
# Load: RATE ticks/s over 1,000 Zipf symbols (perf/lib.sh's tick file), K
# readers PSUBSCRIBE *; ORATE orders/s over 4 connections. Modes, in turn,
# REPS times: `none` (every sync as the disk does it) and `fsync` (every
# sync FAULT_MS longer: the journal thread is blocked, orders wait for
# their ACK, the held ones bounded by the lane's QUEUE; past it SYSTEM_BUSY).
# Reported per run: the readers' freshness (tools/freshness.rs: per sent
# tick, until a reader holds that symbol at that tick or newer) p50, p99,
# p99.9 and max; orders accepted and rejected (by reason), the ACK latency
# p50/p99 (client: due → ACK); whether every order got exactly one
# terminal reply; the engine's RSS growth during the run.
#
# Usage: bash perf/stalled_fsync.sh   (DUR=20 REPS=2 RATE=10000 K=10 ORATE=1000
#        QUEUE=1000 FAULT_MS=2000; OUT=perf/out/stalled-fsync-<date>; BIN=path
#        skips the build)
# Needs: cargo, python3. Every process it starts is stopped by its pid, also
# on Ctrl-C; everything is on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-20}
REPS=${REPS:-2}
RATE=${RATE:-10000}
K=${K:-10}
ORATE=${ORATE:-1000}
QUEUE=${QUEUE:-1000}
FAULT_MS=${FAULT_MS:-2000}
OUT=${OUT:-perf/out/stalled-fsync-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "stalled_fsync: python3 not found" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet --bin tickfan
fi
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/tickfan}
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
trap stop_pids EXIT INT TERM

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "command: DUR=$DUR REPS=$REPS RATE=$RATE K=$K ORATE=$ORATE QUEUE=$QUEUE FAULT_MS=$FAULT_MS bash perf/stalled_fsync.sh"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r)"
  echo "data fs: $(df -T "$OUT" | awk 'NR==2 {print $1, $2}')"
  echo "pinning: server ${SRV[*]:-none}, tools ${CLI[*]:-none}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

TICKS=$OUT/ticks.csv
gen_ticks "$BIN" "$TICKS"
ROWS=$OUT/rows.tsv
: > "$ROWS"
V="latency=0ms,transient=0,permanent=0,partial=0,reorder=0,dup=0,lose=0,hang=0"

run() { # mode rep
  local mode=$1 rep=$2 d=$OUT/$1-r$2 feed sub ord adm spid fault=0
  mkdir -p "$d"
  [ "$mode" = fsync ] && fault=$FAULT_MS
  feed=$(free_port); sub=$(free_port); ord=$(free_port); adm=$(free_port)
  TICKFAN_FAULT_FSYNC_MS=$fault "${SRV[@]}" "$BIN" serve --feed-listen "127.0.0.1:$feed" \
    --sub-listen "127.0.0.1:$sub" --order-listen "127.0.0.1:$ord" --admin-listen "127.0.0.1:$adm" \
    --data-dir "$d/data" --bridge "name=v1,$V" --bridge "name=v2,$V" \
    --order-queue-capacity "$QUEUE" --dedup-capacity $((ORATE * (DUR + 10))) \
    --quiet --report-json "$d/engine.json" > "$d/engine.out" 2> "$d/engine.err" &
  spid=$!
  PIDS+=("$spid")
  wait_port "$sub"; wait_port "$ord"
  "${CLI[@]}" "$BIN" subscribe --to "127.0.0.1:$sub" -k "$K" --duration "$((DUR + 2))s" --quiet \
    --sent "$d/sent.csv" --json "$d/sub.json" > "$d/sub.out" 2> "$d/sub.err" &
  local subpid=$!
  PIDS+=("$subpid")
  wait_line "$d/sub.err" "subscribed to"
  local rss0 rss1
  rss0=$(rss_kib "$spid")
  "${CLI[@]}" "$BIN" orders --to "127.0.0.1:$ord" --rate "$ORATE" --count $((ORATE * DUR)) \
    --connections 4 --qty fixed:1 --id-prefix "$mode-$rep-" > "$d/orders.out" 2> "$d/orders.err" &
  local opid=$!
  PIDS+=("$opid")
  "${CLI[@]}" "$BIN" replay "$TICKS" --to "127.0.0.1:$feed" --stamp --record-sent "$d/sent.csv" \
    --rate "$RATE" --loops 1000 --duration "${DUR}s" --no-progress 2> "$d/replay.err" || true
  wait "$subpid" || true
  wait "$opid" || true
  rss1=$(rss_kib "$spid")
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  rm -rf "$d/data" "$d/sent.csv"
  python3 - "$d" "$mode" "$rep" "$rss0" "$rss1" >> "$ROWS" <<'PY'
import json, re, sys
d, mode, rep, rss0, rss1 = sys.argv[1:]
n = {c["class"]: c for c in json.load(open(f"{d}/sub.json"))["classes"]}["normal"]
f = n["freshness"]["freshness"]
o = open(f"{d}/orders.out").read()
acc = re.search(r"accepted (\d+)", o)
rej = re.search(r"rejected: (.*)", o)
ack = re.search(r"acceptance \(due → ACK\):\s+p50 ([\d.]+) ms\s+p99 ([\d.]+) ms", o)
once = "yes" if "every order got exactly one terminal reply" in o else "NO"
row = [mode, rep, f["p50_us"], f["p99_us"], f["p999_us"], f["max_us"], n["freshness"]["unserved_at_end"],
       acc.group(1) if acc else "?", rej.group(1).strip() if rej else "?",
       ack.group(1) if ack else "?", ack.group(2) if ack else "?", once,
       round((int(rss1) - int(rss0)) / 1024, 1)]
print("\t".join(str(x) for x in row))
PY
  tail -1 "$ROWS" >&2
}

for rep in $(seq 1 "$REPS"); do
  for mode in none fsync; do
    run "$mode" "$rep"
  done
done
rm -f "$TICKS"

python3 - "$ROWS" > "$OUT/results.md" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
ms = lambda us: f"{float(us) / 1000:.2f}"
print("Per run (freshness of the readers, ms; orders: accepted, rejected by reason, ACK latency ms, one terminal reply each):\n")
print("| mode | rep | freshness p50 | p99 | p99.9 | max | unserved | accepted | rejected | ACK p50 | ACK p99 | one terminal each | RSS growth MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join([r[0], r[1], ms(r[2]), ms(r[3]), ms(r[4]), ms(r[5])] + r[6:]) + " |")
print("\nMedian over repetitions (freshness ms):\n")
print("| mode | runs | p50 | p99 | p99.9 |")
print("|---|---|---|---|---|")
for mode in ("none", "fsync"):
    v = [r for r in rows if r[0] == mode]
    if v:
        med = lambda i: ms(statistics.median(float(r[i]) for r in v))
        print(f"| {mode} | {len(v)} | {med(2)} | {med(3)} | {med(4)} |")
PY
cat "$OUT/machine.txt" >> "$OUT/results.md"
cat "$OUT/results.md"
