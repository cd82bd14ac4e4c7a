#!/usr/bin/env bash
# perf/order_burst.sh — is the order port still answering while one
# connection floods it? (issue 26, item 6)
#
#   (a) burst: engine with the defaults (journal on, 2 simulated venues, 4 workers)
#       A ──25,000 NEW lines in one write──▶ ┐   BURSTS times, each once the
#       B ──PING every 1 ms, one at a time──▶ ├─ last one is fully answered
#       client: perf/order_burst.rs (CPU 1)  ┘  tickfan serve (CPU 0)
#       ping: B's PING round trip while a burst is being taken in (from A's
#       write until every order of it has its first answer, ACK or REJECT;
#       goal p99 ≤ 5 ms); ping_drain: after that, while the accepted orders
#       execute, until every order has its terminal reply.
#   (b) busy: the same engine but its one venue never answers (hang=1, lease 1 h)
#       F ──10,100 NEW at once──▶ queue full (10,000 queued + 4 at the workers)
#       F ──25,000 NEW at once every 250 ms (all refused)──▶ ┐
#       C ──NEW one at a time: REJECT … SYSTEM_BUSY; then PING──▶ every 1 ms, PROBES times
#       busy: the refusal's round trip (goal p99 ≤ 1 ms); ping_busy: C's PING.
#
# Goals: medians over REPS runs of each run's p99.
# Each engine gets its own --data-dir under the run's directory (the
# journal is on: every ACK waits for its fdatasync).
#
# Before each repetition the script waits while another benchmark runs
# (QUIET_PATTERN, a pgrep -f pattern; empty: do not wait).
#
# Usage: bash perf/order_burst.sh   (REPS=3, ORDERS=25000, BURSTS=10, PROBES=2000, BURST_EVERY=250ms,
#        OUT=perf/out/order-burst-<date>; BIN=path/to/tickfan and
#        CLIENT=path/to/order_burst skip the build; LABEL names BIN's runs,
#        default `after`; BEFORE_BIN=path adds a second binary, `before`,
#        run alternately with BIN in every repetition)
# Needs: cargo, python3. Every process it starts is stopped by its pid, also
# on Ctrl-C; everything talks to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
ORDERS=${ORDERS:-25000}
BURSTS=${BURSTS:-10}
PROBES=${PROBES:-2000}
FILL=${FILL:-10100}
BURST_EVERY=${BURST_EVERY:-250ms}
QUIET_PATTERN=${QUIET_PATTERN-'keeping_up.sh|publish_fanout|criterion'}
OUT=${OUT:-perf/out/order-burst-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "order_burst: python3 not found" >&2; exit 2; }

if [ -z "${BIN:-}" ] || [ -z "${CLIENT:-}" ]; then
  cargo build --release --quiet --bin tickfan --example order_burst
fi
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/tickfan}
CLIENT=${CLIENT:-${CARGO_TARGET_DIR:-target}/release/examples/order_burst}
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
trap stop_pids EXIT INT TERM

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "command: LABEL=${LABEL:-after} REPS=$REPS ORDERS=$ORDERS BURSTS=$BURSTS PROBES=$PROBES BURST_EVERY=$BURST_EVERY BIN=$BIN${BEFORE_BIN:+ BEFORE_BIN=$BEFORE_BIN} bash perf/order_burst.sh"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r)"
  echo "pinning: server ${SRV[*]:-none}, client ${CLI[*]:-none}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

# Starts `serve` (binary $1, run directory $2, extra flags after) on
# ephemeral ports; its order port is in ORD, its pid in SPID and PIDS.
serve() {
  local bin=$1 dir=$2; shift 2
  local feed sub adm
  ORD=$(free_port); feed=$(free_port); sub=$(free_port); adm=$(free_port)
  mkdir -p "$dir"
  "${SRV[@]}" "$bin" serve --order-listen "127.0.0.1:$ORD" --feed-listen "127.0.0.1:$feed" \
    --sub-listen "127.0.0.1:$sub" --admin-listen "127.0.0.1:$adm" \
    --data-dir "$dir/data" --quiet --report-json "$dir/engine.json" --shutdown-deadline 100ms \
    "$@" > "$dir/engine.out" 2> "$dir/engine.err" &
  SPID=$!
  PIDS+=("$SPID")
  wait_port "$ORD"
}

stop_serve() {
  kill "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  PIDS=()
  rm -rf "$1/data"
}

run() { # label bin rep
  local label=$1 bin=$2 rep=$3 d="$OUT/$1-r$3"
  # (a) the burst, default venues.
  serve "$bin" "$d/burst"
  "${CLI[@]}" "$CLIENT" burst "127.0.0.1:$ORD" --orders "$ORDERS" --bursts "$BURSTS" --prefix "r$rep" \
    > "$d/burst/client.txt" 2> "$d/burst/client.err" || echo "$label r$rep: burst client failed" >&2
  stop_serve "$d/burst"
  # (b) the queue held full: a venue that never answers.
  serve "$bin" "$d/busy" --bridge "name=stall,hang=1,hang_for=10m" --bridge-lease 1h
  "${CLI[@]}" "$CLIENT" busy "127.0.0.1:$ORD" --fill "$FILL" --probes "$PROBES" \
    --burst "$ORDERS" --burst-every "$BURST_EVERY" --prefix "r$rep" \
    > "$d/busy/client.txt" 2> "$d/busy/client.err" || echo "$label r$rep: busy client failed" >&2
  stop_serve "$d/busy"
  sed "s/^/$label r$rep /" "$d/burst/client.txt" "$d/busy/client.txt" >&2
}

labels=("${LABEL:-after}"); bins=("$BIN")
if [ -n "${BEFORE_BIN:-}" ]; then labels+=(before); bins+=("$BEFORE_BIN"); fi
for rep in $(seq 1 "$REPS"); do
  if [ -n "$QUIET_PATTERN" ]; then
    while pgrep -f "$QUIET_PATTERN" >/dev/null; do sleep 10; done
  fi
  # Alternate which binary goes first.
  for k in "${!labels[@]}"; do
    i=$(( (k + rep - 1) % ${#labels[@]} ))
    run "${labels[$i]}" "${bins[$i]}" "$rep"
  done
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2

python3 - "$OUT" "$REPS" "${labels[@]}" <<'PY' | tee "$OUT/summary.txt"
import statistics, sys
out, reps, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(open(f"{out}/machine.txt").read().strip())
series = ["ping", "ping_drain", "busy", "ping_busy"]
keys = ["p50_us", "p99_us", "p999_us", "max_us"]
def rows_list(path):
    try:
        text = open(path).read()
    except OSError:
        return []
    return [(n, dict(x.split("=", 1) for x in kv)) for n, *kv in (l.split() for l in text.splitlines() if l.strip())]
def parse(path):
    return dict(rows_list(path))
for label in labels:
    print(f"\n{label}:")
    per = {s: [] for s in series}
    for r in range(1, reps + 1):
        d = f"{out}/{label}-r{r}"
        rows = {**parse(f"{d}/burst/client.txt"), **parse(f"{d}/busy/client.txt")}
        bursts = [x for x in rows_list(f"{d}/burst/client.txt") if x[0] == "burst"]
        if bursts:
            f = lambda k: statistics.median(float(b[k]) for _, b in bursts)
            print(f"  run {r}: {len(bursts)} bursts of {bursts[0][1]['orders']} orders, each (median) written in {f('write_ms'):.1f} ms, "
                  f"every first answer after {f('first_answers_ms'):.1f} ms (ACK {f('acks'):.0f}, SYSTEM_BUSY {f('busy'):.0f}), "
                  f"every terminal reply after {f('terminal_ms'):.0f} ms")
        bb = rows.get("bursts", {})
        print(f"  run {r}, queue held full: {bb.get('rounds', '?')} bursts of {bb.get('orders_each', '?')} refused orders every "
              f"{bb.get('every_ms', '?')} ms beside the probes, each answered in {bb.get('answered_p50_ms', '?')} ms (p50)")
        for s in series:
            v = rows.get(s)
            if not v or v.get("n") == "0":
                print(f"    {s:12s} n=0")
                continue
            per[s].append(v)
            print(f"    {s:12s} n={v['n']:>5s}  " + "  ".join(f"{k[:-3]} {float(v[k]):9.1f} µs" for k in keys))
    print(f"  median over {reps} runs (µs):")
    for s in series:
        if not per[s]:
            continue
        med = {k: statistics.median(float(v[k]) for v in per[s]) for k in keys}
        print(f"    {s:12s} " + "  ".join(f"{k[:-3]} {med[k]:9.1f}" for k in keys))
PY
echo "order_burst: raw output in $OUT" >&2
