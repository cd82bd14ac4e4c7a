#!/bin/bash
# one L1 tickfan run with per-thread CPU and a perf profile
cd /work/main
BIN=${BIN:-/work/target-main/release/tickfan}
O=/tmp/prof/out; rm -rf $O; mkdir -p $O
. perf/lib.sh
[ -f /tmp/prof/ticks.csv ] || gen_ticks "$BIN" /tmp/prof/ticks.csv
pport=$(free_port); sport=$(free_port)
SRV=(taskset -c 0); PIDS=()
if [ "$SERVER" = redis ]; then start_redis $pport $O/redis.log SRV; spid=$REDIS_PID; sport=$pport; fmt=redis-publish; else fmt=csv
taskset -c 0 $BIN serve --no-journal --data-dir $O/data --feed-listen 127.0.0.1:$pport --sub-listen 127.0.0.1:$sport --order-listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --dedup-capacity 1000 --quiet --report-json $O/engine.json ${SERVE_FLAGS:-} > $O/server.out 2> $O/server.err &
spid=$!; fi
wait_port $sport
taskset -c 1 $BIN subscribe --to 127.0.0.1:$sport --duration 22s --quiet --sent $O/sent.csv -k 10 --json $O/sub.json > $O/sub.out 2> $O/sub.err &
subpid=$!
wait_line $O/sub.err "subscribed to"
taskset -c 1 $BIN replay /tmp/prof/ticks.csv --to 127.0.0.1:$pport --send-as $fmt --stamp --record-sent $O/sent.csv --rate 50000 --loops 1000 --duration 20s --no-progress 2> $O/replay.err &
rpid=$!
sleep 5
for t in /proc/$spid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done > $O/t0
if [ -n "$TRACE" ]; then timeout 4 strace -c -f -p $spid -o $O/strace.txt; sleep 4; elif [ -n "$STAT" ]; then perf stat -e raw_syscalls:sys_enter,context-switches,task-clock -p $spid -o $O/stat.txt -- sleep 8; cat $O/stat.txt; elif [ -n "$PERF" ]; then perf record -F 2000 -g -p $spid -o $O/perf.data -- sleep 8 2>/dev/null >/dev/null; else sleep 8; fi
for t in /proc/$spid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done > $O/t1
wait $rpid; wait $subpid
kill $spid; wait $spid 2>/dev/null
paste $O/t0 $O/t1 | awk '{d=$4-$2; if (d>0) printf "%-20s %5.1f%%\n", $1, d/8}'
python3 -c "
import json
j=json.load(open('$O/sub.json'))
for c in j['classes']:
  f=c['freshness']['freshness']; print(c['class'], 'p50', f['p50_us'], 'p99', f['p99_us'], 'p999', f['p999_us'])
"
