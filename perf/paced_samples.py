#!/usr/bin/env python3
# perf/paced_samples.py — usage: python3 perf/paced_samples.py RUN_DIR
"""A paced reader as the engine saw it against what it really held, per
second. RUN_DIR is one run of `perf/keeping_up.sh` with LOGS=1 and
SERVER_LOG=tickfan::publish=trace (e.g. a tickfan-slow50 run): the
engine's `sample` lines in server.err (its held estimate, bytes in
flight, drain-rate estimate, bytes written), the 50-symbol readers' most
bytes held in their receive queue per second (sub50.json) and their
freshness p99 per second (slow50/freshness.hlog, through `tickfan
report`; TICKFAN=path to the binary, default target/release/tickfan).
Seconds count from the sender's first intended send time."""
import collections, datetime, json, os, re, subprocess, sys, tempfile

run = sys.argv[1]
tickfan = os.environ.get("TICKFAN", "target/release/tickfan")
SAMPLE = re.compile(
    r"^\[(\S+) TRACE \S+\] subscriber (\S+): sample \(window \S+ B, held (\d+) B, "
    r"(\d+) B in flight, \d+ B in the engine, rate (\d+) B/s, budget \d+ B, (\d+) B written\)")

start = None
for line in open(os.path.join(run, "slow50", "freshness.hlog")):
    if line.startswith("#[StartTime:"):
        start = float(line.split()[1])
        break
if start is None:
    sys.exit("paced_samples: no StartTime in slow50/freshness.hlog")

with tempfile.TemporaryDirectory() as out:
    subprocess.run([tickfan, "report", os.path.join(run, "slow50"), "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    summary = json.load(open(os.path.join(out, "summary.json")))
fresh = next(s for s in summary["series"] if s["tag"] == "freshness_slow")
slow = next(c for c in json.load(open(os.path.join(run, "sub50.json")))["classes"]
            if c["class"] == "slow")

def row(name, values):
    print(f"  {name:<28}" + " ".join(f"{v:>5}" for v in values))

print(f"{run}: per second from the first send")
row("freshness p99 (ms)", [round(i["p99_us"] / 1000) for i in fresh["intervals"]])
row("reader held, most (KiB)", [round(x / 1024, 1) for x in slow["reader_held_max_by_second"]])

subs = collections.defaultdict(list)
for line in open(os.path.join(run, "server.err")):
    m = SAMPLE.match(line)
    if m:
        t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        subs[m.group(2)].append((t, int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6))))
for peer, samples in sorted(subs.items()):
    if len(samples) < 100:  # a normal reader paced for a moment
        continue
    per = collections.defaultdict(lambda: [0, 0, 0, 0])
    prev = samples[0][4]
    for t, held, flight, rate, written in samples:
        p = per[int(t - start)]
        p[0] = max(p[0], held)
        p[1] = max(p[1], flight)
        p[2] = max(p[2], rate)
        p[3] += written - prev
        prev = written
    secs = [k for k in sorted(per) if k >= 0]
    print(f" subscriber {peer} ({len(samples)} samples)")
    row("held estimate, most (KiB)", [round(per[k][0] / 1024, 1) for k in secs])
    row("in flight, most (KiB)", [round(per[k][1] / 1024, 1) for k in secs])
    row("rate estimate, most (kB/s)", [round(per[k][2] / 1000) for k in secs])
    row("written (kB/s)", [round(per[k][3] / 1000) for k in secs])
