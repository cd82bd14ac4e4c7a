// ioredis against a tickfan engine, with the library's DEFAULT options
// (ready check with INFO, auto-reconnect, auto-resubscribe). Run by
// tests/it/clients.rs: node node_ioredis.js PORT CHANNEL PATTERN MATCHES LIVE_SEQ RESTART_BID
'use strict';

const Redis = require('ioredis');
const { say, fail, args, waiter, tracker, stdinLine } = require('./common');

async function main() {
  const a = args();
  const w = waiter();
  const t = tracker(a);
  say('hello', { lib: 'ioredis ' + require('ioredis/package.json').version });
  const r = new Redis(a.port, '127.0.0.1');
  r.on('error', (e) => say('connection_error', { what: String(e && e.message) }));
  r.on('message', (channel, message) => { t.note('message', channel, null, message); w.poke(); });
  r.on('pmessage', (pattern, channel, message) => { t.note('pmessage', channel, pattern, message); w.poke(); });
  const info = await r.client('INFO');
  const resp = /resp=(\d)/.exec(info)[1];
  await r.psubscribe(a.pattern);
  await r.subscribe(a.channel);
  say('ready', { resp });
  await w.until('live updates', () => t.missing.size === 0);
  say('live');
  await r.unsubscribe(a.channel);
  await r.punsubscribe(a.pattern);
  say('unsubscribed');
  const before = t.messages.length;
  await r.subscribe(a.channel);
  await w.until('snapshot after resubscribing', () => t.messages.slice(before).some((m) => m.kind === 'message'));
  say('resubscribed', { seq: t.messages.slice(before).find((m) => m.kind === 'message').seq });
  await stdinLine();
  await w.until('a message after the restart', () => t.messages.some((m) => m.bid === a.restartBid));
  const m = t.messages.find((x) => x.bid === a.restartBid);
  say('reconnected', { seq: m.seq, bid: m.bid });
  r.disconnect();
  process.exit(0); // stdin is still open: end here
}

main().catch(fail);
