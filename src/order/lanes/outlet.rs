//! Where the results of an attempt go: the [`Outlet`] a worker and the retry
//! timer hold. Replies go to the gateway, fills and chunk outcomes to the
//! fill thread, dead letters to the DLQ; every send waits for room, so
//! nothing after `ACK` is dropped.
//!
//! It has its own file because three parts use it: the lane workers, the
//! retry timer ([`super::retry_handoff`]) and the wiring, which builds both
//! and dead-letters through it what is still queued at a shutdown's
//! deadline (`order/wiring.rs`).

use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::bridge::VenueFill;
use crate::dlq::DlqSender;
use crate::logging::repeat::error_repeating;
use crate::model::order_reasons::DeadReason;
use crate::model::warning::WarnKind;
use crate::order::msg::fill::{ChunkEnd, FillMsg};
use crate::order::msg::order::Order;
use crate::sys::clock::wall_ns;

use crate::order::msg::event::{Event, EventKind, EventSender};

/// Where a worker's (and the retry timer's) results go: replies to the
/// gateway, fills and chunk outcomes to the fill thread, dead letters to the
/// DLQ. Every send waits for room: nothing after `ACK` is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Outlet {
    /// Replies.
    pub events: EventSender,
    /// To the fill thread.
    pub fills: Sender<FillMsg>,
    /// Dead letters.
    pub dlq: DlqSender,
}

impl Outlet {
    /// Sends one message to the fill thread, waiting for room.
    pub(super) fn to_fills(&self, msg: FillMsg) {
        if self.fills.send(msg).is_err() {
            // The fill thread stops only after every sender has gone: unreachable.
            log::error!("fill message lost: fill thread stopped first");
        }
    }

    /// An executed attempt: its fills, as delivered, then its end, to the
    /// fill thread (a small order is first begun there as a one-chunk parent).
    pub(crate) fn executed(&self, o: Order, fills: Vec<VenueFill>) {
        let attempts = o.attempts();
        let last_fill = fills.iter().map(|f| f.fill_no).max().unwrap_or(0);
        let (parent, chunk) = match o.chunk {
            Some(c) => (c.parent, c.index),
            None => {
                let (seq, qty) = (o.seq, o.qty);
                self.to_fills(FillMsg::Begin {
                    order: Box::new(o),
                    chunks: vec![qty],
                });
                (seq, 0)
            }
        };
        for fill in fills {
            self.to_fills(FillMsg::Fill {
                parent,
                chunk,
                fill,
            });
        }
        self.to_fills(FillMsg::End {
            parent,
            chunk,
            end: ChunkEnd::Executed {
                last_fill,
                attempts,
            },
        });
    }

    /// Dead: an order goes to the DLQ and its client gets `DEAD`; a chunk's
    /// end goes to the fill thread (the parent answers).
    pub(crate) fn dead(&self, o: Order, reason: DeadReason) {
        match o.chunk {
            Some(c) => self.to_fills(FillMsg::End {
                parent: c.parent,
                chunk: c.index,
                end: ChunkEnd::Dead {
                    reason,
                    history: o.history,
                },
            }),
            None => dead_letter(&self.dlq, &self.events, o, reason),
        }
    }

    /// A step that moves the order's `STATUS` only ([`EventKind::Attempt`],
    /// [`EventKind::Parked`]); a chunk's step is reported for its parent.
    /// Does not wake the gateway: the attempt's end does.
    pub(crate) fn progress(&self, o: &Order, kind: EventKind) {
        let id = match o.chunk {
            // A chunk's id is `<parent id>.c<index>` (see the worker's `split`).
            Some(_) => Arc::from(o.id.rsplit_once(".c").map_or(&*o.id, |(p, _)| p)),
            None => Arc::clone(&o.id),
        };
        self.events.send(Event {
            conn: o.conn,
            id,
            recv_mono_ns: o.recv_mono_ns,
            lane: o.lane,
            kind,
        });
    }

    /// A chunk dropped unsent: its order was cancelled before it started.
    pub(crate) fn chunk_cancelled(&self, o: &Order) {
        if let Some(c) = o.chunk {
            self.to_fills(FillMsg::End {
                parent: c.parent,
                chunk: c.index,
                end: ChunkEnd::Cancelled,
            });
        }
    }

    /// Past its TTL before it could be sent.
    pub(crate) fn expired(&self, o: &Order) {
        let attempts = o.attempts();
        match o.chunk {
            Some(c) => self.to_fills(FillMsg::End {
                parent: c.parent,
                chunk: c.index,
                end: ChunkEnd::Expired { attempts },
            }),
            None => self.events.send(Event {
                conn: o.conn,
                id: Arc::clone(&o.id),
                recv_mono_ns: o.recv_mono_ns,
                lane: o.lane,
                kind: EventKind::Expired { attempts },
            }),
        }
    }
}

/// Hands `o` (an order, not a chunk) to the DLQ and waits until its record
/// is synced, then tells the gateway (which journals the `DEAD` and
/// replies). So a dead letter is on disk before the journal ends its order:
/// a crash in between leaves an order the journal still holds open and the
/// DLQ holds dead, which recovery ends as `DEAD` (`journal::startup`).
/// Used through [`Outlet::dead`].
pub(crate) fn dead_letter(dlq: &DlqSender, events: &EventSender, o: Order, reason: DeadReason) {
    let rec = o.dead_letter(reason, wall_ns());
    if let Err(e) = dlq.record_durably(rec, false) {
        error_repeating!(
            WarnKind::DeadLetterFailed,
            "dead letter of order {}: {e}",
            o.id
        );
    }
    events.send(Event {
        conn: o.conn,
        id: Arc::clone(&o.id),
        recv_mono_ns: o.recv_mono_ns,
        lane: o.lane,
        kind: EventKind::Dead {
            reason,
            attempts: o.attempts(),
            last: o.last_outcome().to_string(),
        },
    });
}
