"""redis-py over TLS against a tickfan engine: `ssl=True` and the CA,
every other option the library's default. Run by tests/it/tls.rs:

    py_tls.py MODE PORT CA CHANNEL PATTERN

MODE is `sync` or `asyncio`. It subscribes to CHANNEL and PSUBSCRIBEs
PATTERN (which must match CHANNEL), and prints one JSON object per line:

    {"event":"ready", "pong"}               connected (TLS), PING answered
    {"event":"message", "kind", "channel", "data"}   each data message
    {"event":"done"}                        CHANNEL came as message and pmessage
    {"event":"error", "what"}               then exit 1
"""

import asyncio
import json
import sys
import time

import redis
import redis.asyncio

DEADLINE = 60.0


def say(event, **kw):
    kw["event"] = event
    print(json.dumps(kw), flush=True)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def note(m, want):
    """Prints a data message and ticks its route off `want`."""
    if m is None or text(m["type"]) not in ("message", "pmessage"):
        return
    kind, ch = text(m["type"]), text(m["channel"])
    say("message", kind=kind, channel=ch, data=text(m["data"]))
    want.discard((kind, ch))


def run_sync(port, ca, channel, pattern):
    r = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca)
    say("ready", pong=r.ping())
    p = r.pubsub()
    p.subscribe(channel)
    p.psubscribe(pattern)
    want = {("message", channel), ("pmessage", channel)}
    end = time.monotonic() + DEADLINE
    while want and time.monotonic() < end:
        note(p.get_message(timeout=1.0), want)
    return want


async def run_asyncio(port, ca, channel, pattern):
    r = redis.asyncio.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca)
    say("ready", pong=await r.ping())
    p = r.pubsub()
    await p.subscribe(channel)
    await p.psubscribe(pattern)
    want = {("message", channel), ("pmessage", channel)}
    end = time.monotonic() + DEADLINE
    while want and time.monotonic() < end:
        note(await p.get_message(timeout=1.0), want)
    await r.aclose()
    return want


def main():
    mode, port, ca, channel, pattern = sys.argv[1:6]
    try:
        if mode == "sync":
            left = run_sync(int(port), ca, channel, pattern)
        else:
            left = asyncio.run(run_asyncio(int(port), ca, channel, pattern))
    except Exception as e:  # noqa: BLE001 - reported to the test
        say("error", what=repr(e))
        sys.exit(1)
    if left:
        say("error", what="timed out; still missing %s" % sorted(left))
        sys.exit(1)
    say("done")


main()
