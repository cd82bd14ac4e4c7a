"""redis-py against a tickfan engine, with the library's DEFAULT options.

Run by tests/it/clients.rs (see there for the whole story):

    py_client.py MODE PORT CHANNEL PATTERN MATCHES LIVE_SEQ RESTART_BID

MATCHES is the comma-separated symbols PATTERN matches (each must arrive as a
pmessage with sequence number LIVE_SEQ or later, CHANNEL as a message).

MODE is `sync` or `asyncio`. With the environment variable TICKFAN_NO_HIREDIS=1
the hiredis parser is hidden, so redis-py falls back to its own parser (still
its default behaviour when hiredis is not installed).

It prints one JSON object per line on stdout, and reads one line on stdin
(`restarting`) before waiting for the reconnection:

    {"event":"hello", "lib":..., "hiredis":..., "mode":...}
    {"event":"ready", "resp"}             subscribed to CHANNEL and PATTERN;
                                          `resp` as CLIENT INFO showed it
    {"event":"message", "kind", "channel", "pattern", "seq", "bid"}   (each one)
    {"event":"live"}                      got LIVE_SEQ on every expected route
    {"event":"unsubscribed"}              both confirmations received
    {"event":"resubscribed", "seq"}       subscribed to CHANNEL again, snapshot seq
    {"event":"reconnected", "seq", "bid"} a message from the restarted engine
    {"event":"error", "what"}             then exit 1
"""

import json
import os
import sys
import time

if os.environ.get("TICKFAN_NO_HIREDIS") == "1":
    sys.modules["hiredis"] = None  # type: ignore[assignment]

import redis  # noqa: E402
import redis.asyncio  # noqa: E402
from redis.utils import HIREDIS_AVAILABLE  # noqa: E402

DEADLINE = 60.0


def say(event, **kw):
    kw["event"] = event
    print(json.dumps(kw), flush=True)


def fail(what):
    say("error", what=what)
    sys.exit(1)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class Tracker:
    """Which (kind, channel) routes still lack LIVE_SEQ."""

    def __init__(self, channel, want, live_seq):
        self.channel = channel
        self.missing = set(want)
        self.live_seq = live_seq

    def note(self, m):
        """Reports a data message; returns (kind, channel, seq, bid) or None."""
        kind = text(m["type"])
        if kind not in ("message", "pmessage"):
            return None
        ch = text(m["channel"])
        fields = text(m["data"]).split(",")
        seq, bid = int(fields[6]), fields[2]
        pat = text(m.get("pattern")) if kind == "pmessage" else None
        say("message", kind=kind, channel=ch, pattern=pat, seq=seq, bid=bid)
        if seq >= self.live_seq:
            self.missing.discard((kind, ch))
        return kind, ch, seq, bid


def routes(channel, pattern_matches):
    want = {("message", channel)}
    for s in pattern_matches:
        want.add(("pmessage", s))
    return want


def scenario(channel, pattern, matches, live_seq, restart_bid):
    """The test's story, written once for both APIs: a generator that yields
    what it needs done (a pubsub call, the next message, a stdin line, a
    pause) and is sent the result; `drive_sync` and `drive_async` perform
    the requests with the sync and the asyncio API."""
    end = time.monotonic() + DEADLINE
    tracker = Tracker(channel, routes(channel, matches), live_seq)

    def expired(what):
        if time.monotonic() > end:
            fail(what)

    yield ("call", "psubscribe", pattern)
    yield ("call", "subscribe", channel)
    confirmed, pending = 0, []
    while confirmed < 2:
        m = yield ("get",)
        if m is None:
            expired("no subscribe confirmations")
        elif text(m["type"]) in ("subscribe", "psubscribe"):
            confirmed += 1
        else:
            pending.append(m)
    say("ready", resp=str((yield ("resp",))))
    for m in pending:
        tracker.note(m)
    while tracker.missing:
        expired("live updates missing: %s" % sorted(tracker.missing))
        m = yield ("get",)
        if m is not None:
            tracker.note(m)
    say("live")
    yield ("call", "unsubscribe", channel)
    yield ("call", "punsubscribe", pattern)
    gone = 0
    while gone < 2:
        expired("no unsubscribe confirmations")
        m = yield ("get",)
        if m is not None and text(m["type"]) in ("unsubscribe", "punsubscribe"):
            gone += 1
    say("unsubscribed")
    yield ("call", "subscribe", channel)
    snap = None
    while snap is None:
        expired("no snapshot after resubscribing")
        m = yield ("get",)
        if m is not None and text(m["type"]) == "message":
            snap = tracker.note(m)
    say("resubscribed", seq=snap[2])
    yield ("stdin",)  # the test stops the engine and starts a new one
    end += DEADLINE
    while True:
        expired("no message after the engine restarted")
        m = yield ("get",)
        if isinstance(m, Exception):
            # Past the library's own retries: keep calling, as an application would.
            say("connection_error", what=str(m))
            yield ("pause",)
        elif m is not None and text(m["type"]) == "message":
            got = tracker.note(m)
            if got[3] == restart_bid:
                say("reconnected", seq=got[2], bid=got[3])
                return


LINK_ERRORS = (redis.ConnectionError, redis.TimeoutError)


def drive_sync(port, story):
    r = redis.Redis(host="127.0.0.1", port=port)
    say("hello", lib=redis.__version__, hiredis=HIREDIS_AVAILABLE, mode="sync")
    if r.ping() is not True:
        fail("ping")
    resp = r.client_info()["resp"]
    p = r.pubsub()
    result = None
    try:
        while True:
            req = story.send(result)
            result = None
            if req[0] == "call":
                getattr(p, req[1])(req[2])
            elif req[0] == "get":
                try:
                    result = p.get_message(timeout=1.0)
                except LINK_ERRORS as e:
                    result = e
            elif req[0] == "resp":
                result = resp
            elif req[0] == "stdin":
                sys.stdin.readline()
            elif req[0] == "pause":
                time.sleep(0.2)
    except StopIteration:
        pass


async def drive_async(port, story):
    import asyncio

    r = redis.asyncio.Redis(host="127.0.0.1", port=port)
    say("hello", lib=redis.__version__, hiredis=HIREDIS_AVAILABLE, mode="asyncio")
    if await r.ping() is not True:
        fail("ping")
    resp = (await r.client_info())["resp"]
    p = r.pubsub()
    loop = asyncio.get_running_loop()
    result = None
    try:
        while True:
            req = story.send(result)
            result = None
            if req[0] == "call":
                await getattr(p, req[1])(req[2])
            elif req[0] == "get":
                try:
                    result = await p.get_message(timeout=1.0)
                except LINK_ERRORS as e:
                    result = e
            elif req[0] == "resp":
                result = resp
            elif req[0] == "stdin":
                await loop.run_in_executor(None, sys.stdin.readline)
            elif req[0] == "pause":
                await asyncio.sleep(0.2)
    except StopIteration:
        await r.aclose()


def main():
    mode, port, channel, pattern, matches, live_seq, restart_bid = sys.argv[1:8]
    story = scenario(channel, pattern, matches.split(","), int(live_seq), restart_bid)
    if mode == "sync":
        drive_sync(int(port), story)
    elif mode == "asyncio":
        import asyncio

        asyncio.run(drive_async(int(port), story))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
