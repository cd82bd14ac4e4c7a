#!/usr/bin/env bash
# perf/order_capacity.sh — a load step against elastic workers and venues
# with a max_inflight limit: do the workers follow, does the capacity view's
# drain-time estimate match the drain that follows?
#
#   tickfan orders 1k/s (0-5 s) ─┐
#   tickfan orders 5k/s (5-10 s) ─┼─▶ tickfan serve ──▶ venues v1, v2: 2 ms fixed latency,
#   tickfan orders 1k/s (10-20 s) ┘    small lane 2..16 workers      max_inflight=4 each
#                                      (8 calls at once × 2 ms = ~4,000 orders/s: the 5k/s
#                                       phase builds a backlog, the last 1k/s phase drains it)
#   sampler: GET /metrics every 100 ms ─▶ samples.csv (workers, depth, rates, drain estimate)
#
# Reports (summary.txt): worker counts over time; small-order completion
# p99 and p99.9 per phase (each phase is its own `tickfan orders` run: sent → terminal)
# against --order-slo (1 s); the engine's whole-run order_e2e and
# order_queue_wait p99/p99.9 per lane (small, large: "-" without large
# orders; --report-json); the drain-time estimate 0.5 s after the step
# down against the measured drain (step down → first empty queue).
#
# Usage: bash perf/order_capacity.sh   (OUT=perf/out/order-capacity-<date>; RUNS=1)
# Needs: cargo, python3, curl. Loopback only; every process it starts is
# stopped by its pid, also on Ctrl-C; the run ends by itself (~30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-perf/out/order-capacity-$(date -u +%Y%m%d-%H%M%S)}
RUNS=${RUNS:-1}
mkdir -p "$OUT"
cargo build --release --quiet --bin tickfan
BIN=${CARGO_TARGET_DIR:-target}/release/tickfan

. perf/lib.sh
cleanup() {
  stop_pids
  PIDS=()
}
trap cleanup EXIT INT TERM

run_once() {
  local R=$1 D="$OUT/run$1"
  mkdir -p "$D"
  local FEED SUB ORD ADM
  FEED=$(free_port); SUB=$(free_port); ORD=$(free_port); ADM=$(free_port)
  RUST_LOG=info "$BIN" serve --feed-listen 127.0.0.1:$FEED --sub-listen 127.0.0.1:$SUB \
    --order-listen 127.0.0.1:$ORD --admin-listen 127.0.0.1:$ADM --no-journal \
    --order-workers-min 2 --order-workers-max 16 --order-worker-idle 3s --order-slo 1s \
    --bridge "name=v1,latency=fixed:2ms,transient=0,fills=1,reorder=0,dup=0,max_inflight=4" \
    --bridge "name=v2,latency=fixed:2ms,transient=0,fills=1,reorder=0,dup=0,max_inflight=4" \
    --report-interval 1s --report-json "$D/engine.json" --duration 40s > "$D/engine.out" 2> "$D/engine.err" &
  local ENG=$!; PIDS+=("$ENG")
  wait_port $ORD; wait_port $ADM
  python3 - "$ADM" "$D/samples.csv" 32 <<'PY' &
import sys, time, urllib.request
adm, path, dur = sys.argv[1], sys.argv[2], float(sys.argv[3])
want = {
    'tickfan_order_workers{lane="small"}': "workers",
    'tickfan_order_workers_busy{lane="small"}': "busy",
    'tickfan_order_lane_depth{lane="small"}': "depth",
    'tickfan_order_lane_arrival_rate{lane="small"}': "arrival",
    'tickfan_order_lane_service_rate{lane="small"}': "service",
    'tickfan_order_lane_utilisation_ratio{lane="small"}': "util",
    'tickfan_order_lane_drain_seconds{lane="small"}': "drain_s",
}
cols = list(want.values())
start = time.time()
with open(path, "w") as f:
    f.write("t_s," + ",".join(cols) + "\n")
    while time.time() - start < dur:
        t = time.time() - start
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{adm}/metrics", timeout=2).read().decode()
        except OSError:
            break
        row = {}
        for line in body.splitlines():
            name, _, v = line.rpartition(" ")
            if name in want:
                row[want[name]] = v
        f.write(f"{t:.2f}," + ",".join(row.get(c, "") for c in cols) + "\n")
        f.flush()
        time.sleep(0.1)
PY
  local SAMP=$!; PIDS+=("$SAMP")
  # t0 of the step: the sampler's start (within a few ms of it).
  local T0; T0=$(date +%s.%N)
  date -u +%s.%N > "$D/t0"
  "$BIN" orders --to 127.0.0.1:$ORD --rate 1000 --count 5000 --qty fixed:1 --connections 4 \
    --id-prefix "r${R}a" > "$D/phase1.txt" 2>&1 &
  local P1=$!; PIDS+=("$P1")
  sleep 5
  "$BIN" orders --to 127.0.0.1:$ORD --rate 5000 --count 25000 --qty fixed:1 --connections 4 \
    --id-prefix "r${R}b" > "$D/phase2.txt" 2>&1 &
  local P2=$!; PIDS+=("$P2")
  sleep 5
  echo "$(python3 -c "import time; print(time.time() - $T0)")" > "$D/step_down_s"
  "$BIN" orders --to 127.0.0.1:$ORD --rate 1000 --count 10000 --qty fixed:1 --connections 4 \
    --id-prefix "r${R}c" > "$D/phase3.txt" 2>&1 &
  local P3=$!; PIDS+=("$P3")
  wait "$P1" "$P2" "$P3" || echo "run $R: an orders run reported lost or failed orders" >&2
  wait "$SAMP" || true
  kill "$ENG" 2>/dev/null || true
  wait "$ENG" 2>/dev/null || true
  PIDS=()
}

for r in $(seq 1 "$RUNS"); do run_once "$r"; done

python3 - "$OUT" "$RUNS" <<'PY' | tee "$OUT/summary.txt"
import csv, json, re, statistics, sys, os
out, runs = sys.argv[1], int(sys.argv[2])
def completion(path):
    """(p99, p99.9) ms of the completion line of `tickfan orders`:
    "p50 X ms  p99 Y ms  p99.9 Z ms  max W ms  (n N)" (or "n/a")."""
    text = open(path).read()
    m = re.search(r"completion \(due → terminal\):\s+p50 ([\d.]+) ms\s+p99 ([\d.]+) ms\s+p99\.9 ([\d.]+) ms", text)
    return (float(m.group(2)), float(m.group(3))) if m else (float("nan"), float("nan"))
def engine_lanes(path):
    """The engine's whole-run p99 / p99.9 ms per lane from --report-json; "-" for a
    lane (or a file) with no value."""
    try:
        st = {s["stage"]: s for s in json.load(open(path))["stages"]}
    except (OSError, ValueError, KeyError):
        st = {}
    def pq(name):
        s = st.get(name)
        if not s or not s.get("count"):
            return "- / -"
        return f"{s['p99_us'] / 1000:.1f} / {s['p999_us'] / 1000:.1f}"
    return {stage: {lane: pq(f"{stage}_{lane}") for lane in ("small", "large")}
            for stage in ("order_e2e", "order_queue_wait")}
print("order capacity load step: 1k/s 5 s → 5k/s 5 s → 1k/s 10 s; 2 venues 2 ms, max_inflight=4 each; small lane 2..16 workers; SLO 1 s")
est_err = []
for r in range(1, runs + 1):
    d = f"{out}/run{r}"
    rows = list(csv.DictReader(open(f"{d}/samples.csv")))
    step = float(open(f"{d}/step_down_s").read())
    num = lambda v: float(v) if v not in ("", "+Inf") else float("inf")
    print(f"\nrun {r}: step down at t = {step:.2f} s")
    print("  workers over time (t_s:workers, every 1 s): " + " ".join(
        f"{float(x['t_s']):.0f}:{x['workers']}" for x in rows if abs(float(x['t_s']) % 1) < 0.1))
    print("  max workers: %d" % max(int(float(x["workers"] or 0)) for x in rows))
    for ph, name in ((1, "1k/s"), (2, "5k/s"), (3, "1k/s after")):
        v, v999 = completion(f"{d}/phase{ph}.txt")
        print(f"  phase {ph} ({name}): small-order completion p99 {v:.1f} ms  p99.9 {v999:.1f} ms  ({'within' if v <= 1000 else 'OVER'} the 1 s SLO)")
    eng = engine_lanes(f"{d}/engine.json")
    print("  engine, whole run, p99 / p99.9 ms: order_e2e (received → terminal) small %s, large %s;"
          " order_queue_wait small %s, large %s" % (
              eng["order_e2e"]["small"], eng["order_e2e"]["large"],
              eng["order_queue_wait"]["small"], eng["order_queue_wait"]["large"]))
    peak = max(num(x["depth"]) for x in rows)
    after = [x for x in rows if float(x["t_s"]) >= step]
    probe = next((x for x in after if float(x["t_s"]) >= step + 0.5), None)
    if probe is None:
        print("  no sample after the step")
        continue
    pt, pd = float(probe["t_s"]), num(probe["depth"])
    later = [x for x in after if float(x["t_s"]) > pt]
    # Drained: the backlog below 1 % of what stood at the probe (the queue
    # of a 1k/s flow through 16 workers is a handful, not 0, at any instant);
    # also shown: the first sample with an empty queue.
    low = next((float(x["t_s"]) for x in later if num(x["depth"]) <= 0.01 * pd), None)
    empty = next((float(x["t_s"]) for x in later if num(x["depth"]) == 0), None)
    if low is None:
        print("  the backlog did not drain within the run")
        continue
    est = num(probe["drain_s"])
    measured = low - pt
    err = (est - measured) / measured if measured > 0 else float("nan")
    est_err.append(abs(err))
    print(f"  backlog peak {peak:.0f}; at step+0.5 s (t {pt:.2f}): depth {pd:.0f}, arrival {float(probe['arrival']):.0f}/s, service {float(probe['service']):.0f}/s, estimate {est:.2f} s")
    print(f"  measured: below 1 % of that backlog after {measured:.2f} s → estimate error {err*100:+.0f} %;"
          f" first empty queue after {(empty - pt) if empty else float('nan'):.2f} s"
          f" ({(est - (empty - pt)) / (empty - pt) * 100 if empty else float('nan'):+.0f} %)")
    for l in open(f"{d}/engine.err"):
        if "order_drain_over_slo" in l:
            print("  " + l.strip())
if est_err:
    print(f"\nmedian |estimate error| over {len(est_err)} run(s): {statistics.median(est_err)*100:.0f} %")
PY
