//! The accepted order: what travels through the order path (gateway →
//! lane queue → worker → delay queue → worker … → fill thread), owned by one
//! stage at a time. What comes back to the gateway about it is an
//! [`Event`](super::event::Event).

use std::sync::Arc;

use crate::dlq::{AttemptRecord, DeadLetter};
use crate::model::lane::Lane;
use crate::model::order_reasons::DeadReason;
use crate::model::units::{Amount, Lots, Side};
use crate::net::ConnId;

use super::claim::Claim;

/// An accepted order. Owned by exactly one stage at a time (queue, worker,
/// delay queue): it moves, it is never shared.
///
/// Over 15 fields: it is the whole record of one order as it travels
/// (what the client sent, its timestamps, its attempts, its routing and
/// claim), moved by value from stage to stage rather than looked up in a
/// shared table, so every stage finds what it needs on the order itself.
#[derive(Debug)]
pub(crate) struct Order {
    /// Admission number (gateway), 1-based; also spreads orders over bridges.
    pub seq: u64,
    /// The connection that sent it.
    pub conn: ConnId,
    /// Client order id.
    pub id: Arc<str>,
    /// Symbol.
    pub symbol: Box<str>,
    /// Side.
    pub side: Side,
    /// Quantity.
    pub qty: Lots,
    /// The `NEW` line as received (dead letter and replay).
    pub raw: Box<str>,
    /// Its ordering key, `<acct> <symbol>`, when `NEW` had `acct=`
    /// (`None` for chunks: their parent holds the key; see
    /// `gateway/acct.rs`).
    pub acct_key: Option<Arc<str>>,
    /// Where it came from (dead letter); shared with its connection.
    pub peer: Arc<str>,
    /// Received, measurement clock ns.
    pub recv_mono_ns: u64,
    /// Offered to a queue, measurement clock ns (queue wait).
    pub enq_mono_ns: u64,
    /// Past this engine-clock ns it is expired, not sent.
    pub deadline_ns: Option<u64>,
    /// Received, wall-clock ns (dead letter `first_seen`).
    pub recv_wall_ns: u64,
    /// Attempts made so far, oldest first.
    pub history: Vec<AttemptRecord>,
    /// Delay drawn before the next attempt, ns, and its ceiling (0, 0 before the first).
    pub next_delay: (u64, u64),
    /// When its retry came due, engine-clock ns (set by the retry timer; 0
    /// before the first retry): the start of its retry wait.
    pub retry_due_ns: u64,
    /// Is this a replay of a dead-lettered order?
    pub replay: bool,
    /// Its lane (set by [`super::admission::Admission::offer`]).
    pub lane: Lane,
    /// Set on a chunk of a large order (its `id` is then `<parent id>.c<index>`).
    pub chunk: Option<ChunkOf>,
    /// What its client was already sent before a restart (from the journal).
    pub resumed: Resumed,
    /// Who may act on it next: a worker or a `CANCEL` (shared with the
    /// gateway's cancel book; a chunk has its own, never cancelled).
    pub claim: Arc<Claim>,
}

/// What the journal tells of an order before a restart: its fills already
/// sent (`FILL 1..=fills`; the fill thread sends none of these numbers
/// again) and the bridge its last attempt went to (the re-send goes there
/// first: the venue's idempotency key is the id at that venue).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Resumed {
    /// The bridge of its last journaled attempt.
    pub bridge: Option<Box<str>>,
    /// Attempts journaled before the restart (its `history` starts with
    /// that many entries whose outcome the restart left unknown).
    pub attempts: u32,
    /// A large order's chunks: (index, bridge of its last journaled attempt).
    pub chunk_bridges: Vec<(u32, Box<str>)>,
    /// Its admission number before the restart (its `Accepted` record's):
    /// its attempts are routed from it, not from the new one, so a first
    /// attempt whose record the crash lost (it is not synced before the
    /// call, see `lanes/worker.rs`) is re-sent where it may have gone.
    pub route: Option<u64>,
    /// Last `FILL` number sent.
    pub fills: u32,
    /// Cumulative lots after it.
    pub cum: Lots,
    /// Cumulative amount after it.
    pub amount: Amount,
}

/// Which part of which order a chunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkOf {
    /// The parent's admission number.
    pub parent: u64,
    /// 0-based.
    pub index: u32,
    /// Chunks of the parent.
    pub count: u32,
}

impl Order {
    /// Attempts made so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.history.len() as u32
    }

    /// The number its attempts are routed from: its admission number, or
    /// for a recovered order the one it had before the restart.
    pub(crate) fn route_seq(&self) -> u64 {
        self.resumed.route.unwrap_or(self.seq)
    }

    /// The bridge a recovered order (or chunk) goes back to first: the one
    /// its last journaled attempt went to, while no attempt was made since
    /// the restart (that venue knows the id: a re-sent id returns the first
    /// execution's fills).
    pub(crate) fn resend_to(&self) -> Option<&str> {
        let fresh = self.attempts() == self.resumed.attempts;
        self.resumed.bridge.as_deref().filter(|_| fresh)
    }

    /// Is the order past its deadline at engine-clock `now_ns`?
    pub(crate) fn expired_at(&self, now_ns: u64) -> bool {
        self.deadline_ns.is_some_and(|d| now_ns >= d)
    }

    /// Its dead-letter record.
    pub(crate) fn dead_letter(&self, reason: DeadReason, now_wall_ns: u64) -> DeadLetter {
        let mut rec = DeadLetter::refused(
            "order",
            &self.peer,
            reason.as_str(),
            self.raw.as_bytes(),
            self.raw.len(),
            self.recv_wall_ns,
        );
        rec.attempts = self.attempts();
        rec.last_seen_ns = now_wall_ns;
        rec.order_id = Some(self.id.to_string());
        rec.history = self.history.clone();
        rec
    }

    /// What the last attempt got back (for `DEAD … last=`).
    pub(crate) fn last_outcome(&self) -> &str {
        self.history
            .last()
            .map(|a| a.outcome.as_str())
            .unwrap_or("")
    }
}
