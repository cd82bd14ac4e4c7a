#!/usr/bin/env bash
# perf/journal_recovery.sh — how long `tickfan serve` takes to start on a
# journal of N accepted orders (issue 13 item 2: "recovery time for 1 M
# journaled orders").
#
# The journal is written by examples/journal_gen.rs through the journal's own
# writer (real segments, frames, checksums, fdatasync): N orders, each
# Accepted + AttemptSent + FillApplied + Terminal, except the last QUEUED
# ones which have only Accepted (re-queued at start). Every order was
# received "now", so every id goes back into the dedup store.
# Each run copies the journal into a fresh --data-dir (the engine appends to
# the directory it starts on) and times, from the spawn of `serve` until its
# order port accepts a connection, and until `STATUS <last id>` answers
# (the dedup store rebuilt and serving). The copy leaves the files in the
# page cache: this is recovery from a warm cache, not from a cold disk.
#
# Usage: bash perf/journal_recovery.sh  (N=1000000 QUEUED=10000 RUNS=3,
#        OUT=perf/out/recovery-<date>)
# Needs: cargo, python3. The engine started is stopped by its pid (python's
# Popen), also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
QUEUED=${QUEUED:-10000}
RUNS=${RUNS:-3}
OUT=${OUT:-perf/out/recovery-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
command -v python3 >/dev/null || { echo "journal_recovery: python3 not found" >&2; exit 2; }

cargo build --release --quiet --bin tickfan --example journal_gen
BIN=target/release/tickfan
GEN=target/release/examples/journal_gen

trap 'rm -rf "$OUT/journal" "$OUT"/data-*' EXIT INT TERM

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "cpu: $(lscpu 2>/dev/null | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2}') x $(nproc)"
  echo "data fs: $(df -T "$OUT" | awk 'NR==2 {print $1, $2}')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

/usr/bin/time -f "journal_gen: %e s wall" "$GEN" "$OUT/journal" "$N" "$QUEUED" 2>&1 | tee "$OUT/gen.txt" >&2
du -sb "$OUT/journal" | tee -a "$OUT/gen.txt" >&2
ls -l "$OUT/journal" >> "$OUT/gen.txt"

for run in $(seq 1 "$RUNS"); do
  rm -rf "$OUT/data-$run"
  cp -a "$OUT/journal" "$OUT/data-$run"
  python3 - "$BIN" "$OUT/data-$run" "$N" "$QUEUED" "$OUT/serve-$run.err" <<'PY' | tee -a "$OUT/runs.txt" >&2
import socket, subprocess, sys, time
binp, data, n, queued, errf = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
op, fp, sp, ap = port(), port(), port(), port()
v = "latency=0ms,transient=0,permanent=0,partial=0,reorder=0,dup=0,lose=0,hang=0"
cmd = [binp, "serve", "--order-listen", f"127.0.0.1:{op}", "--feed-listen", f"127.0.0.1:{fp}",
       "--sub-listen", f"127.0.0.1:{sp}", "--admin-listen", f"127.0.0.1:{ap}",
       "--data-dir", data, "--dedup-capacity", str(n + 100000), "--order-workers", "8",
       "--bridge", f"name=v1,{v}", "--bridge", f"name=v2,{v}", "--quiet"]
err = open(errf, "w")
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
try:
    deadline = t0 + 120
    while True:
        if p.poll() is not None:
            sys.exit(f"serve exited with {p.returncode} (see {errf})")
        try:
            c = socket.create_connection(("127.0.0.1", op), timeout=1); break
        except OSError:
            if time.monotonic() > deadline: sys.exit("order port never answered")
            time.sleep(0.001)
    t_port = time.monotonic() - t0
    c.settimeout(120)
    last_done = f"g-{n - queued - 1:09d}"
    c.sendall(f"STATUS {last_done}\n".encode())
    f = c.makefile("r")
    line = f.readline().strip()
    t_status = time.monotonic() - t0
    c.close()
    print(f"start->order port {t_port*1000:.0f} ms; start->STATUS answered {t_status*1000:.0f} ms; {line}")
finally:
    p.terminate(); p.wait()
PY
  grep -h "journal" "$OUT/serve-$run.err" | head -3 >&2 || true
  rm -rf "$OUT/data-$run"
done
echo "journal_recovery: raw output in $OUT" >&2
