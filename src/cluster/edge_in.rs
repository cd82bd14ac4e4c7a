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
//! (`recv_mono_ns`) is the edge's, for its own stage histograms. A live
//! update's trip from the ingest's receipt to this slot is the `backbone`
//! stage (wall clocks: the ingest's, carried in the update, and ours).
//!
//! Single owner: the NATS thread of an edge.

use std::sync::Arc;

use mio::Waker;

use super::order_guard::OrderGuard;
use super::wire::Update;
use crate::metrics::cluster_counters::BackboneDrop;
use crate::metrics::counters::{bump, set};
use crate::metrics::{Counters, Stage, StageRecorder};
use crate::model::tick::SlotValue;
use crate::slots::SlotWriter;
use crate::symbols::{SymbolId, SymbolInterner};
use crate::sys::clock::{wall_ns, MonoClock};

/// What an edge's way in is made of: the write ends the feed would have
/// had, the publisher's waker, the engine clock and the recorder of the
/// `backbone` stage.
#[derive(Debug)]
pub(crate) struct EdgeParts {
    /// The symbol interner (its only writer).
    pub interner: SymbolInterner,
    /// The slots (their only writer).
    pub slots: SlotWriter,
    /// Wakes the publisher.
    pub publisher: Arc<Waker>,
    /// The engine clock.
    pub clock: MonoClock,
    /// Records the `backbone` stage.
    pub recorder: StageRecorder,
}

/// The edge's slot writer with its guard.
#[derive(Debug)]
pub(crate) struct EdgeIn {
    interner: SymbolInterner,
    slots: SlotWriter,
    guard: OrderGuard,
    publisher: Arc<Waker>,
    counters: Arc<Counters>,
    clock: MonoClock,
    /// The `backbone` stage's histograms (this thread's).
    recorder: StageRecorder,
    wake_pending: bool,
}

impl EdgeIn {
    /// Takes over the write ends the feed would have had.
    pub(crate) fn new(parts: EdgeParts, counters: Arc<Counters>) -> Self {
        let guard = OrderGuard::new(parts.slots.capacity());
        EdgeIn {
            interner: parts.interner,
            slots: parts.slots,
            guard,
            publisher: parts.publisher,
            counters,
            clock: parts.clock,
            recorder: parts.recorder,
            wake_pending: false,
        }
    }

    /// Slots (symbols) it can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Writes `u` as the newest value of `symbol` when it is newer than the
    /// one held; returns the symbol's id. `live`: an update as published
    /// (not a snapshot, whose value may be old by design), timed in the
    /// `backbone` stage when written.
    ///
    /// # Errors
    /// The reason it was dropped (counted by the caller).
    pub(crate) fn apply(
        &mut self,
        symbol: &[u8],
        u: &Update,
        live: bool,
    ) -> Result<SymbolId, BackboneDrop> {
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
        let now = self.clock.now_ns();
        let v = SlotValue {
            quote: u.quote,
            seq: u.seq,
            recv_wall_ns: u.recv_wall_ns,
            recv_mono_ns: now,
        };
        if live {
            let transit = wall_ns().saturating_sub(u.recv_wall_ns);
            self.recorder.record_n_at(Stage::Backbone, transit, 1, now);
        }
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

    /// Hands the `backbone` stage's interval to the reporter once it ends
    /// (the loop calls this on its tick, so an idle edge still reports).
    pub(crate) fn flush_stats(&mut self) {
        self.recorder.maybe_flush(self.clock.now_ns());
    }

    /// The last hand-off (the loop ends).
    pub(crate) fn finish_stats(&mut self) {
        self.recorder.finish(self.clock.now_ns());
    }

    /// Wakes the publisher once for the writes since the last call.
    pub(crate) fn wake(&mut self) {
        if std::mem::take(&mut self.wake_pending) {
            let _ = self.publisher.wake();
        }
    }
}
