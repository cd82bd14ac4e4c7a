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
//! ([`super::sequencer`]) applies venue fills in fill-number order and
//! the positions ([`super::position`]) apply them idempotently from
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

use crate::bridge::VenueFill;
use crate::dlq::DeadLetter;
use crate::logging::repeat::warn_repeating;
use crate::model::order_reasons::{DeadReason, DoneStatus};
use crate::model::units::{Amount, Lots};
use crate::model::warning::WarnKind;
use crate::order::msg::event::{Event, EventKind};
use crate::order::msg::fill::{ChunkEnd, FillMsg};
use crate::order::msg::order::Order;
use crate::sys::clock::wall_ns;

use super::position::{Applied, FillValues, Positions};
use super::sequencer::{Arrival, Sequencers};
use crate::order::config::SequencerConfig;

/// What the book hands out.
#[derive(Debug)]
pub(crate) enum BookOut {
    /// A reply for the gateway.
    Event(Event),
    /// A dead letter (a parent none of whose chunks executed).
    DeadLetter(Box<DeadLetter>),
}

/// Counts the sequencer does not keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BookStats {
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
pub(crate) struct FillBook {
    seq: Sequencers<Key, VenueFill>,
    positions: Positions<Key, u64>,
    parents: HashMap<u64, Parent>,
    touched: Vec<u64>,
    /// Counts.
    pub stats: BookStats,
}

impl FillBook {
    /// An empty book.
    pub(crate) fn new(config: SequencerConfig) -> Self {
        FillBook {
            seq: Sequencers::new(config),
            positions: Positions::new(),
            parents: HashMap::new(),
            touched: Vec::new(),
            stats: BookStats::default(),
        }
    }

    /// The sequencer's counts.
    pub(crate) fn sequencer(&self) -> &Sequencers<Key, VenueFill> {
        &self.seq
    }

    /// Orders being sequenced now.
    pub(crate) fn open(&self) -> usize {
        self.parents.len()
    }

    /// Handles one message at engine time `now_ns`.
    pub(crate) fn handle(&mut self, msg: FillMsg, now_ns: u64, out: &mut impl FnMut(BookOut)) {
        match msg {
            FillMsg::Begin { order, chunks } => {
                debug_assert_eq!(chunks.iter().map(|c| c.0).sum::<u64>(), order.qty.0);
                let seq = order.seq;
                if order.lane == crate::model::lane::Lane::Large {
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
    pub(crate) fn tick(&mut self, now_ns: u64, out: &mut impl FnMut(BookOut)) -> usize {
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
                    warn_repeating!(WarnKind::FillsSkipped,
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
    if p.fills <= p.order.resumed.fills {
        // Sent (and journaled) before a restart; the idempotent venue
        // re-answered the same fills: numbers continue, none repeats.
        return;
    }
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

/// The parent's terminal reply: `DONE` if any chunk executed (`PARTIAL`
/// when a chunk failed or was cancelled); otherwise `DEAD` (with a
/// replayable dead letter: nothing was executed) if any chunk died, else
/// `DONE … CANCELED` if a chunk was cancelled, else `REJECT … EXPIRED`.
fn finish(mut p: Parent, out: &mut impl FnMut(BookOut)) {
    let mut attempts = 0u32;
    let mut executed = false;
    let mut dead: Option<DeadReason> = None;
    let mut failed = 0usize;
    let mut cancelled = false;
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
            ChunkEnd::Cancelled => {
                cancelled = true;
                failed += 1;
            }
        }
    }
    let kind = if executed {
        if failed > 0 {
            warn_repeating!(
                WarnKind::ChunksFailed,
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
    } else if cancelled {
        EventKind::Done {
            status: DoneStatus::Canceled,
            cum: p.cum,
            amount: p.amount,
            attempts,
        }
    } else {
        EventKind::Expired { attempts }
    };
    out(BookOut::Event(event(&p.order, kind)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::AttemptRecord;
    use crate::model::lane::Lane;
    use crate::model::units::{Price, Side};
    use crate::net::ConnId;

    fn order(seq: u64, qty: u64) -> Box<Order> {
        Box::new(Order {
            seq,
            conn: ConnId::from_u64(1),
            id: format!("p{seq}").into(),
            symbol: "X".into(),
            side: Side::Buy,
            qty: Lots(qty),
            raw: format!("NEW p{seq} X BUY {}", Lots(qty)).into(),
            acct_key: None,
            peer: "test".into(),
            recv_mono_ns: 0,
            enq_mono_ns: 0,
            deadline_ns: None,
            recv_wall_ns: 0,
            history: Vec::new(),
            next_delay: (0, 0),
            retry_due_ns: 0,
            replay: false,
            lane: Lane::Large,
            chunk: None,
            resumed: Default::default(),
            claim: Default::default(),
        })
    }

    /// Fills of a chunk of `qty` lots cut into `n` parts at price 100,000 + chunk.
    fn venue_fills(chunk: u32, qty: u64, n: u32) -> Vec<VenueFill> {
        let price = Price(100_000 + u64::from(chunk));
        (1..=n)
            .map(|i| {
                let cum = Lots(qty * u64::from(i) / u64::from(n));
                VenueFill {
                    fill_no: i,
                    cum_lots: cum,
                    cum_amount: Amount::of(cum, price),
                    price,
                }
            })
            .collect()
    }

    fn cfg(per_order: usize) -> SequencerConfig {
        SequencerConfig {
            max_held_per_order: per_order,
            max_held_total: 1_000,
            gap_timeout_ns: 200,
        }
    }

    /// Runs `msgs` through a book; returns the parent's events (ticking at
    /// the end until nothing is held) and the dead letters.
    fn drive(book: &mut FillBook, msgs: Vec<FillMsg>, now: u64) -> (Vec<EventKind>, usize) {
        let mut evs = Vec::new();
        let mut dead = 0;
        let mut sink = |o: BookOut| match o {
            BookOut::Event(e) => evs.push(e.kind),
            BookOut::DeadLetter(_) => dead += 1,
        };
        for m in msgs {
            book.handle(m, now, &mut sink);
        }
        (evs, dead)
    }

    fn fill(parent: u64, chunk: u32, f: VenueFill) -> FillMsg {
        FillMsg::Fill {
            parent,
            chunk,
            fill: f,
        }
    }

    fn end(parent: u64, chunk: u32, last_fill: u32) -> FillMsg {
        FillMsg::End {
            parent,
            chunk,
            end: ChunkEnd::Executed {
                last_fill,
                attempts: 1,
            },
        }
    }

    #[test]
    fn chunks_fold_into_the_parents_absolute_values() {
        let mut b = FillBook::new(cfg(8));
        let c0 = venue_fills(0, 500, 2);
        let c1 = venue_fills(1, 500, 3);
        let msgs = vec![
            FillMsg::Begin {
                order: order(7, 1_000),
                chunks: vec![Lots(500), Lots(500)],
            },
            fill(7, 1, c1[2]), // early: held
            fill(7, 0, c0[0]),
            fill(7, 1, c1[0]),
            fill(7, 0, c0[0]), // duplicate
            fill(7, 1, c1[1]), // releases 3
            fill(7, 0, c0[1]),
            end(7, 0, 2),
            end(7, 1, 3),
        ];
        let (evs, dead) = drive(&mut b, msgs, 0);
        assert_eq!(dead, 0);
        let total = Amount(
            Amount::of(Lots(500), Price(100_000)).0 + Amount::of(Lots(500), Price(100_001)).0,
        );
        let cums: Vec<(u32, u64)> = evs
            .iter()
            .filter_map(|e| match e {
                EventKind::Fill { n, cum, left, .. } => {
                    assert_eq!(cum.0 + left.0, 1_000);
                    Some((*n, cum.0))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            cums.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        assert!(cums.windows(2).all(|w| w[0].1 < w[1].1), "{cums:?}");
        assert_eq!(
            evs.last(),
            Some(&EventKind::Done {
                status: DoneStatus::Filled,
                cum: Lots(1_000),
                amount: total,
                attempts: 2
            })
        );
        assert_eq!(b.sequencer().stats.stale, 1);
        assert_eq!(b.open(), 0, "forgotten at the end");
        assert_eq!((b.stats.large_orders, b.stats.chunks), (1, 2));
    }

    /// After a restart the idempotent venue re-answers fills 1..3 of an
    /// order whose `FILL 1` and `FILL 2` were sent (and journaled) before
    /// the crash: only `FILL 3` goes out, then `DONE` with the full values.
    #[test]
    fn fills_sent_before_a_restart_are_not_sent_again() {
        let mut b = FillBook::new(cfg(8));
        let f = venue_fills(0, 300, 3);
        let mut o = order(9, 300);
        o.lane = Lane::Small;
        o.resumed = crate::order::msg::order::Resumed {
            bridge: None,
            attempts: 0,
            chunk_bridges: Vec::new(),
            route: None,
            fills: 2,
            cum: f[1].cum_lots,
            amount: f[1].cum_amount,
        };
        let msgs = vec![
            FillMsg::Begin {
                order: o,
                chunks: vec![Lots(300)],
            },
            fill(9, 0, f[0]),
            fill(9, 0, f[1]),
            fill(9, 0, f[2]),
            end(9, 0, 3),
        ];
        let (evs, _) = drive(&mut b, msgs, 0);
        assert_eq!(
            evs,
            vec![
                EventKind::Fill {
                    n: 3,
                    cum: Lots(300),
                    amount: f[2].cum_amount,
                    left: Lots(0),
                },
                EventKind::Done {
                    status: DoneStatus::Filled,
                    cum: Lots(300),
                    amount: f[2].cum_amount,
                    attempts: 1,
                },
            ]
        );
    }

    #[test]
    fn a_gap_holds_the_end_until_the_timer_skips_it() {
        let mut b = FillBook::new(cfg(8));
        let f = venue_fills(0, 300, 3);
        let (evs, _) = drive(
            &mut b,
            vec![
                FillMsg::Begin {
                    order: order(1, 300),
                    chunks: vec![Lots(300)],
                },
                fill(1, 0, f[0]),
                fill(1, 0, f[2]), // 2 is lost
                end(1, 0, 3),
            ],
            1_000,
        );
        assert_eq!(evs.len(), 1, "FILL 1 only: 3 waits behind the gap");
        let mut more = Vec::new();
        assert_eq!(b.tick(1_199, &mut |o| more.push(o)), 0, "open 199 < 200");
        assert!(more.is_empty());
        assert_eq!(b.tick(1_200, &mut |o| more.push(o)), 1);
        let kinds: Vec<EventKind> = more
            .into_iter()
            .map(|o| match o {
                BookOut::Event(e) => e.kind,
                BookOut::DeadLetter(_) => panic!("no dead letter"),
            })
            .collect();
        assert!(
            matches!(
                kinds[0],
                EventKind::Fill {
                    n: 2,
                    cum: Lots(300),
                    ..
                }
            ),
            "{kinds:?}"
        );
        assert!(matches!(
            kinds[1],
            EventKind::Done {
                status: DoneStatus::Filled,
                ..
            }
        ));
        assert_eq!(b.sequencer().stats.fills_missing, 1);
        assert_eq!(b.open(), 0);
    }

    #[test]
    fn a_refused_last_fill_still_brings_the_position_up_to_date() {
        let mut b = FillBook::new(cfg(1));
        let f = venue_fills(0, 300, 3);
        let (evs, _) = drive(
            &mut b,
            vec![
                FillMsg::Begin {
                    order: order(1, 300),
                    chunks: vec![Lots(300)],
                },
                fill(1, 0, f[1]), // held (the one slot)
                fill(1, 0, f[2]), // refused: bound of 1
                fill(1, 0, f[0]), // applies 1, 2
                end(1, 0, 3),
            ],
            0,
        );
        assert_eq!(b.sequencer().stats.refused, 1);
        assert!(
            matches!(
                evs[2],
                EventKind::Fill {
                    n: 3,
                    cum: Lots(300),
                    ..
                }
            ),
            "{evs:?}"
        );
        assert!(matches!(evs[3], EventKind::Done { cum: Lots(300), .. }));
    }

    #[test]
    fn failed_chunks_partial_dead_or_expired() {
        let dead = |parent, chunk| FillMsg::End {
            parent,
            chunk,
            end: ChunkEnd::Dead {
                reason: DeadReason::BridgeRejected,
                history: vec![AttemptRecord {
                    n: 1,
                    bridge: "b".into(),
                    outcome: "permanent:no".into(),
                    at_ns: 0,
                    wall_ns: 0,
                    delay_ns: 0,
                    ceiling_ns: 0,
                }],
            },
        };
        let begin = |seq| FillMsg::Begin {
            order: order(seq, 200),
            chunks: vec![Lots(100), Lots(100)],
        };
        let mut b = FillBook::new(cfg(8));
        let f = venue_fills(0, 100, 1);
        let (evs, dl) = drive(
            &mut b,
            vec![begin(1), fill(1, 0, f[0]), end(1, 0, 1), dead(1, 1)],
            0,
        );
        assert_eq!(dl, 0, "part executed: not replayable as a whole");
        assert!(matches!(
            evs.last(),
            Some(EventKind::Done {
                status: DoneStatus::Partial,
                cum: Lots(100),
                ..
            })
        ));
        let (evs, dl) = drive(&mut b, vec![begin(2), dead(2, 0), dead(2, 1)], 0);
        assert_eq!(
            dl, 1,
            "nothing executed: the parent is dead-lettered, replayable"
        );
        assert!(matches!(
            evs.last(),
            Some(EventKind::Dead {
                reason: DeadReason::BridgeRejected,
                attempts: 2,
                ..
            })
        ));
        let expired = |c| FillMsg::End {
            parent: 3,
            chunk: c,
            end: ChunkEnd::Expired { attempts: 0 },
        };
        let (evs, _) = drive(&mut b, vec![begin(3), expired(0), expired(1)], 0);
        assert_eq!(evs, vec![EventKind::Expired { attempts: 0 }]);
        assert_eq!(b.stats.chunks_failed, 5);
    }

    mod proptests {
        use super::*;
        use proptest::prelude::*;

        /// Per chunk: how many fills, and which are delivered twice.
        fn plan() -> impl Strategy<Value = (Vec<(u32, Vec<bool>)>, Vec<u32>)> {
            proptest::collection::vec(
                (1u32..6).prop_flat_map(|n| {
                    (
                        Just(n),
                        proptest::collection::vec(any::<bool>(), n as usize),
                    )
                }),
                1..5,
            )
            .prop_flat_map(|chunks| {
                let total: usize = chunks
                    .iter()
                    .map(|(n, d)| *n as usize + d.iter().filter(|x| **x).count() + 1)
                    .sum();
                (Just(chunks), proptest::collection::vec(0u32..1_000, total))
            })
        }

        proptest! {
            /// Chunks delivered interleaved, each out of order with copies:
            /// the parent's FILLs are numbered 1, 2, 3…, strictly increasing
            /// absolute values, and it ends once, at the sum of its chunks.
            #[test]
            fn any_interleaving_ends_at_the_sum((chunks, keys) in plan()) {
                let qty_per = 600u64;
                let k = chunks.len();
                let mut per_chunk: Vec<Vec<FillMsg>> = Vec::new();
                let mut want_amount = 0u64;
                let mut key_i = 0;
                for (c, (n, dups)) in chunks.iter().enumerate() {
                    let f = venue_fills(c as u32, qty_per, *n);
                    want_amount += f.last().unwrap().cum_amount.0;
                    let mut d: Vec<VenueFill> = f.clone();
                    d.extend(f.iter().zip(dups).filter(|(_, x)| **x).map(|(v, _)| *v));
                    // Shuffle this chunk's delivery by the random keys.
                    let mut keyed: Vec<(u32, VenueFill)> = d.into_iter().map(|v| { key_i += 1; (keys[key_i - 1], v) }).collect();
                    keyed.sort_by_key(|(k, v)| (*k, v.fill_no));
                    let mut msgs: Vec<FillMsg> = keyed.into_iter().map(|(_, v)| fill(1, c as u32, v)).collect();
                    msgs.push(end(1, c as u32, *n));
                    per_chunk.push(msgs);
                }
                // Interleave chunks, keeping each chunk's own order (one worker per chunk).
                let mut all = vec![FillMsg::Begin { order: order(1, qty_per * k as u64), chunks: vec![Lots(qty_per); k] }];
                let mut iters: Vec<std::vec::IntoIter<FillMsg>> = per_chunk.into_iter().map(|v| v.into_iter()).collect();
                let mut turn = 0usize;
                loop {
                    let live: Vec<usize> = (0..iters.len()).filter(|i| iters[*i].len() > 0).collect();
                    if live.is_empty() {
                        break;
                    }
                    let pick = live[keys[turn % keys.len()] as usize % live.len()];
                    turn += 1;
                    all.extend(iters[pick].next());
                }
                let mut b = FillBook::new(cfg(64));
                let (evs, _) = drive(&mut b, all, 0);
                let fills: Vec<(u32, u64, u64)> = evs.iter().filter_map(|e| match e {
                    EventKind::Fill { n, cum, amount, .. } => Some((*n, cum.0, amount.0)),
                    _ => None,
                }).collect();
                let total_fills: u32 = chunks.iter().map(|(n, _)| *n).sum();
                prop_assert_eq!(fills.iter().map(|f| f.0).collect::<Vec<_>>(), (1..=total_fills).collect::<Vec<_>>());
                prop_assert!(fills.windows(2).all(|w| w[0].1 < w[1].1 && w[0].2 < w[1].2));
                let terminal: Vec<&EventKind> = evs.iter().filter(|e| e.is_terminal()).collect();
                prop_assert_eq!(terminal.len(), 1);
                prop_assert_eq!(terminal[0], &EventKind::Done {
                    status: DoneStatus::Filled,
                    cum: Lots(qty_per * k as u64),
                    amount: Amount(want_amount),
                    attempts: k as u32,
                });
                prop_assert!(evs.last().unwrap().is_terminal());
                prop_assert_eq!(b.open(), 0);
            }
        }
    }
}
