# perf/lib.sh — shell helpers the perf/ scripts share (sourced, not run):
# the processes a script started (stopped by pid on exit), free loopback
# ports, waiting for a port or a log line. Messages name the calling script.

PIDS=()

# Stops every process in PIDS, by pid, and reaps it.
stop_pids() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits up to 30 s until something listens on 127.0.0.1:PORT.
wait_port() { # port
  for _ in $(seq 1 1500); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.02
  done
  echo "${0##*/}: nothing listens on port $1" >&2; return 1
}

# Waits up to 30 s until FILE holds TEXT.
wait_line() { # file text
  for _ in $(seq 1 1500); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.02
  done
  echo "${0##*/}: '$2' never appeared in $1" >&2; return 1
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# User + system CPU of a process so far, in clock ticks (getconf CLK_TCK).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
# Busy and total jiffies of one line of /proc/stat (`cpu1`, or `cpu` for
# all cores): busy = user + nice + system + irq + softirq + steal.
core_jiffies() { awk -v c="$1" '$1 == c { print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }

# The benchmarks' tick file: 1,000,000 ticks over 1,000 Zipf symbols, no
# bursts, seed 1, written to FILE by BIN.
gen_ticks() { # bin file
  "$1" gen --symbols 1000 --ticks 1000000 --burst-factor 1 --seed 1 -o "$2" 2>/dev/null
}

# The first N distinct symbols of a tick file, comma-separated.
first_symbols() { # file n
  awk -F, -v n="$2" 'NR>1 && !($2 in s) {s[$2]=1; print $2; if (++k==n) exit}' "$1" | paste -sd, -
}

# Starts redis-server on 127.0.0.1:PORT (no persistence, log in LOGFILE)
# under the prefix command in the array named by PREFIX (e.g. SRV, for
# taskset); its pid is in REDIS_PID and in PIDS.
start_redis() { # port logfile prefix-array-name
  local -n prefix=$3
  "${prefix[@]}" redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no \
    --logfile "$2" > /dev/null 2>&1 &
  REDIS_PID=$!
  PIDS+=("$REDIS_PID")
}

# Starts the raw forwarder (`BIN forward`) with its publisher port PPORT and
# subscriber port SPORT, output in LOGDIR/server.{out,err}, under the prefix
# command in the array named by PREFIX; its pid is in FORWARD_PID and PIDS.
start_forward() { # bin pport sport logdir prefix-array-name
  local -n prefix=$5
  "${prefix[@]}" "$1" forward --feed-listen "127.0.0.1:$2" --sub-listen "127.0.0.1:$3" \
    > "$4/server.out" 2> "$4/server.err" &
  FORWARD_PID=$!
  PIDS+=("$FORWARD_PID")
}
