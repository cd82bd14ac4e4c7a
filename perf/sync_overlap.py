#!/usr/bin/env python3
"""perf/sync_overlap.py — do fdatasyncs of different files overlap on this disk?

One or two threads, each with its own pre-written 4 MiB file in DIR (default:
perf/out), each looping `pwrite` of 256 bytes + `fdatasync` N times (default
1,500). Prints syncs/s and the per-sync p50/p99 for 1 file, 2 files, 1, 2.
If two files give more syncs/s at a similar latency, a journal striped over
two files could start a commit while another is in flight (issue 13, item 10;
two syncs of ONE file do not overlap here: perf/RESULTS.md, "journal ACK
latency: where the last 0.2 ms is").

Usage: python3 perf/sync_overlap.py [DIR] [N]
"""
import os
import sys
import threading
import time

DIR = sys.argv[1] if len(sys.argv) > 1 else "perf/out"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
SIZE = 4 << 20


def prepared(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"\0" * SIZE, 0)
    os.fdatasync(fd)
    return fd


def loop(fd, out):
    for i in range(N):
        t = time.perf_counter()
        os.pwrite(fd, b"x" * 256, (i * 256) % SIZE)
        os.fdatasync(fd)
        out.append(time.perf_counter() - t)


def run(files):
    paths = [os.path.join(DIR, f"sync-overlap-{i}.bin") for i in range(files)]
    fds = [prepared(p) for p in paths]
    outs = [[] for _ in fds]
    threads = [threading.Thread(target=loop, args=(fd, out)) for fd, out in zip(fds, outs)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    lat = sorted(x for o in outs for x in o)
    print(
        f"{files} file(s): {files * N / elapsed:.0f} syncs/s, "
        f"p50 {lat[len(lat) // 2] * 1e6:.0f} us, p99 {lat[int(len(lat) * 0.99)] * 1e6:.0f} us"
    )
    for fd, p in zip(fds, paths):
        os.close(fd)
        os.unlink(p)


os.makedirs(DIR, exist_ok=True)
for files in (1, 2, 1, 2):
    run(files)
