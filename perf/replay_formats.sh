#!/usr/bin/env bash
# perf/replay_formats.sh — replay's memory on a vendor file far larger than
# it could hold (issue 28, item 4): a generated Databento DBN mbp-1 stream,
# zstd-compressed, goes through a FIFO (nothing is stored on disk) into
# `replay --rate 0`, which sends every quote to a sink over loopback.
#
#   tickfan gen --dbn ──▶ dd (counts the .zst bytes) ──▶ FIFO ──▶ tickfan replay ──TCP──▶ sink
#                                                                     │ VmHWM / VmRSS every 5 s;
#                                                                     ▼ the sink reads VmHWM at EOF
#
# The default, TICKS=520000000, is a 10 GB `.dbn.zst` (~41 GB of DBN
# records once decompressed) at gen's compression ratio; TICKS=125000000
# is 10 GB of DBN records (~2.5 GB compressed).
#
# Usage: bash perf/replay_formats.sh   (TICKS=…; BIN=target/release/tickfan;
#        OUT=perf/out/replay-formats-<date>)
# Every process it starts is stopped by its pid, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-perf/out/replay-formats-$(date -u +%Y%m%d-%H%M%S)}
BIN=${BIN:-target/release/tickfan}
TICKS=${TICKS:-520000000}
[ -x "$BIN" ] || cargo build --release --quiet
mkdir -p "$OUT"
. perf/lib.sh
trap stop_pids EXIT INT TERM

fifo="$OUT/ticks.dbn.zst.fifo"
rm -f "$fifo" "$OUT/replay.pid" "$OUT/sink.ready"
mkfifo "$fifo"
port=$(free_port)

# The sink: reads and counts everything; at the replay's half-close, reads
# the replay's peak RSS (it waits for this side to close), then closes.
python3 - "$port" "$OUT/replay.pid" "$OUT/sink.ready" > "$OUT/sink.out" <<'EOF' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[3], "w").write("ready\n")  # (a probe connection would be taken for the replay's)
c, _ = s.accept()
n = lines = 0
buf = bytearray(1 << 20)
while True:
    k = c.recv_into(buf)
    if k == 0:
        break
    n += k
    lines += buf.count(b"\n", 0, k)
pid = open(sys.argv[2]).read().strip()
hwm = [l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:")][0]
print(f"bytes {n} lines {lines} replay_vmhwm_kib {hwm}")
c.close()
EOF
PIDS+=("$!")
wait_line "$OUT/sink.ready" ready

start=$(date +%s.%N)
"$BIN" gen --dbn --symbols 1000 --ticks "$TICKS" --burst-factor 1 --seed 1 -o - 2> "$OUT/gen.err" \
  | dd of="$fifo" bs=1M iflag=fullblock 2> "$OUT/dd.err" &
PIDS+=("$!")
"$BIN" replay "$fifo" --to "127.0.0.1:$port" --no-progress 2> "$OUT/replay.err" &
rpid=$!
PIDS+=("$rpid")
echo "$rpid" > "$OUT/replay.pid"
echo "# seconds VmHWM_KiB VmRSS_KiB" > "$OUT/rss.log"
(
  while kill -0 "$rpid" 2>/dev/null; do
    h=$(hwm_kib "$rpid" 2>/dev/null || true); r=$(rss_kib "$rpid" 2>/dev/null || true)
    [ -n "$h" ] && echo "$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.0f", n - s }') $h $r" >> "$OUT/rss.log"
    sleep 5
  done
) &
PIDS+=("$!")
wait "$rpid"
end=$(date +%s.%N)
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done

zst=$(awk '/bytes/ {print $1; exit}' "$OUT/dd.err")
read -r _ bytes _ lines _ hwm < "$OUT/sink.out"
first=$(awk 'NR > 1 && $1 >= 5 {print $2; f=1; exit} END {}' "$OUT/rss.log")
[ -n "$first" ] || first=$(awk 'NR==2 {print $2}' "$OUT/rss.log")
secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
{
  echo "| quotes | .dbn.zst streamed | DBN records decoded | sent | seconds | quotes/s | VmHWM after 5 s | VmHWM at the end |"
  echo "|---|---|---|---|---|---|---|---|"
  awk -v q="$lines" -v z="$zst" -v b="$bytes" -v s="$secs" -v f="$first" -v h="$hwm" 'BEGIN {
    printf "| %d | %.2f GB | %.2f GB | %.2f GB | %s | %.0f | %.1f MiB | %.1f MiB |\n",
      q, z / 1e9, q * 80 / 1e9, b / 1e9, s, q / s, f / 1024, h / 1024 }'
  echo
  tail -1 "$OUT/replay.err"
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ)"
} > "$OUT/results.md"
rm -f "$fifo" "$OUT/replay.pid" "$OUT/sink.ready"
cat "$OUT/results.md"
