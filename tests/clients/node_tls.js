// ioredis or node-redis over TLS against a tickfan engine: the CA and TLS
// on, every other option the library's default. Run by tests/it/tls.rs:
//   node node_tls.js ioredis|redis PORT CA CHANNEL PATTERN
// Subscribes to CHANNEL and PSUBSCRIBEs PATTERN (which must match CHANNEL);
// prints one JSON object per line, as py_tls.py does: ready, message…,
// done (or error, then exit 1).
'use strict';

const fs = require('fs');
const { say, fail } = require('./common');

const DEADLINE_MS = 60000;

async function main() {
  const [lib, port, caPath, channel, pattern] = process.argv.slice(2);
  const ca = fs.readFileSync(caPath);
  const want = new Set(['message ' + channel, 'pmessage ' + channel]);
  const note = (kind, ch, data) => {
    say('message', { kind, channel: String(ch), data: String(data) });
    want.delete(kind + ' ' + String(ch));
    if (want.size === 0) {
      say('done');
      process.exit(0);
    }
  };
  setTimeout(() => fail('timed out; still missing ' + [...want].join(', ')), DEADLINE_MS);
  if (lib === 'ioredis') {
    const Redis = require('ioredis');
    const c = new Redis({ host: '127.0.0.1', port: Number(port), tls: { ca } });
    c.on('error', (e) => say('connection_error', { what: String(e && e.message) }));
    say('ready', { pong: await c.ping() });
    c.on('message', (ch, msg) => note('message', ch, msg));
    c.on('pmessage', (_pat, ch, msg) => note('pmessage', ch, msg));
    await c.subscribe(channel);
    await c.psubscribe(pattern);
  } else {
    const { createClient } = require('redis');
    const c = createClient({ socket: { host: '127.0.0.1', port: Number(port), tls: true, ca } });
    c.on('error', (e) => say('connection_error', { what: String(e && e.message) }));
    await c.connect();
    say('ready', { pong: await c.ping() });
    await c.subscribe(channel, (msg, ch) => note('message', ch, msg));
    await c.pSubscribe(pattern, (msg, ch) => note('pmessage', ch, msg));
  }
}

main().catch(fail);
