// Shared by node_ioredis.js and node_redis.js: the same story as
// py_client.py (see there), printed as one JSON object per line.
'use strict';

const DEADLINE_MS = 60000;

function say(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function fail(what) {
  say('error', { what: String(what) });
  process.exit(1);
}

function args() {
  const [port, channel, pattern, matches, liveSeq, restartBid] = process.argv.slice(2);
  return {
    port: Number(port),
    channel,
    pattern,
    matches: matches.split(','),
    liveSeq: Number(liveSeq),
    restartBid,
  };
}

/** Resolves when `cond()` holds after a message; fails the run at the deadline. */
function waiter() {
  let pending = [];
  return {
    until(what, cond) {
      if (cond()) return Promise.resolve();
      return new Promise((resolve) => {
        const timer = setTimeout(() => fail('timed out: ' + what), DEADLINE_MS);
        pending.push({ cond, resolve, timer });
      });
    },
    poke() {
      pending = pending.filter((p) => {
        if (!p.cond()) return true;
        clearTimeout(p.timer);
        p.resolve();
        return false;
      });
    },
  };
}

/** Records data messages; `missing` holds the routes still lacking liveSeq. */
function tracker(a) {
  const t = {
    missing: new Set(['message ' + a.channel, ...a.matches.map((s) => 'pmessage ' + s)]),
    messages: [],
    note(kind, channel, pattern, payload) {
      const f = String(payload).split(',');
      const m = { kind, channel: String(channel), pattern: pattern ? String(pattern) : null, seq: Number(f[6]), bid: f[2] };
      say('message', m);
      if (m.seq >= a.liveSeq) t.missing.delete(kind + ' ' + m.channel);
      t.messages.push(m);
      return m;
    },
  };
  return t;
}

/** Resolves on the first line of stdin (the test's `restarting`). */
function stdinLine() {
  return new Promise((resolve) => {
    process.stdin.setEncoding('utf8');
    process.stdin.once('data', () => resolve());
  });
}

/**
 * The story after connecting, written once for both libraries. `ops` adapts
 * a library: subscribe(), psubscribe(), unsubscribe(), punsubscribe() (each
 * a promise; received messages must go to t.note and w.poke) and close().
 */
async function story(a, w, t, resp, ops) {
  await ops.psubscribe();
  await ops.subscribe();
  say('ready', { resp });
  await w.until('live updates', () => t.missing.size === 0);
  say('live');
  await ops.unsubscribe();
  await ops.punsubscribe();
  say('unsubscribed');
  const before = t.messages.length;
  await ops.subscribe();
  const snapshot = () => t.messages.slice(before).find((m) => m.kind === 'message');
  await w.until('snapshot after resubscribing', () => snapshot() !== undefined);
  say('resubscribed', { seq: snapshot().seq });
  await stdinLine();
  const restarted = () => t.messages.find((x) => x.bid === a.restartBid);
  await w.until('a message after the restart', () => restarted() !== undefined);
  say('reconnected', { seq: restarted().seq, bid: restarted().bid });
  ops.close();
  process.exit(0); // stdin is still open: end here
}

module.exports = { say, fail, args, waiter, tracker, story };
