//! Telling subscribers which symbols are stale: each change the
//! [`crate::stale::StaleBoard`] found goes, as one message, to the
//! subscribers of the reserved channel `__tickfan.stale` (channel
//! subscribers only: a `*` pattern subscriber expecting ticks is not sent
//! notices). Payload: `stale,<symbol>,<reason>` or `live,<symbol>,<reason>`.
//! The gauges `tickfan_symbols_stale` and `tickfan_symbols_silent` are set
//! here (the publisher is their only writer).
//!
//! Single owner: the publisher thread. Runs once per scan period, and
//! only when stale flags are on (`--stale-after`, or an edge).

use crate::metrics::counters::set;
use crate::protocol::resp;
use crate::publish::publisher::Publisher;
use crate::stale::{Notice, STALE_CHANNEL};

impl Publisher {
    /// Scans for stale changes when due and sends the notices; returns
    /// how many were sent.
    pub(super) fn serve_stale(&mut self, now_ns: u64) -> usize {
        if !self.stale.due(now_ns) {
            return 0;
        }
        self.stale.scan(self.routes.known_symbols(), now_ns);
        let (stale, silent) = self.stale.counts();
        set(&self.ctx.counters.cluster.symbols_stale, stale as u64);
        set(&self.ctx.counters.cluster.symbols_silent, silent as u64);
        let notices: Vec<Notice> = self.stale.take_notices().collect();
        if notices.is_empty() {
            return 0;
        }
        let subs = self.routes.channel_subscribers(STALE_CHANNEL);
        let mut payload = Vec::with_capacity(64);
        let mut tail = Vec::with_capacity(96);
        for n in &notices {
            payload.clear();
            payload.extend_from_slice(if n.stale { b"stale," } else { b"live," });
            payload.extend_from_slice(self.routes.name(n.id));
            payload.push(b',');
            payload.extend_from_slice(n.why.as_str().as_bytes());
            tail.clear();
            resp::append_message_tail(&mut tail, STALE_CHANNEL, &payload);
            for (key, prefix) in &subs {
                if let Some(c) = self.sessions.get_mut(*key) {
                    let out = c.state.out();
                    out.extend_from_slice(prefix);
                    out.extend_from_slice(&tail);
                }
            }
        }
        for (key, _) in &subs {
            self.queue_flush(*key);
        }
        notices.len()
    }
}
