#!/usr/bin/env bash
# perf/sigstop.sh — the engine stopped (SIGSTOP) for STOP under load, then
# continued (SIGCONT): how long until subscribers hold the latest value of
# every symbol again, and does every order still end once? (issue 29 item 4)
#
#   perf/sigstop.rs (CPU 1):  feed F ──RATE ticks/s over SYMBOLS symbols──▶ ┐
#                             orders O ──ORATE NEW/s, replies counted──────▶ ├─ tickfan serve (CPU 0)
#                             readers R×READERS ◀──PSUBSCRIBE *────────────┘   journal on, 2 instant venues
#   WARMUP, then kill -STOP <engine pid>, STOP, kill -CONT, AFTER, drain.
#
# Figures (perf/sigstop.rs): catch-up = from just before SIGCONT until a
# reader holds, for every symbol, the last tick whose write had returned by
# then (the slowest of the readers); delivered latency of the messages
# before the stop, in the first and second second after SIGCONT and later;
# orders sent / ended once / missing / more than once. The issue's goal:
# catch-up within 1 s.
#
# Usage: bash perf/sigstop.sh   (REPS=3 STOP=5s WARMUP=3s AFTER=5s RATE=10000
#        SYMBOLS=1000 READERS=4 ORATE=200; OUT=perf/out/sigstop-<date>;
#        BIN=path/to/tickfan and CLIENT=path/to/sigstop skip the build)
# Needs: cargo, python3. Every process it starts is stopped by its pid, also
# on Ctrl-C (a stopped engine is continued first); everything is on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
STOP=${STOP:-5s}
WARMUP=${WARMUP:-3s}
AFTER=${AFTER:-5s}
RATE=${RATE:-10000}
SYMBOLS=${SYMBOLS:-1000}
READERS=${READERS:-4}
ORATE=${ORATE:-200}
OUT=${OUT:-perf/out/sigstop-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "sigstop: python3 not found" >&2; exit 2; }

if [ -z "${BIN:-}" ] || [ -z "${CLIENT:-}" ]; then
  cargo build --release --quiet --bin tickfan --example sigstop
fi
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/tickfan}
CLIENT=${CLIENT:-${CARGO_TARGET_DIR:-target}/release/examples/sigstop}
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
cleanup() {
  # A stopped engine does not act on SIGTERM until it runs again.
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  stop_pids
}
trap cleanup EXIT INT TERM

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "command: REPS=$REPS STOP=$STOP WARMUP=$WARMUP AFTER=$AFTER RATE=$RATE SYMBOLS=$SYMBOLS READERS=$READERS ORATE=$ORATE bash perf/sigstop.sh"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r)"
  echo "pinning: server ${SRV[*]:-none}, client ${CLI[*]:-none}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

V="latency=uniform:100us..1ms,transient=0,permanent=0,partial=0,reorder=0,dup=0,lose=0,hang=0"
for rep in $(seq 1 "$REPS"); do
  d=$OUT/rep$rep
  mkdir -p "$d"
  feed=$(free_port); sub=$(free_port); ord=$(free_port); adm=$(free_port)
  "${SRV[@]}" "$BIN" serve --feed-listen "127.0.0.1:$feed" --sub-listen "127.0.0.1:$sub" \
    --order-listen "127.0.0.1:$ord" --admin-listen "127.0.0.1:$adm" \
    --data-dir "$d/data" --bridge "name=v1,$V" --bridge "name=v2,$V" \
    --max-symbols $((SYMBOLS + 100)) --quiet --report-json "$d/engine.json" \
    > "$d/engine.out" 2> "$d/engine.err" &
  spid=$!
  PIDS+=("$spid")
  wait_port "$ord"; wait_port "$sub"; wait_port "$feed"
  "${CLI[@]}" "$CLIENT" --feed "127.0.0.1:$feed" --sub "127.0.0.1:$sub" --orders "127.0.0.1:$ord" \
    --pid "$spid" --stop "$STOP" --warmup "$WARMUP" --after "$AFTER" --rate "$RATE" \
    --symbols "$SYMBOLS" --readers "$READERS" --orate "$ORATE" > "$d/client.out" 2> "$d/client.err" || {
      echo "sigstop: rep $rep: the client failed: $(cat "$d/client.err")" >&2; }
  kill -CONT "$spid" 2>/dev/null || true
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  rm -rf "$d/data"
  echo "sigstop: rep $rep: $(grep '^catch_up_ms=' "$d/client.out" || echo 'no figure')" >&2
done

python3 - "$OUT" "$REPS" > "$OUT/results.md" <<'PY'
import re, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, reps + 1):
    try:
        text = open(f"{out}/rep{r}/client.out").read()
    except FileNotFoundError:
        continue
    kv = lambda line: dict(p.split("=", 1) for p in line.split() if "=" in p)
    head = kv(text.splitlines()[0]) if text else {}
    catch = re.search(r"^catch_up_ms=(\S+)", text, re.M)
    lat = {m.group(1): kv(m.group(0)) for m in re.finditer(r"^latency window=(\S+).*$", text, re.M)}
    orders = kv(re.search(r"^orders .*$", text, re.M).group(0)) if "orders " in text else {}
    rows.append((r, head, catch.group(1) if catch else "?", lat, orders))
print("| rep | stopped s | catch-up ms | latency before stop p99 ms | 1st s after CONT p50 / p99 / max ms | 2nd s p99 ms | later p99 ms | orders sent | ended once | missing | > once |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r, h, c, lat, o in rows:
    g = lambda w, k: lat.get(w, {}).get(k, "-")
    print(f"| {r} | {h.get('stopped_s','?')} | {c} | {g('before_stop','p99_ms')} | "
          f"{g('first_second','p50_ms')} / {g('first_second','p99_ms')} / {g('first_second','max_ms')} | "
          f"{g('second_second','p99_ms')} | {g('later','p99_ms')} | {o.get('sent','?')} | "
          f"{o.get('ended_once','?')} | {o.get('missing','?')} | {o.get('more_than_once','?')} |")
vals = [float(c) for _, _, c, _, _ in rows if c not in ("?", "never")]
if vals:
    print(f"\ncatch-up after SIGCONT: median {statistics.median(vals):.1f} ms, max {max(vals):.1f} ms over {len(vals)} runs (goal: within 1000 ms)")
PY
cat "$OUT/machine.txt" >> "$OUT/results.md"
cat "$OUT/results.md"
