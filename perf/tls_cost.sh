#!/usr/bin/env bash
# perf/tls_cost.sh — what TLS on the subscriber port costs in freshness
# (issue 29, item 5): readers that keep up, plaintext against TLS, runs
# interleaved.
#
#   replay --stamp --record-sent ──▶ tickfan serve ──▶ subscribe --sent [--tls-ca]
#   (open loop, CPU 1)               (CPU 0; class tls:  (ONE process, ONE mio
#                                     --tls-cert/-key,    thread for the 10
#                                     --tls-ports          readers, CPU 1)
#                                     subscribers)
#
# Load L1: 50,000 ticks/s over 1,000 Zipf symbols, 10 readers, every
# reader PSUBSCRIBE *; tickfan with its default flags (plus TLS for the
# class `tls`). Freshness (tools/freshness.rs): per sent tick, the first
# time a reader holds that symbol at that tick or newer, minus the
# intended send time. Each class runs REPS times, interleaved (plain, tls,
# plain, tls, …); the summary gives the median over the repetitions of
# p50, p99 and p99.9, and each class's p99 ÷ plain's.
#
# Classes: plain, tls (default flags); plain-nolag, tls-nolag (the same
# with --sub-max-lag 0: no pacing, so what TLS itself costs shows apart
# from how the pacing treats a reader that TLS slows down).
#
# The certificates (a CA and a server certificate for 127.0.0.1, ECDSA
# P-256) are made with openssl in the output directory.
#
# Usage: bash perf/tls_cost.sh   (DUR=10 REPS=3; OUT=perf/out/tls-<date>;
#        CLASSES="plain tls plain-nolag tls-nolag"; BIN=target/release/tickfan)
# tickfan runs with RUST_LOG=tickfan::publish=debug (SERVER_LOG overrides):
# its pacing starts and ends are counted per run.
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${DUR:-10}
REPS=${REPS:-3}
OUT=${OUT:-perf/out/tls-$(date -u +%Y%m%d-%H%M%S)}
CLASSES=${CLASSES:-"plain tls plain-nolag tls-nolag"}
RATE=50000
READERS=10
mkdir -p "$OUT"
command -v openssl >/dev/null || { echo "tls_cost: openssl not found (apt-get install openssl)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "tls_cost: python3 not found" >&2; exit 2; }
BIN=${BIN:-target/release/tickfan}
[ -x "$BIN" ] || cargo build --release --quiet
SRV=(); CLI=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  SRV=(taskset -c 0); CLI=(taskset -c 1)
fi

. perf/lib.sh
trap stop_pids EXIT INT TERM

# The PKI: a CA, and a server certificate for 127.0.0.1 signed by it.
PKI=$OUT/pki
mkdir -p "$PKI"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=tickfan-perf-ca -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj /CN=127.0.0.1 -keyout "$PKI/server.key" -out "$PKI/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > "$PKI/ext.cnf"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 2 -extfile "$PKI/ext.cnf" -out "$PKI/server.pem" 2>/dev/null

TICKS=$OUT/ticks.csv
gen_ticks "$BIN" "$TICKS"
ROWS=$OUT/rows.tsv
: > "$ROWS"

run() { # class rep
  local class=$1 rep=$2 pport sport spid
  local logs=$OUT/L1-$class-$rep
  mkdir -p "$logs"
  pport=$(free_port); sport=$(free_port)
  local serve_tls=() sub_tls=()
  case $class in *-nolag) serve_tls=(--sub-max-lag 0) ;; esac
  if [[ $class == tls* ]]; then
    serve_tls+=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key" --tls-ports subscribers)
    sub_tls=(--tls-ca "$PKI/ca.pem")
  fi
  RUST_LOG=${SERVER_LOG:-tickfan::publish=debug} "${SRV[@]}" "$BIN" serve --no-journal --data-dir "$logs/data" --feed-listen "127.0.0.1:$pport" \
    --sub-listen "127.0.0.1:$sport" --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --dedup-capacity 1000 --quiet --report-json "$logs/engine.json" "${serve_tls[@]}" ${SERVE_FLAGS:-} \
    > "$logs/server.out" 2> "$logs/server.err" &
  spid=$!
  PIDS+=("$spid")
  wait_port "$sport"
  "${CLI[@]}" "$BIN" subscribe --to "127.0.0.1:$sport" --duration "$((DUR + 2))s" --quiet \
    --sent "$logs/sent.csv" -k "$READERS" "${sub_tls[@]}" --json "$logs/sub.json" \
    > "$logs/sub.out" 2> "$logs/sub.err" &
  local subpid=$!
  PIDS+=("$subpid")
  wait_line "$logs/sub.err" "subscribed to"
  "${CLI[@]}" "$BIN" replay "$TICKS" --to "127.0.0.1:$pport" --stamp \
    --record-sent "$logs/sent.csv" --rate "$RATE" --loops 1000 --duration "${DUR}s" --no-progress \
    2> "$logs/replay.err" || true
  wait "$subpid" || true
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 - "$logs/sub.json" "$class" "$rep" >> "$ROWS" <<'PY'
import json, sys
sub, cls, rep = sys.argv[1:]
n = {c["class"]: c for c in json.load(open(sub))["classes"]}["normal"]
f = n["freshness"]["freshness"]
row = [cls, rep, f["p50_us"], f["p99_us"], f["p999_us"], f["max_us"],
       n["freshness"]["unserved_at_end"], n["disconnects"], n["gaps"], n["messages"]]
paced = unpaced = 0
for line in open(sub.rsplit("/", 1)[0] + "/server.err", errors="replace"):
    paced += ": paced (" in line
    unpaced += ": unpaced" in line
row += [paced, unpaced]
print("\t".join(str(x) for x in row))
PY
  rm -f "$logs/sent.csv"
  echo "tls_cost: $class rep $rep done" >&2
}

for rep in $(seq 1 "$REPS"); do
  for class in $CLASSES; do
    run "$class" "$rep"
  done
done
rm -f "$TICKS"

python3 - "$ROWS" > "$OUT/results.md" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
ms = lambda us: f"{float(us) / 1000:.2f}"
print("L1: 50,000 ticks/s, 1,000 symbols, 10 readers (PSUBSCRIBE *); freshness in ms.\n")
print("| class | rep | p50 | p99 | p99.9 | max | unserved | disconnects | seq gaps | messages | paced / unpaced |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join([r[0], r[1]] + [ms(x) for x in r[2:6]] + r[6:10] + [f"{r[10]} / {r[11]}"]) + " |")
print("\nMedian over repetitions (ms):\n")
print("| class | runs | p50 | p99 | p99.9 | p99 ÷ plain's (same pacing) |")
print("|---|---|---|---|---|---|")
groups = {}
for r in rows:
    groups.setdefault(r[0], []).append(r)
med = {c: [statistics.median(float(r[i]) for r in v) for i in (2, 3, 4)] for c, v in groups.items()}
for c, v in groups.items():
    p50, p99, p999 = med[c]
    base = med.get("plain-nolag" if c.endswith("-nolag") else "plain")
    ratio = f"{p99 / base[1]:.2f}" if base and base[1] else "-"
    print(f"| {c} | {len(v)} | {ms(p50)} | {ms(p99)} | {ms(p999)} | {ratio} |")
PY
{
  echo
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ), DUR=${DUR}s, REPS=$REPS, pinning: ${SRV[*]:-none} (server) / ${CLI[*]:-none} (tools), $(openssl version)"
} >> "$OUT/results.md"
cat "$OUT/results.md"
