//! The fan-out step, apart from the loop and from sockets: take one update
//! of one symbol, encode it once, offer it to every subscriber of that
//! symbol, each with its own conflation state.
//!
//! ```text
//!  slot value ─▶ take (seq accounting) ─▶ encode once ─▶ tail ─┬─▶ prefix₁+tail ─▶ buffer₁ (offer)
//!                                         (payload +         ├─▶ prefix₂+tail ─▶ buffer₂ (offer)
//!                                          RESP tail)         └─▶ …  one per delivery (routes)
//! ```
//!
//! - **Accounting is exact.** [`Fanout`] remembers per symbol the sequence
//!   number it last took, so `published + conflated` equals the valid ticks
//!   of that symbol once the slots are drained; a value re-queued by a write
//!   that raced the take is skipped, never published twice.
//! - **Encoded once.** The payload ([`crate::protocol::encode`]) and the RESP tail are
//!   built once per update and kept as the symbol's latest value (for
//!   snapshots and for slow subscribers); each delivery adds only its
//!   prefix (`*3`/`>3` message, `*4`/`>4` pmessage, from [`super::routes`]).
//! - **Conflation per subscriber.** Each subscriber's
//!   [`SubscriberBuffer::offer`] appends the frame or marks the symbol
//!   pending; before an offer would cross the mark the step asks the
//!   subscriber's [`Outlet`] to hand what it holds to the peer first, so
//!   only a subscriber whose socket is full too is slow. [`Fanout::refill`]
//!   sends a drained slow subscriber the latest value of each symbol it
//!   missed.
//! - **A subscriber's own caps first.** Before the mark, the step asks the
//!   subscriber's [`Throttle`] (`TICKFAN.THROTTLE`): a closed window or an
//!   empty byte credit marks the symbol pending in the same marks
//!   ([`SubscriberBuffer::hold`]), and [`Fanout::refill_ordered`] sends
//!   its latest value once the window opens; a subscriber without caps
//!   costs one flag test.
//!
//! The sessions and their sockets are behind [`Outlets`]; unit tests drive
//! the step with plain buffers. No allocation per update once every symbol
//! was seen (the latest-value buffers are sized for the largest payload).
//!
//! Single owner: the publisher thread.

use crate::model::tick::SlotValue;
use crate::protocol::encode::{append_payload, max_payload_len};
use crate::protocol::resp;
use crate::publish::outbuf::{Offer, SubscriberBuffer};
use crate::publish::pending_order::{pick, PendingOrder};
use crate::publish::routes::{Routes, SubKey};
use crate::publish::throttle::Throttle;
use crate::symbols::SymbolId;

/// One subscriber as the fan-out sees it.
pub trait Outlet {
    /// Its output buffer.
    fn buffer(&mut self) -> &mut SubscriberBuffer;
    /// The next offer would take the buffer past its mark: hand what it
    /// holds to the peer now, if the peer can take it.
    fn make_room(&mut self);
    /// A frame was appended: the buffer has output to write.
    fn has_output(&mut self);
    /// The subscriber began a slow episode, or its throttle held a symbol
    /// back: revisit it (once it drains, or once the window opens).
    fn became_slow(&mut self);
    /// Its caps ([`Throttle`]) with the window clock's now, when it set any.
    #[inline]
    fn throttle(&mut self) -> Option<(&mut Throttle, u64)> {
        None
    }
}

/// The subscribers, by key.
pub trait Outlets {
    /// The view of one subscriber.
    type Outlet<'a>: Outlet
    where
        Self: 'a;
    /// The subscriber with key `sub` (routes name only open subscribers).
    fn outlet(&mut self, sub: SubKey) -> Self::Outlet<'_>;
}

/// What offering one update did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Frames appended to buffers.
    pub frames: u64,
    /// Offers conflated (the subscriber's symbol was or became pending).
    pub conflations: u64,
    /// Subscribers that began a slow episode.
    pub slow_episodes: u64,
    /// Offers a subscriber's throttle held back (its symbol marked pending;
    /// later offers while it is pending count as conflations).
    pub throttled: u64,
}

/// What publishing one update did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// Updates of the symbol the slot overwrote since the last take.
    pub conflated: u64,
    /// The offers.
    pub delivered: Delivered,
}

/// Per-symbol state of the fan-out: the latest encoded value and the
/// sequence number last taken.
#[derive(Debug)]
pub struct Fanout {
    /// Encoded RESP tail of the latest taken value, per known symbol (empty = none yet).
    latest: Vec<Vec<u8>>,
    /// Sequence number last taken, per symbol id below the capacity.
    last_seq: Vec<u64>,
    /// Scratch for the payload of the update being encoded.
    payload: Vec<u8>,
}

impl Fanout {
    /// State for up to `max_symbols` symbols.
    pub fn new(max_symbols: usize) -> Self {
        Fanout {
            latest: Vec::with_capacity(max_symbols),
            last_seq: vec![0; max_symbols],
            payload: Vec::with_capacity(1024),
        }
    }

    /// Symbols learnt so far (ids `0..known()`).
    pub fn known(&self) -> usize {
        self.latest.len()
    }

    /// Learns the next symbol id, named `name` (ids arrive densely, in order).
    pub fn learn(&mut self, name: &[u8]) {
        self.latest.push(Vec::with_capacity(
            max_payload_len(name.len()) + name.len() + 32,
        ));
    }

    /// Encoded tail of each known symbol's latest value (empty = none yet).
    pub fn latest(&self) -> &[Vec<u8>] {
        &self.latest
    }

    /// Takes update `seq` of symbol `id`: returns how many earlier updates
    /// the slot conflated, or `None` when `seq` was taken already (a write
    /// that raced the take re-queued it).
    #[inline]
    pub fn take(&mut self, id: SymbolId, seq: u64) -> Option<u64> {
        let last = &mut self.last_seq[id as usize];
        if seq <= *last {
            return None;
        }
        let skipped = seq - *last - 1;
        *last = seq;
        Some(skipped)
    }

    /// The payload [`Fanout::encode`] built last (what an ingest sends on the backbone).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Encodes `v` as the latest value of symbol `id`, named `name`.
    #[inline]
    pub fn encode(&mut self, id: SymbolId, name: &[u8], v: &SlotValue) {
        self.payload.clear();
        append_payload(&mut self.payload, name, v);
        let tail = &mut self.latest[id as usize];
        tail.clear();
        resp::append_message_tail(tail, name, &self.payload);
    }

    /// Offers the latest value of `id` to each of its deliveries at `now_ns`.
    #[inline]
    pub fn offer<O: Outlets>(
        &self,
        id: SymbolId,
        routes: &Routes,
        outlets: &mut O,
        now_ns: u64,
    ) -> Delivered {
        let tail = &self.latest[id as usize];
        let seq = self.last_seq[id as usize];
        let mut done = Delivered::default();
        for d in routes.deliveries(id) {
            let mut out = outlets.outlet(d.sub);
            let frame_len = d.prefix.len() + tail.len();
            if out.buffer().is_pending(id) {
                // Its latest value goes out with the marks: conflated.
                out.buffer().conflate_pending();
                done.conflations += 1;
                continue;
            }
            // The subscriber's own caps first: a closed window holds the
            // symbol in the same pending marks a slow subscriber uses, so
            // its latest value goes when the window opens.
            let capped = match out.throttle() {
                None => false,
                Some((t, now_w)) => {
                    if !t.admits(id, seq, now_w) {
                        t.held += 1;
                        out.buffer().hold(id, now_ns);
                        out.became_slow();
                        done.throttled += 1;
                        continue;
                    }
                    true
                }
            };
            let buf = out.buffer();
            let offer = if buf.buffered() + frame_len <= buf.limit() {
                // The common case: it fits (the limit asked once).
                buf.append_frame(&d.prefix, tail);
                Offer::Appended
            } else {
                // Past the mark in user space: hand what we have to the
                // kernel first; only a subscriber whose socket is full too
                // is slow.
                out.make_room();
                out.buffer().offer_fresh(id, &d.prefix, tail, now_ns)
            };
            match offer {
                Offer::Appended => {
                    done.frames += 1;
                    if capped {
                        if let Some((t, now_w)) = out.throttle() {
                            t.sent(id, seq, frame_len, now_w);
                        }
                    }
                    out.has_output();
                }
                Offer::Conflated { entered_slow } => {
                    done.conflations += 1;
                    if entered_slow {
                        done.slow_episodes += 1;
                        out.became_slow();
                    }
                }
            }
        }
        done
    }

    /// The whole step for one taken slot value: accounting, encoding, offers.
    /// `None` when the value was taken already.
    pub fn publish<O: Outlets>(
        &mut self,
        id: SymbolId,
        v: &SlotValue,
        routes: &Routes,
        outlets: &mut O,
        now_ns: u64,
    ) -> Option<Published> {
        let conflated = self.take(id, v.seq)?;
        self.encode(id, routes.name(id), v);
        let delivered = self.offer(id, routes, outlets, now_ns);
        Some(Published {
            conflated,
            delivered,
        })
    }

    /// Sends subscriber `sub`'s buffer the latest value of each symbol it
    /// missed, oldest mark first (see [`Self::refill_ordered`]).
    pub fn refill(&self, sub: SubKey, buf: &mut SubscriberBuffer, routes: &Routes) -> u64 {
        self.refill_ordered(sub, buf, routes, PendingOrder::Fifo, 0, None)
    }

    /// Sends subscriber `sub`'s buffer the latest value of each symbol it
    /// missed, in `order` at `now_ns` ([`super::pending_order`]), while
    /// the frames fit under its limit (or the buffer is empty and the
    /// limit is not zero: a frame larger than the limit still goes out
    /// alone). Returns the frames appended.
    ///
    /// For a subscriber with caps, `throttle` (and its window clock's now):
    /// the marks then go oldest first whatever `order` (every symbol held
    /// in an earlier window is open), and the refill stops at the first
    /// symbol whose window is still closed.
    pub fn refill_ordered(
        &self,
        sub: SubKey,
        buf: &mut SubscriberBuffer,
        routes: &Routes,
        order: PendingOrder,
        now_ns: u64,
        mut throttle: Option<(&mut Throttle, u64)>,
    ) -> u64 {
        let order = if throttle.is_some() {
            PendingOrder::Fifo
        } else {
            order
        };
        let mut sent = 0u64;
        loop {
            let limit = buf.limit();
            if buf.buffered() >= limit && (buf.buffered() > 0 || limit == 0) {
                break; // no room: do not rank the marks
            }
            let Some(i) = pick(order, buf.pending_marks(), &self.last_seq, now_ns) else {
                break;
            };
            let id = buf.pending_marks()[i].0;
            let tail = &self.latest[id as usize];
            let mine = routes.deliveries_to(id, sub);
            let need: usize = mine.iter().map(|d| d.prefix.len() + tail.len()).sum();
            if buf.buffered() + need > limit && buf.buffered() > 0 {
                break;
            }
            if let Some((t, now_w)) = throttle.as_mut() {
                if !t.open(id, *now_w) {
                    break;
                }
                t.sent(id, self.last_seq[id as usize], need, *now_w);
            }
            buf.take_pending(i);
            for d in mine {
                buf.append_frame(&d.prefix, tail);
                sent += 1;
            }
        }
        sent
    }

    /// Sequence number last taken of each symbol (0 = none yet).
    pub fn last_seqs(&self) -> &[u64] {
        &self.last_seq
    }
}

/// Plain buffers as outlets, for tests and benches: `make_room` writes
/// nothing (every socket is full), the flags record what the step asked;
/// each has a throttle (no caps until one is set) on the window clock
/// `window_now_ns`.
#[derive(Debug)]
pub struct PlainOutlets {
    /// Buffer per subscriber key.
    pub buffers: Vec<SubscriberBuffer>,
    /// Per key: a frame was appended since the flag was cleared.
    pub has_output: Vec<bool>,
    /// Per key: `became_slow` was called since the flag was cleared.
    pub slow: Vec<bool>,
    /// Per key: `make_room` calls.
    pub room_asked: Vec<u64>,
    /// Per key: its caps.
    pub throttles: Vec<Throttle>,
    /// Now on the throttles' window clock.
    pub window_now_ns: u64,
}

impl PlainOutlets {
    /// `n` subscribers with high-water mark `hwm` for `max_symbols` ids.
    pub fn new(n: usize, hwm: usize, max_symbols: usize) -> Self {
        PlainOutlets {
            buffers: (0..n)
                .map(|_| SubscriberBuffer::new(hwm, max_symbols))
                .collect(),
            has_output: vec![false; n],
            slow: vec![false; n],
            room_asked: vec![0; n],
            throttles: (0..n).map(|_| Throttle::new(max_symbols)).collect(),
            window_now_ns: 0,
        }
    }
}

/// One of [`PlainOutlets`].
#[derive(Debug)]
pub struct PlainOutlet<'a> {
    owner: &'a mut PlainOutlets,
    sub: SubKey,
}

impl Outlet for PlainOutlet<'_> {
    fn buffer(&mut self) -> &mut SubscriberBuffer {
        &mut self.owner.buffers[self.sub]
    }
    fn make_room(&mut self) {
        self.owner.room_asked[self.sub] += 1;
    }
    fn has_output(&mut self) {
        self.owner.has_output[self.sub] = true;
    }
    fn became_slow(&mut self) {
        self.owner.slow[self.sub] = true;
    }
    fn throttle(&mut self) -> Option<(&mut Throttle, u64)> {
        let now = self.owner.window_now_ns;
        let t = &mut self.owner.throttles[self.sub];
        t.is_active().then_some((t, now))
    }
}

impl Outlets for PlainOutlets {
    type Outlet<'a> = PlainOutlet<'a>;
    fn outlet(&mut self, sub: SubKey) -> PlainOutlet<'_> {
        PlainOutlet { owner: self, sub }
    }
}

#[cfg(test)]
#[path = "fanout_tests.rs"]
mod tests;
