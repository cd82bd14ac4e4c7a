"""redis-py, DEFAULT options, sending tickfan's own subscriber commands.

Run by tests/it/clients.rs:

    py_control.py PORT SYMBOL SEQ LATEST

1. `TICKFAN.THROTTLE 5` on a plain connection (`execute_command`);
2. on a pubsub connection, `TICKFAN.SINCE SYMBOL SEQ` then `subscribe`:
   the confirmation, the messages after SEQ up to LATEST, the second
   confirmation;
3. `TICKFAN.THROTTLE 0 MAXBYTES 0` on that subscribed connection, and
   what `get_message` hands over for its reply.

Prints one JSON object per line:

    {"event":"throttle", "reply"}                  what execute_command returned
    {"event":"since", "confirmed", "seqs"}         the confirmation's channel, the seqs
    {"event":"subscribed_throttle", "type", "data"} the reply as get_message shows it
    {"event":"error", "what"}                      then exit 1
"""

import json
import sys
import time

import redis

DEADLINE = 60.0


def say(event, **kw):
    kw["event"] = event
    print(json.dumps(kw), flush=True)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def next_message(p):
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        m = p.get_message(timeout=1.0)
        if m is not None:
            return m
    say("error", what="no message before the deadline")
    sys.exit(1)


def main():
    port, symbol, seq, latest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    r = redis.Redis(host="127.0.0.1", port=int(port))
    say("throttle", reply=text(r.execute_command("TICKFAN.THROTTLE", 5)))
    p = r.pubsub()
    # SINCE first (it subscribes), then redis-py's own SUBSCRIBE so that
    # get_message reads (redis-py reads only once it subscribed something)
    # and resubscribes on reconnect; tickfan answers a SUBSCRIBE to a
    # channel the connection holds with its confirmation only, no snapshot.
    p.execute_command("TICKFAN.SINCE", symbol, seq)
    p.subscribe(symbol)
    m = next_message(p)
    if m["type"] != "subscribe":
        say("error", what=f"expected the subscribe confirmation, got {m!r}")
        sys.exit(1)
    confirmed = text(m["channel"])
    seqs = []
    while not seqs or seqs[-1] < latest:
        m = next_message(p)
        if m["type"] != "message":
            say("error", what=f"expected a message, got {m!r}")
            sys.exit(1)
        seqs.append(int(text(m["data"]).split(",")[6]))
    m = next_message(p)
    if m["type"] != "subscribe":
        say("error", what=f"expected SUBSCRIBE's confirmation, got {m!r}")
        sys.exit(1)
    say("since", confirmed=confirmed, seqs=seqs)
    p.execute_command("TICKFAN.THROTTLE", 0, "MAXBYTES", 0)
    m = next_message(p)
    say("subscribed_throttle", type=m["type"], data=text(m["data"]))
    p.close()
    r.close()


if __name__ == "__main__":
    main()
