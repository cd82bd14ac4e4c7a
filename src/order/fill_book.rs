//! The fill book: turns venue fills, as delivered (out of order, twice,
//! with gaps, from several chunks at once), into each order's `FILL`s in
//! order and its one terminal reply.
//!
//! ```text
//!  Begin(order, chunk sizes) ──▶ parent
//!  Fill(parent, chunk, venue fill) ──▶ sequencer[(parent, chunk)] ──in order──▶ positions[(parent, chunk)]
//!                                          ▲ tick (gap timer)                      │ moved
//!  End(parent, chunk, outcome) ──▶ done?   │                                       ▼
//!                                                        parent cum = Σ chunk cums ──▶ FILL n=1,2,3…
//!                                                        every chunk ended and caught up ──▶ DONE / DEAD / EXPIRED
//! ```
//!
//! A small order is a parent with one chunk. Per chunk, the sequencer
//! (`crate::fills::sequencer`) applies venue fills in fill-number order and
//! the positions (`crate::fills::position`) apply them idempotently from
//! their absolute values; a parent's cumulative lots and amount are the sum
//! of its chunks' last applied absolute values (a chunk that moves from
//! `c₀` to `c₁` moves the parent by `c₁ − c₀`, once, because the position
//! moves once per fill number). The parent's `FILL`s are numbered 1, 2, 3…
//! by the engine, one per applied venue fill, each with the parent's
//! absolute values.
//!
//! Completion: a parent ends when every chunk has ended (its `End` came,
//! always after all its fills: one worker sends them in order on one
//! channel) and no chunk still holds an early fill (a held fill waits for the
//! gap timer). A chunk whose highest delivered fill was refused at a hold
//! bound is brought up to it at the end (absolute values make that exact).
//!
//! Single owner: the fill thread ([`super::fill_thread`]). Pure: time is a
//! parameter and the output goes to a sink, so tests drive it directly.

use std::collections::HashMap;

use crate::bridge::{Amount, Lots, VenueFill};
use crate::dlq::{AttemptRecord, DeadLetter};
use crate::fills::position::{Applied, FillValues, Positions};
use crate::fills::sequencer::{Arrival, SequencerConfig, Sequencers};
use crate::sys::clock::wall_ns;

use super::protocol::{DeadReason, DoneStatus};
use super::types::{Event, EventKind, Order};

/// What the workers (and the retry timer) tell the fill thread.
#[derive(Debug)]
pub enum FillMsg {
    /// An order whose fills will follow, split into chunks of these sizes
    /// (one chunk for a small order). Sent before any of its fills.
    Begin {
        /// The parent order (its id, connection, timing, raw line).
        order: Box<Order>,
        /// Chunk sizes, adding up to the order's quantity.
        chunks: Vec<Lots>,
    },
    /// One venue fill of one chunk, as delivered.
    Fill {
        /// Parent admission number.
        parent: u64,
        /// Chunk index.
        chunk: u32,
        /// The fill, absolute values.
        fill: VenueFill,
    },
    /// A chunk ended; no fill of it follows.
    End {
        /// Parent admission number.
        parent: u64,
        /// Chunk index.
        chunk: u32,
        /// How.
        end: ChunkEnd,
    },
}

/// How a chunk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkEnd {
    /// A bridge executed it; its fills were sent before this.
    Executed {
        /// Highest fill number delivered (0: none).
        last_fill: u32,
        /// Attempts it took.
        attempts: u32,
    },
    /// Refused permanently, retries exhausted, or the engine stopped.
    Dead {
        /// Why.
        reason: DeadReason,
        /// Its attempts.
        history: Vec<AttemptRecord>,
    },
    /// Its TTL passed before it could be sent.
    Expired {
        /// Attempts made.
        attempts: u32,
    },
}

/// What the book hands out.
#[derive(Debug)]
pub enum BookOut {
    /// A reply for the gateway.
    Event(Event),
    /// A dead letter (a parent none of whose chunks executed).
    DeadLetter(Box<DeadLetter>),
}

/// Counts the sequencer does not keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BookStats {
    /// Fills for an order the book does not know (late copies).
    pub unknown: u64,
    /// Fill numbers never received, found at a chunk's end.
    pub missing_at_end: u64,
    /// Chunks that ended dead or expired.
    pub chunks_failed: u64,
    /// Large orders begun (split into chunks).
    pub large_orders: u64,
    /// Chunks of large orders begun.
    pub chunks: u64,
}

#[derive(Debug)]
struct Chunk {
    qty: Lots,
    end: Option<ChunkEnd>,
    /// Highest-numbered fill seen (applied, held, refused or stale).
    latest: Option<VenueFill>,
}

#[derive(Debug)]
struct Parent {
    order: Box<Order>,
    chunks: Vec<Chunk>,
    ended: usize,
    cum: Lots,
    amount: Amount,
    /// `FILL`s sent to the client.
    fills: u32,
}

type Key = (u64, u32);

/// The book. Bounded by the orders in flight (each is begun once and
/// removed at its end) and by the sequencer's hold bounds.
#[derive(Debug)]
pub struct FillBook {
    seq: Sequencers<Key, VenueFill>,
    positions: Positions<Key, u64>,
    parents: HashMap<u64, Parent>,
    touched: Vec<u64>,
    /// Counts.
    pub stats: BookStats,
}

impl FillBook {
    /// An empty book.
    pub fn new(config: SequencerConfig) -> Self {
        FillBook {
            seq: Sequencers::new(config),
            positions: Positions::new(),
            parents: HashMap::new(),
            touched: Vec::new(),
            stats: BookStats::default(),
        }
    }

    /// The sequencer's counts.
    pub fn sequencer(&self) -> &Sequencers<Key, VenueFill> {
        &self.seq
    }

    /// Orders being sequenced now.
    pub fn open(&self) -> usize {
        self.parents.len()
    }

    /// Handles one message at engine time `now_ns`.
    pub fn handle(&mut self, msg: FillMsg, now_ns: u64, out: &mut impl FnMut(BookOut)) {
        match msg {
            FillMsg::Begin { order, chunks } => {
                debug_assert_eq!(chunks.iter().map(|c| c.0).sum::<u64>(), order.qty.0);
                let seq = order.seq;
                if order.lane == super::lanes::Lane::Large {
                    self.stats.large_orders += 1;
                    self.stats.chunks += chunks.len() as u64;
                }
                let chunks = chunks
                    .into_iter()
                    .map(|qty| Chunk {
                        qty,
                        end: None,
                        latest: None,
                    })
                    .collect();
                self.parents.insert(
                    seq,
                    Parent {
                        order,
                        chunks,
                        ended: 0,
                        cum: Lots(0),
                        amount: Amount(0),
                        fills: 0,
                    },
                );
            }
            FillMsg::Fill {
                parent,
                chunk,
                fill,
            } => {
                let Some(p) = self.parents.get_mut(&parent) else {
                    self.stats.unknown += 1;
                    return;
                };
                let Some(c) = p.chunks.get_mut(chunk as usize) else {
                    self.stats.unknown += 1;
                    return;
                };
                if c.latest.is_none_or(|l| fill.fill_no > l.fill_no) {
                    c.latest = Some(fill);
                }
                let Self {
                    seq,
                    positions,
                    parents,
                    ..
                } = self;
                let arrival = seq.arrive(
                    &(parent, chunk),
                    u64::from(fill.fill_no),
                    fill,
                    now_ns,
                    |k, n, v| apply(positions, parents, out, *k, n, v),
                );
                if arrival == Arrival::Refused {
                    log::debug!(
                        "order #{parent} chunk {chunk}: fill {} refused at a hold bound",
                        fill.fill_no
                    );
                }
            }
            FillMsg::End { parent, chunk, end } => {
                let Some(p) = self.parents.get_mut(&parent) else {
                    self.stats.unknown += 1;
                    return;
                };
                let Some(c) = p.chunks.get_mut(chunk as usize) else {
                    self.stats.unknown += 1;
                    return;
                };
                if c.end.is_none() {
                    if !matches!(end, ChunkEnd::Executed { .. }) {
                        self.stats.chunks_failed += 1;
                    }
                    c.end = Some(end);
                    p.ended += 1;
                }
                self.try_finish(parent, out);
            }
        }
    }

    /// The gap timer: skips gaps open longer than the timeout at `now_ns`,
    /// applies what follows, and ends the orders that were waiting only for
    /// that. Returns the gaps skipped.
    pub fn tick(&mut self, now_ns: u64, out: &mut impl FnMut(BookOut)) -> usize {
        let Self {
            seq,
            positions,
            parents,
            touched,
            ..
        } = self;
        touched.clear();
        let skipped = seq.tick(now_ns, |k, n, v| {
            touched.push(k.0);
            apply(positions, parents, out, *k, n, v)
        });
        let mut t = std::mem::take(&mut self.touched);
        t.sort_unstable();
        t.dedup();
        for &p in &t {
            self.try_finish(p, out);
        }
        self.touched = t;
        skipped
    }

    /// Ends `parent` if every chunk has ended and caught up.
    fn try_finish(&mut self, parent: u64, out: &mut impl FnMut(BookOut)) {
        let Some(p) = self.parents.get(&parent) else {
            return;
        };
        if p.ended < p.chunks.len() {
            return;
        }
        if (0..p.chunks.len() as u32).any(|k| self.seq.held(&(parent, k)) > 0) {
            return; // the gap timer will release them
        }
        let mut p = self.parents.remove(&parent).expect("checked above");
        for k in 0..p.chunks.len() {
            let key = (parent, k as u32);
            // A fill above everything applied that never got through (refused
            // at a hold bound): its absolute values bring the chunk up to date.
            if let Some(latest) = p.chunks[k].latest {
                let next = self.seq.next_expected(&key);
                let n = u64::from(latest.fill_no);
                if n >= next {
                    self.stats.missing_at_end += n - next;
                    log::warn!(
                        "order {} chunk {k}: fill(s) {next}..{} never applied; brought up to fill {n}",
                        p.order.id,
                        n - 1
                    );
                    apply_one(&mut self.positions, &mut p, out, key, n, latest);
                }
            }
            self.seq.finish(&key);
            self.positions.remove(&key);
        }
        finish(p, out);
    }
}

/// The sequencer's apply callback: one venue fill of chunk `key`, in order.
fn apply(
    positions: &mut Positions<Key, u64>,
    parents: &mut HashMap<u64, Parent>,
    out: &mut impl FnMut(BookOut),
    key: Key,
    n: u64,
    v: VenueFill,
) {
    if let Some(p) = parents.get_mut(&key.0) {
        apply_one(positions, p, out, key, n, v);
    }
}

/// Applies venue fill `n` of chunk `key` to the chunk's position and, if it
/// moved, the parent's absolute values; sends the parent's `FILL`.
fn apply_one(
    positions: &mut Positions<Key, u64>,
    p: &mut Parent,
    out: &mut impl FnMut(BookOut),
    key: Key,
    n: u64,
    v: VenueFill,
) {
    let chunk_qty = p.chunks[key.1 as usize].qty.0;
    let prev = positions.get(&key).copied().unwrap_or_default();
    let values = FillValues {
        fill_no: n,
        cum_qty: v.cum_lots.0,
        cum_amount: v.cum_amount.0,
        remaining: chunk_qty.saturating_sub(v.cum_lots.0),
    };
    if positions.apply(&key, values) == Applied::Unchanged {
        return;
    }
    // parent = Σ chunk positions, and this chunk's share is `prev` now: no underflow.
    p.cum = Lots(p.cum.0 - prev.cum_qty + values.cum_qty);
    p.amount = Amount(p.amount.0 - prev.cum_amount + values.cum_amount);
    p.fills += 1;
    let left = Lots(p.order.qty.0.saturating_sub(p.cum.0));
    out(BookOut::Event(event(
        &p.order,
        EventKind::Fill {
            n: p.fills,
            cum: p.cum,
            amount: p.amount,
            left,
        },
    )));
}

fn event(o: &Order, kind: EventKind) -> Event {
    Event {
        conn: o.conn,
        id: std::sync::Arc::clone(&o.id),
        recv_mono_ns: o.recv_mono_ns,
        lane: o.lane,
        kind,
    }
}

/// The parent's terminal reply: `DONE` if any chunk executed; otherwise
/// `DEAD` (with a replayable dead letter: nothing was executed) if any chunk
/// died, else `REJECT … EXPIRED`.
fn finish(mut p: Parent, out: &mut impl FnMut(BookOut)) {
    let mut attempts = 0u32;
    let mut executed = false;
    let mut dead: Option<DeadReason> = None;
    let mut failed = 0usize;
    let mut history = Vec::new();
    for c in &mut p.chunks {
        match c.end.take().expect("every chunk ended") {
            ChunkEnd::Executed { attempts: a, .. } => {
                attempts += a;
                executed = true;
            }
            ChunkEnd::Dead { reason, history: h } => {
                attempts += h.len() as u32;
                dead.get_or_insert(reason);
                history.extend(h);
                failed += 1;
            }
            ChunkEnd::Expired { attempts: a } => {
                attempts += a;
                failed += 1;
            }
        }
    }
    let kind = if executed {
        if failed > 0 {
            log::warn!(
                "order {}: {failed} of {} chunks failed; ended {} of {} lots",
                p.order.id,
                p.chunks.len(),
                p.cum,
                p.order.qty
            );
        }
        EventKind::Done {
            status: DoneStatus::of(p.cum, p.order.qty),
            cum: p.cum,
            amount: p.amount,
            attempts,
        }
    } else if let Some(reason) = dead {
        p.order.history = history;
        out(BookOut::DeadLetter(Box::new(
            p.order.dead_letter(reason, wall_ns()),
        )));
        EventKind::Dead {
            reason,
            attempts,
            last: p.order.last_outcome().to_string(),
        }
    } else {
        EventKind::Expired { attempts }
    };
    out(BookOut::Event(event(&p.order, kind)));
}
