// node-redis (package `redis`) against a tickfan engine, with the library's
// DEFAULT options (createClient with only the URL). Run by
// tests/it/clients.rs: node node_redis.js PORT CHANNEL PATTERN MATCHES LIVE_SEQ RESTART_BID
'use strict';

const { createClient } = require('redis');
const { say, fail, args, waiter, tracker, story } = require('./common');

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
  const onMessage = (message, channel) => { t.note('message', channel, null, message); w.poke(); };
  const onPmessage = (message, channel) => { t.note('pmessage', channel, a.pattern, message); w.poke(); };
  await story(a, w, t, resp, {
    subscribe: () => c.subscribe(a.channel, onMessage),
    psubscribe: () => c.pSubscribe(a.pattern, onPmessage),
    unsubscribe: () => c.unsubscribe(a.channel),
    punsubscribe: () => c.pUnsubscribe(a.pattern),
    close: () => c.destroy(),
  });
}

main().catch(fail);
