#!/usr/bin/env bash
# perf/order_retry_storm.sh — a retry storm against the real binary, with and
# without the retry quota (issue 16, item 7, second half).
#
#   tickfan orders (open loop, steady RATE/s) ──▶ tickfan serve ──▶ v1 (down from 1 s for 5 s), v2
#                                                   4 small workers, 2 ms venues
#
# Attempt k of order s goes to venue (s + k − 1) mod 2, so while v1 is down
# every other new order fails its first attempt (after the venue's 2 ms) and
# waits for its retry (≤ 100 ms, full jitter), which goes to v2: a storm of
# due retries competing with the steady stream of new orders for the four
# workers. RATE is chosen near the workers' capacity during the outage
# (1.5 attempts per order × 2 ms / 4 workers), so who goes first matters.
#
# Modes: `quota` = --retry-share 0.5 (the default: while new orders wait,
#        retries hold at most 2 of the 4 workers), `noquota` = --retry-share
#        1.0 (due retries always first, the rule before the quota).
# The run sends for SECS seconds from ~0.3 s after the engine starts, so the
# outage (1 s .. 6 s) covers most of it. Figures per run:
#   client: completion (due → terminal) p50/p99/p99.9 of every order, and of
#           the orders DONE at their first attempt (the new orders) (tickfan orders);
#   engine (--report-json), p99 and p99.9 each: order_queue_wait_small (new
#   orders: queued → taken by a worker), order_retry_wait (retries: due →
#   taken), order_e2e_small (line received → terminal reply, every order),
#   and the large lane's order_queue_wait_large / order_e2e_large ("-" when
#   no large order ran).
# Runs alternate quota, noquota, … (ROUNDS rounds); the summary gives medians.
#
# Usage: bash perf/order_retry_storm.sh   (ROUNDS=3, RATE=1200, SECS=6,
#        OUT=perf/out/order-retry-storm-<date>)
# Needs: cargo, python3. Every process it starts is stopped by its pid, also
# on Ctrl-C; everything talks to 127.0.0.1; no journal is written.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
RATE=${RATE:-1200}
SECS=${SECS:-6}
OUT=${OUT:-perf/out/order-retry-storm-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "order_retry_storm: python3 not found" >&2; exit 2; }

cargo build --release --quiet --locked --bin tickfan
BIN=${CARGO_TARGET_DIR:-target}/release/tickfan

. perf/lib.sh
cleanup() {
  stop_pids
}
trap cleanup EXIT INT TERM


{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "cpu: $(lscpu 2>/dev/null | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}') x $(nproc)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rate: $RATE/s for $SECS s; venues 2 ms, v1 down 1 s..6 s; 4 small workers"
} | tee "$OUT/machine.txt" >&2

ROWS="$OUT/rows.tsv"
: > "$ROWS"

run() { # mode round
  local mode=$1 round=$2 name="$1-r$2" share
  local logs="$OUT/$name" oport fport sport aport spid
  mkdir -p "$logs"
  case $mode in
    quota) share=0.5 ;;
    noquota) share=1.0 ;;
  esac
  oport=$(free_port); fport=$(free_port); sport=$(free_port); aport=$(free_port)
  local v="latency=fixed:2ms,transient=0,permanent=0,partial=0,reorder=0,dup=0,lose=0,hang=0"
  "$BIN" serve --order-listen "127.0.0.1:$oport" --feed-listen "127.0.0.1:$fport" \
    --sub-listen "127.0.0.1:$sport" --admin-listen "127.0.0.1:$aport" \
    --no-journal --order-workers 4 --large-workers 1 --retry-share "$share" \
    --dedup-capacity 100000 \
    --bridge "name=v1,$v,down=1s+5s" --bridge "name=v2,$v" \
    --quiet --report-json "$logs/engine.json" > "$logs/server.out" 2> "$logs/server.err" &
  spid=$!
  PIDS+=("$spid")
  wait_port "$oport"
  "$BIN" orders --to "127.0.0.1:$oport" --rate "$RATE" --count $((RATE * SECS)) \
    --connections 4 --qty fixed:1 --id-prefix "$name-" > "$logs/orders.out" 2> "$logs/orders.err" || true
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 - "$logs" "$mode" "$round" >> "$ROWS" <<'PY'
import json, re, sys
logs, mode, rnd = sys.argv[1:]
out = open(f"{logs}/orders.out").read()
# tickfan orders prints "p50 X ms  p99 Y ms  p99.9 Z ms  max W ms  (n N)" (or "n/a").
PCT = r":\s+p50 ([\d.]+) ms\s+p99 ([\d.]+) ms\s+p99\.9 ([\d.]+) ms"
m = re.search(r"completion \(due → terminal\)" + PCT, out)
c50, c99, c999 = (float(x) for x in m.groups()) if m else (float("nan"),) * 3
f = re.search(r"DONE at the first attempt" + PCT, out)
f50, f99, f999 = (float(x) for x in f.groups()) if f else (float("nan"),) * 3
once = "exactly one terminal reply" in out
eng = json.load(open(f"{logs}/engine.json"))
st = {s["stage"]: s for s in eng["stages"]}
pq = lambda name, key: round(st.get(name, {}).get(key, float("nan")) / 1000, 2)
p99 = lambda name: pq(name, "p99_us")
p999 = lambda name: pq(name, "p999_us")
n = lambda name: st.get(name, {}).get("count", 0)
# The large lane: "-" when no large order ran (stage absent or empty).
lg = lambda name, key: pq(name, key) if n(name) > 0 else "-"
print("\t".join(map(str, [mode, rnd, c50, c99, p99("order_queue_wait_small"),
    p99("order_retry_wait"), n("order_retry_wait"), p99("order_e2e_small"), once,
    f50, f99,
    c999, f999, p999("order_queue_wait_small"), p999("order_retry_wait"), p999("order_e2e_small"),
    lg("order_queue_wait_large", "p99_us"), lg("order_queue_wait_large", "p999_us"),
    lg("order_e2e_large", "p99_us"), lg("order_e2e_large", "p999_us")])))
PY
  tail -1 "$ROWS" >&2
}

for round in $(seq 1 "$ROUNDS"); do
  run quota "$round"
  run noquota "$round"
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2

python3 - "$ROWS" > "$OUT/summary.md" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print("| mode | runs | completion p50 / p99 / p99.9 ms (all orders) | **new-order completion p50 / p99 / p99.9 ms** (DONE at the first attempt) | new-order queue wait p99 / p99.9 ms | retry wait p99 / p99.9 ms (retries) | order_e2e_small p99 / p99.9 ms | large-lane queue wait p99 / p99.9 ms | order_e2e_large p99 / p99.9 ms | one terminal each |")
print("|---|---:|---|---|---:|---:|---:|---:|---:|---|")
for mode in ("quota", "noquota"):
    g = [r for r in rows if r[0] == mode]
    if not g:
        continue
    med = lambda i: statistics.median(float(r[i]) for r in g)
    # Large-lane columns hold "-" in runs with no large order.
    def medl(i):
        v = [float(r[i]) for r in g if len(r) > i and r[i] != "-"]
        return f"{statistics.median(v):.2f}" if v else "-"
    print(f"| {mode} | {len(g)} | {med(2):.2f} / {med(3):.2f} / {med(11):.2f} | {med(9):.2f} / {med(10):.2f} / {med(12):.2f}"
          f" | {med(4):.2f} / {med(13):.2f} | {med(5):.2f} / {med(14):.2f} ({med(6):.0f}) | {med(7):.2f} / {med(15):.2f}"
          f" | {medl(16)} / {medl(17)} | {medl(18)} / {medl(19)} | {all(r[8] == 'True' for r in g)} |")
print()
print("raw rows (mode round c50_ms c99_ms queue_wait_p99_ms retry_wait_p99_ms retries e2e_p99_ms one_terminal first_try_c50_ms first_try_c99_ms"
      " c999_ms first_try_c999_ms queue_wait_p999_ms retry_wait_p999_ms e2e_p999_ms"
      " large_queue_wait_p99_ms large_queue_wait_p999_ms large_e2e_p99_ms large_e2e_p999_ms):")
for r in rows:
    print("  " + "  ".join(r))
PY
cat "$OUT/summary.md"
echo "order_retry_storm: raw output in $OUT" >&2
