// node-redis (package `redis`) against a tickfan engine, with the library's
// DEFAULT options (createClient with only the URL). Run by
// tests/it/clients.rs: node node_redis.js PORT CHANNEL PATTERN MATCHES LIVE_SEQ RESTART_BID
'use strict';

const { createClient } = require('redis');
const { say, fail, args, waiter, tracker, stdinLine } = require('./common');

async function main() {
  const a = args();
  const w = waiter();
  const t = tracker(a);
  say('hello', { lib: 'redis ' + require('redis/package.json').version });
  const c = createClient({ url: `redis://127.0.0.1:${a.port}` });
  c.on('error', (e) => say('connection_error', { what: String(e && e.message) }));
  await c.connect();
  if ((await c.ping()) !== 'PONG') fail('ping');
  const resp = /resp=(\d)/.exec(String(await c.sendCommand(['CLIENT', 'INFO'])))[1];
  await c.pSubscribe(a.pattern, (message, channel) => { t.note('pmessage', channel, a.pattern, message); w.poke(); });
  await c.subscribe(a.channel, (message, channel) => { t.note('message', channel, null, message); w.poke(); });
  say('ready', { resp });
  await w.until('live updates', () => t.missing.size === 0);
  say('live');
  await c.unsubscribe(a.channel);
  await c.pUnsubscribe(a.pattern);
  say('unsubscribed');
  const before = t.messages.length;
  await c.subscribe(a.channel, (message, channel) => { t.note('message', channel, null, message); w.poke(); });
  await w.until('snapshot after resubscribing', () => t.messages.slice(before).some((m) => m.kind === 'message'));
  say('resubscribed', { seq: t.messages.slice(before).find((m) => m.kind === 'message').seq });
  await stdinLine();
  await w.until('a message after the restart', () => t.messages.some((m) => m.bid === a.restartBid));
  const m = t.messages.find((x) => x.bid === a.restartBid);
  say('reconnected', { seq: m.seq, bid: m.bid });
  c.destroy();
  process.exit(0); // stdin is still open: end here
}

main().catch(fail);
