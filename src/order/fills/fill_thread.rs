//! The fill thread: the single owner of the fill book (sequencers,
//! positions, chunk aggregation) and its gap timer.
//!
//! ```text
//!  workers ──FillMsg (bounded, senders wait)──▶ ┌───────────┐ ──FILL/DONE/DEAD/EXPIRED──▶ gateway
//!  retry timer ─────────────────────────────────▶│ fill book │ ──dead letters──▶ DLQ
//!               own tick, every `gap_tick` ─────▶└───────────┘
//! ```
//!
//! Why one owner: fill arrivals and timer ticks are both handled on this
//! thread, one after the other, so the timer and an arrival can never apply
//! the same fill twice or interleave inside the sequence (no lock; a lock
//! both took would serialise the same work and add a contended cache line).
//!
//! The tick is real time (`recv_timeout` on the inbox, so it fires when no
//! message arrives at all); the age of a gap is measured on the engine clock,
//! so on a simulated clock a gap is skipped within one real tick after the
//! simulated time passes its deadline.
//!
//! Bounds and waits: the inbox is bounded ([`FILL_CAPACITY`]); workers wait
//! when it is full (a fill is never dropped). This thread waits on the
//! gateway's event channel and on the DLQ, neither of which waits on it, so
//! there is no cycle. It stops when every sender has gone (workers and
//! timer finished); by then every chunk has ended, so skipping the gaps still
//! open gives every order its terminal reply.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::dlq::DlqSender;
use crate::logging::repeat::error_repeating;
use crate::metrics::counters::{set, Counters};
use crate::model::warning::WarnKind;
use crate::retry::SharedClock;

use crate::order::msg::event::EventSender;

use super::fill_book::{BookOut, FillBook};
use crate::order::msg::fill::FillMsg;

/// Capacity of the inbox.
pub(crate) const FILL_CAPACITY: usize = 16 * 1024;
/// Messages handled between two looks at the timer.
const BATCH: usize = 256;

/// The loop's state.
#[derive(Debug)]
pub(crate) struct FillThread {
    /// From the workers and the retry timer.
    pub inbox: Receiver<FillMsg>,
    /// The book it owns.
    pub book: FillBook,
    /// Engine clock (gap ages).
    pub clock: SharedClock,
    /// Replies.
    pub events: EventSender,
    /// Dead letters.
    pub dlq: DlqSender,
    /// Its counters are `counters.fills` (single writer: this thread).
    pub counters: Arc<Counters>,
    /// Gap timer period.
    pub tick: Duration,
}

impl FillThread {
    /// Runs until every sender has gone and the book is empty.
    pub(crate) fn run(mut self) {
        let mut out: Vec<BookOut> = Vec::with_capacity(64);
        let mut next_tick = Instant::now() + self.tick;
        let mut open = true;
        while open {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(msg) => {
                    let now = self.clock.now_ns();
                    self.book.handle(msg, now, &mut |o| out.push(o));
                    for _ in 1..BATCH {
                        match self.inbox.try_recv() {
                            Ok(msg) => self.book.handle(msg, now, &mut |o| out.push(o)),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => {
                                open = false;
                                break;
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
            if Instant::now() >= next_tick {
                self.book.tick(self.clock.now_ns(), &mut |o| out.push(o));
                crate::metrics::counters::bump(&self.counters.fills.ticks, 1);
                next_tick = Instant::now() + self.tick;
            }
            self.flush(&mut out);
        }
        // Every chunk has ended: nothing more will arrive, so skip what is still open.
        self.book.tick(u64::MAX, &mut |o| out.push(o));
        if self.book.open() > 0 {
            log::error!(
                "{} order(s) never ended in the fill thread (a chunk without its End)",
                self.book.open()
            );
        }
        self.flush(&mut out);
    }

    fn flush(&mut self, out: &mut Vec<BookOut>) {
        // Counted before the replies go out, so a client that reads a reply
        // and then the counters sees what led to it.
        self.publish();
        let any = !out.is_empty();
        for o in out.drain(..) {
            match o {
                BookOut::Event(ev) => self.events.send(ev),
                BookOut::DeadLetter(rec) => {
                    let id = rec.order_id.clone().unwrap_or_default();
                    // Synced before the `Dead` event that follows it, as
                    // `lanes::outlet::dead_letter` does.
                    if let Err(e) = self.dlq.record_durably(*rec, false) {
                        error_repeating!(
                            WarnKind::DeadLetterFailed,
                            "dead letter of order {id}: {e}"
                        );
                    }
                }
            }
        }
        if any {
            self.events.wake();
        }
    }

    fn publish(&self) {
        let f = &self.counters.fills;
        let s = &self.book.sequencer().stats;
        let b = &self.book.stats;
        set(&f.applied, s.applied);
        set(&f.held, s.held);
        set(&f.stale, s.stale + b.unknown);
        set(&f.refused, s.refused);
        set(&f.gaps_skipped, s.gaps_skipped);
        set(&f.fills_missing, s.fills_missing + b.missing_at_end);
        set(&f.held_now, self.book.sequencer().held_total() as u64);
        set(&f.chunks_failed, b.chunks_failed);
        set(&f.large_orders, b.large_orders);
        set(&f.chunks, b.chunks);
        set(&f.open, self.book.open() as u64);
    }
}
