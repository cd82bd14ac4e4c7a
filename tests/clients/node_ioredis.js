// ioredis against a tickfan engine, with the library's DEFAULT options
// (ready check with INFO, auto-reconnect, auto-resubscribe). Run by
// tests/it/clients.rs: node node_ioredis.js PORT CHANNEL PATTERN MATCHES LIVE_SEQ RESTART_BID
'use strict';

const Redis = require('ioredis');
const { say, fail, args, waiter, tracker, story } = require('./common');

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
  await story(a, w, t, resp, {
    subscribe: () => r.subscribe(a.channel),
    psubscribe: () => r.psubscribe(a.pattern),
    unsubscribe: () => r.unsubscribe(a.channel),
    punsubscribe: () => r.punsubscribe(a.pattern),
    close: () => r.disconnect(),
  });
}

main().catch(fail);
