//! The edge's way in: backbone values into the edge's own slots.
//!
//! On an edge this is the only writer of the slots and of the symbol
//! interner (the role the feed thread has on the other roles), so the
//! publisher, its routes, snapshots, per-subscriber conflation, throttles
//! and auth work unchanged. Each value passes the [`OrderGuard`] first:
//! only a strictly newer sequence number reaches a slot. The publisher is
//! woken once per batch of writes that queued a symbol, as the feed does.
//!
//! The value keeps the ingest's sequence number and receive time, so an
//! edge's subscriber reads the same payload an ingest's subscriber reads,
//! and freshness counts from the ingest's receipt; the local receive time
//! (`recv_mono_ns`) is the edge's, for its own stage histograms.
//!
//! Single owner: the NATS thread of an edge.

use std::sync::Arc;

use mio::Waker;

use super::order_guard::OrderGuard;
use super::wire::Update;
use crate::metrics::cluster_counters::BackboneDrop;
use crate::metrics::counters::{bump, set};
use crate::metrics::Counters;
use crate::model::tick::SlotValue;
use crate::slots::SlotWriter;
use crate::symbols::{SymbolId, SymbolInterner};
use crate::sys::clock::MonoClock;

/// The edge's slot writer with its guard.
#[derive(Debug)]
pub(crate) struct EdgeIn {
    interner: SymbolInterner,
    slots: SlotWriter,
    guard: OrderGuard,
    publisher: Arc<Waker>,
    counters: Arc<Counters>,
    clock: MonoClock,
    wake_pending: bool,
}

impl EdgeIn {
    /// Takes over the write ends the feed would have had.
    pub(crate) fn new(
        interner: SymbolInterner,
        slots: SlotWriter,
        publisher: Arc<Waker>,
        counters: Arc<Counters>,
        clock: MonoClock,
    ) -> Self {
        let guard = OrderGuard::new(slots.capacity());
        EdgeIn {
            interner,
            slots,
            guard,
            publisher,
            counters,
            clock,
            wake_pending: false,
        }
    }

    /// Writes `u` as the newest value of `symbol` when it is newer than the
    /// one held; returns the symbol's id.
    ///
    /// # Errors
    /// The reason it was dropped (counted by the caller).
    pub(crate) fn apply(&mut self, symbol: &[u8], u: &Update) -> Result<SymbolId, BackboneDrop> {
        let id = self
            .interner
            .intern(symbol)
            .map_err(|_| BackboneDrop::SymbolLimit)?;
        set(
            &self.counters.feed.symbols,
            self.interner.table().len() as u64,
        );
        let a = self.guard.admit(id, u.epoch, u.seq)?;
        let c = &self.counters.cluster;
        if a.epoch_changed {
            bump(&c.epoch_changes, 1);
        }
        bump(&c.applied, 1);
        let v = SlotValue {
            quote: u.quote,
            seq: u.seq,
            recv_wall_ns: u.recv_wall_ns,
            recv_mono_ns: self.clock.now_ns(),
        };
        if self.slots.write(id, &v) {
            self.wake_pending = true;
        }
        Ok(id)
    }

    /// The engine clock now (the publisher's clock too).
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The id of a symbol already written (`None` for one never seen).
    pub(crate) fn id(&mut self, symbol: &[u8]) -> Option<SymbolId> {
        let known = self.interner.table().len();
        self.interner
            .intern(symbol)
            .ok()
            .filter(|&id| (id as usize) < known)
    }

    /// Wakes the publisher once for the writes since the last call.
    pub(crate) fn wake(&mut self) {
        if std::mem::take(&mut self.wake_pending) {
            let _ = self.publisher.wake();
        }
    }
}
