#!/usr/bin/env bash
# perf/soak.sh — long run: is anything growing, drifting or getting lost?
#
#   replay fx-quotes.csv (looped, --stamp, 50k/s) ──▶ tickfan serve ──▶ subscribe (10 + 2 slow)
#   orders (1,000/s, 4 connections) ──────────────▶   │ bridges: sim1 with a 10 s outage
#                                                      │ at 120 s, sim2; 2 % transient failures
#   sampler: VmRSS of the engine every second          └─▶ admin /report at the end
#
# Goals (a benchmark, not a test): RSS growth after warm-up (first 60 s)
# under 5 MB; engine p99 per minute stable; zero lost orders (the orders
# tool exits 1 unless every order got exactly one terminal reply); the
# accounting balanced at the end (ticks received = valid + poison;
# published + conflated = valid; orders accepted = done + dead + expired).
# Prints p99 / p99.9 per minute of engine_e2e and order_e2e (all, small and
# large lanes; "-" for a lane with none), and per subscriber class (normal,
# slow) the whole run's e2e p50/p99/p99.9/max.
#
# Usage: bash perf/soak.sh      (DUR=600 seconds by default; OUT=perf/out/soak-<date>)
# Needs: cargo, python3, ../shared/data/fx-quotes.csv. Every process it
# starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-600}
OUT=${OUT:-perf/out/soak-$(date -u +%Y%m%d-%H%M%S)}
DATA=../shared/data/fx-quotes.csv
[ -f "$DATA" ] || { echo "soak: $DATA not found" >&2; exit 2; }
mkdir -p "$OUT"
cargo build --release --quiet
BIN=target/release/tickfan

. perf/lib.sh
cleanup() {
  stop_pids
}
trap cleanup EXIT INT TERM

FEED=$(free_port); SUB=$(free_port); ORD=$(free_port); ADM=$(free_port)
"$BIN" serve --feed-listen 127.0.0.1:$FEED --sub-listen 127.0.0.1:$SUB \
  --order-listen 127.0.0.1:$ORD --admin-listen 127.0.0.1:$ADM \
  --report-interval 60s --log-dir "$OUT" --dlq-file "$OUT/dlq.jsonl" \
  --bridge "name=sim1,transient=0.02,down=120s+10s" --bridge "name=sim2,transient=0.02" \
  > "$OUT/engine.out" 2> "$OUT/engine.err" &
ENG=$!; PIDS+=("$ENG")
wait_port $FEED; wait_port $SUB; wait_port $ORD; wait_port $ADM

"$BIN" subscribe --to 127.0.0.1:$SUB --subscribers 10 --slow 2 --duration $((DUR + 20))s \
  --quiet --log-dir "$OUT" --json "$OUT/subscribers.json" > "$OUT/subscribe.out" 2>&1 &
SUBS=$!; PIDS+=("$SUBS")
sleep 1
python3 - "$ENG" "$OUT/rss.csv" "$DUR" <<'PY' &
import sys, time
pid, path, dur = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "w") as f:
    f.write("t_s,rss_kib\n")
    start = time.time()
    while time.time() - start < dur + 5:
        try:
            rss = next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1]
        except (OSError, StopIteration):
            break
        f.write(f"{time.time() - start:.0f},{rss}\n"); f.flush()
        time.sleep(1)
PY
SAMPLER=$!; PIDS+=("$SAMPLER")
"$BIN" orders --to 127.0.0.1:$ORD --rate 1000 --connections 4 --count $((DUR * 1000)) \
  --id-prefix soak > "$OUT/orders.out" 2>&1 &
ORDERS=$!; PIDS+=("$ORDERS")
"$BIN" replay "$DATA" --to 127.0.0.1:$FEED --rate 50000 --loops 1000 --duration ${DUR}s \
  --stamp --no-progress --log-dir "$OUT" > "$OUT/replay.out" 2>&1 || true
ORDERS_RC=0; wait $ORDERS || ORDERS_RC=$?
python3 - "$ADM" "$OUT/report.json" <<'PY'
import sys, urllib.request, time
time.sleep(2)
open(sys.argv[2], "wb").write(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/report").read())
PY
kill -TERM "$ENG"; wait "$ENG" || true
wait "$SUBS" || true
kill "$SAMPLER" 2>/dev/null || true
"$BIN" report "$OUT" > "$OUT/report.txt" 2>&1 || true

python3 - "$OUT" "$ORDERS_RC" <<'PY'
import json, sys, csv
out, orders_rc = sys.argv[1], int(sys.argv[2])
rows = [(int(r["t_s"]), int(r["rss_kib"])) for r in csv.DictReader(open(f"{out}/rss.csv"))]
warm_at = min(60, rows[-1][0] // 4) if rows else 0
warm = [k for t, k in rows if t >= warm_at]
growth = (max(warm) - warm[0]) / 1024 if warm else float("nan")
r = json.load(open(f"{out}/report.json"))
c = r["counters"]; f = c["feed"]; p = c["publish"]; o = c["orders"]; g = o["gateway"]
print(f"duration {rows[-1][0] if rows else 0} s; RSS at {warm_at} s {warm[0]/1024:.1f} MiB, peak after {max(warm)/1024:.1f} MiB, growth {growth:.2f} MiB (goal < 5)")
print(f"ticks received {c['ticks_received']} = valid {f['ticks_valid']} + poison {c['poison_total']} + conflated at the feed {f['ticks_conflated']}: {c['ticks_received'] == f['ticks_valid'] + c['poison_total'] + f['ticks_conflated']}")
print(f"published {p['published']} + conflated {p['conflated']} = {p['published'] + p['conflated']} vs valid + conflated at the feed {f['ticks_valid'] + f['ticks_conflated']} (taken so far)")
print(f"orders accepted {g['accepted']} = done {o['done_total']} + dead {o['dead_total']} + expired {o['expired']} + in flight {g['in_flight']}: {g['accepted'] == o['done_total'] + o['dead_total'] + o['expired'] + g['in_flight']}")
print(f"orders tool exit {orders_rc} (0 = every order got exactly one terminal reply)")
print("RSS (MiB) per minute: " + " ".join(f"{t}s:{k/1024:.1f}" for t, k in rows if t % 60 == 0))
try:
    eng = {s["tag"]: s for s in json.load(open(f"{out}/summary.json"))["series"] if s["source"] == "engine"}
    for tag in ("engine_e2e", "order_e2e", "order_e2e_small", "order_e2e_large"):
        unit, div = ("ms", 1000) if tag.startswith("order_e2e") else ("µs", 1)
        s = eng.get(tag)
        if not s or not s.get("count"):
            print(f"{tag} p99 / p99.9 per minute ({unit}): -")
            continue
        full = [i for i in s["intervals"] if i["length_s"] >= 30]
        print(f"{tag} p99 / p99.9 per minute ({unit}): "
              + ", ".join(f"{i['p99_us'] / div:.0f} / {i['p999_us'] / div:.0f}" for i in full))
except (OSError, KeyError, ValueError) as e:
    print(f"per-minute p99 / p99.9 not available: {e}")
try:
    cls = {c["class"]: c for c in json.load(open(f"{out}/subscribers.json"))["classes"]}
    for name in ("normal", "slow"):
        c = cls.get(name)
        if c is None:
            print(f"subscribers {name}: e2e p50 / p99 / p99.9 / max µs: -")
            continue
        l = c["latency"]
        print(f"subscribers {name}: e2e p50 / p99 / p99.9 / max µs: {l['p50_us']:.0f} / {l['p99_us']:.0f} / "
              f"{l['p999_us']:.0f} / {l['max_us']:.0f} ({c['messages']} msgs, {c['disconnects']} disconnects)")
except (OSError, KeyError, ValueError) as e:
    print(f"subscriber p99 / p99.9 not available: {e}")
PY
grep -E "^series |engine/engine_e2e|engine/order_e2e|subscribers/e2e" "$OUT/report.txt" || true
echo "files in $OUT"
