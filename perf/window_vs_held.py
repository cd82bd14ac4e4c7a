#!/usr/bin/env python3
# perf/window_vs_held.py — usage: [STEP=bytes] [RCVBUF=bytes] python3 perf/window_vs_held.py
"""How much can a reader hold unread before the sender sees its window shrink?
Loopback, the reader's receive buffer at the OS default (or RCVBUF=n), the
reader never reads; the sender writes STEP bytes at a time and after each
write (once the bytes landed) reads its own TCP_INFO tcpi_snd_wnd and the
reader's queued bytes (FIONREAD) and rcv_ssthresh."""
import os, socket, struct, sys, time, fcntl, termios
STEP = int(os.environ.get("STEP", "1024"))
RCVBUF = int(os.environ.get("RCVBUF", "0"))
FRAME = int(os.environ.get("FRAME", "123"))
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
rd = socket.socket()
if RCVBUF:
    rd.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
rd.connect(srv.getsockname())
wr, _ = srv.accept()
wr.setblocking(False)
def info(s):
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
def snd_wnd(s):
    return struct.unpack_from("I", info(s), 228)[0]
def rcv_ssthresh(s):
    return struct.unpack_from("I", info(s), 64)[0]
def queued(s):
    b = fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", b)[0]
w0 = snd_wnd(wr)
print(f"rcvbuf {rd.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)}, first window {w0}, reader rcv_ssthresh {rcv_ssthresh(rd)}")
sent = 0; first_shrink = None; rows = []
payload = (b"x" * (FRAME - 2) + b"\r\n") * (STEP // FRAME + 1)
while True:
    try:
        n = wr.send(payload[:STEP])
    except BlockingIOError:
        break
    sent += n
    deadline = time.time() + 1
    while queued(rd) < sent and time.time() < deadline:
        time.sleep(0.0005)
    q = queued(rd); w = snd_wnd(wr)
    rows.append((sent, q, w, rcv_ssthresh(rd)))
    if first_shrink is None and w < w0:
        first_shrink = (q, w)
    if q < sent:
        break  # the window closed: the rest waits in the sender's queue
for r in rows[:: max(1, len(rows) // 25)]:
    print("sent %7d held %7d snd_wnd %7d reader rcv_ssthresh %7d" % r)
print("last", rows[-1])
print("window first below its first value when the reader held", first_shrink)
