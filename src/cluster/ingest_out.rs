//! The ingest's outbox: the publisher hands each conflated update here, the
//! NATS thread sends it on `<prefix>.md.<symbol>` at its own pace.
//!
//! The same conflation as the slots, one level down: one entry per symbol
//! holding the latest payload (exactly what the ingest's subscribers get)
//! and its sequence number, plus a queue of ids with an unsent payload. The
//! publisher's [`Outbox::offer`] copies the payload into the entry's buffer
//! (no allocation once the buffer has grown to the symbol's largest
//! payload) and queues the id only on its first unsent update; a later one
//! overwrites (counted as `tickfan_cluster_outbox_conflated_total`). So the
//! publisher never blocks and never drops the newest value; the queue holds
//! each id at most once and so never overflows (capacity = `--max-symbols`).
//!
//! The entry keeps its latest payload after it is sent: it is what the
//! ingest's snapshot replies carry.
//!
//! Writers: the publisher thread (offer); readers: the NATS thread (take,
//! snapshot). Each entry's mutex is held for one copy; the two threads meet
//! on one symbol only when the NATS thread sends it as it is updated.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::metrics::counters::bump;
use crate::metrics::Counters;
use crate::symbols::SymbolId;

#[derive(Debug, Default)]
struct Entry {
    payload: Vec<u8>,
    seq: u64,
    queued: bool,
}

/// The publisher → NATS hand-off of an ingest.
#[derive(Debug)]
pub(crate) struct Outbox {
    entries: Box<[Mutex<Entry>]>,
    dirty: ArrayQueue<SymbolId>,
    wake: Arc<Notify>,
    counters: Arc<Counters>,
}

impl Outbox {
    /// An outbox for `capacity` symbols that wakes `wake` when an id is queued.
    pub(crate) fn new(capacity: usize, wake: Arc<Notify>, counters: Arc<Counters>) -> Self {
        Outbox {
            entries: (0..capacity)
                .map(|_| Mutex::new(Entry::default()))
                .collect(),
            dirty: ArrayQueue::new(capacity),
            wake,
            counters,
        }
    }

    /// The publisher's hook: `payload` (seq `seq`) is the newest value of `id`.
    #[inline]
    pub(crate) fn offer(&self, id: SymbolId, payload: &[u8], seq: u64) {
        let Some(entry) = self.entries.get(id as usize) else {
            return;
        };
        let mut e = entry.lock();
        e.payload.clear();
        e.payload.extend_from_slice(payload);
        e.seq = seq;
        if e.queued {
            drop(e);
            bump(&self.counters.cluster.out_conflated, 1);
        } else {
            e.queued = true;
            drop(e);
            let pushed = self.dirty.push(id);
            debug_assert!(pushed.is_ok(), "each id is queued at most once");
            self.wake.notify_one();
        }
    }

    /// The next unsent update: its id, payload and seq.
    pub(crate) fn take(&self) -> Option<(SymbolId, bytes::Bytes, u64)> {
        let id = self.dirty.pop()?;
        let mut e = self.entries[id as usize].lock();
        e.queued = false;
        Some((id, bytes::Bytes::copy_from_slice(&e.payload), e.seq))
    }

    /// The latest payload and seq of `id`, for a snapshot reply; `None`
    /// when it has none.
    pub(crate) fn latest(&self, id: SymbolId, out: &mut Vec<u8>) -> Option<u64> {
        let e = self.entries.get(id as usize)?.lock();
        if e.seq == 0 {
            return None;
        }
        out.extend_from_slice(&e.payload);
        Some(e.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsent_update_is_overwritten_and_counted_never_queued_twice() {
        let counters = Arc::new(Counters::default());
        let o = Outbox::new(4, Arc::new(Notify::new()), Arc::clone(&counters));
        o.offer(1, b"a", 1);
        o.offer(1, b"bb", 2);
        o.offer(2, b"c", 1);
        let (id, p, seq) = o.take().unwrap();
        assert_eq!((id, &p[..], seq), (1, &b"bb"[..], 2));
        assert_eq!(o.take().map(|t| t.0), Some(2));
        assert!(o.take().is_none());
        assert_eq!(counters.cluster.snapshot().out_conflated, 1);
        let mut out = Vec::new();
        assert_eq!(o.latest(1, &mut out), Some(2));
        assert_eq!(out, b"bb", "the sent value stays for snapshots");
        assert_eq!(o.latest(3, &mut Vec::new()), None);
        assert_eq!(o.latest(99, &mut Vec::new()), None);
    }
}
