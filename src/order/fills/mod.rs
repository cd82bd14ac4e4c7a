//! The fill thread and everything it owns: fills come back from the bridges,
//! possibly out of order, twice, or with gaps; the sequencer puts each
//! order's fills back in fill-number order (skipping a gap that stays open
//! too long), positions apply them idempotently from absolute values, and
//! the fill book folds the chunks of a large order into their parent and
//! answers `FILL`/`DONE` for every executed order.
//!
//! ```text
//! workers ──FillMsg──▶ fill thread ─▶ fill book ─▶ sequencer (per chunk) ──in order──▶ positions
//!                                        │            ▲ gap timer (own tick)
//!                                        └─ FILL / DONE / DEAD / EXPIRED ──▶ gateway
//! ```
//!
//! * [`fill_thread`]: the thread, its bounded inbox and its gap tick;
//! * [`fill_book`]: parents, chunks and their replies (pure: time is a
//!   parameter, output goes to a sink);
//! * [`sequencer`]: per-order reordering with a hold bound and a gap timeout;
//! * [`position`]: idempotent positions from absolute values
//!   (`only if fill_no > last_fill_no`).
//!
//! Ownership: one thread, the fill thread, owns the [`fill_book::FillBook`]
//! and with it every [`sequencer::Sequencers`] and [`position::Positions`]:
//! fill arrivals and timer ticks are both delivered to that thread, so a fill
//! can never be applied twice by a race between the timer and an arrival (no
//! lock needed; a lock both took would serialise the same work anyway).

pub(crate) mod fill_book;
pub(crate) mod fill_thread;
pub(crate) mod position;
pub(crate) mod sequencer;
