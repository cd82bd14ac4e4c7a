//! The fill path: fills come back from the bridges, possibly out of order;
//! the sequencer puts each order's fills back in fill-number order (skipping
//! a gap that stays open too long), and positions apply them idempotently
//! from absolute values.
//!
//! ```text
//! bridges ──fills (any order, dups)──▶ sequencer (per order) ──in order──▶ positions
//!                                         ▲ gap timer (own tick)
//! ```
//!
//! Ownership: one thread (the order path's fill thread,
//! `crate::order::fill_thread`) owns a [`sequencer::Sequencers`] and its
//! [`position::Positions`]: fill arrivals and timer ticks are both delivered
//! to that thread, so a fill can never be applied twice by a race between the
//! timer and an arrival (no lock needed; a lock both took would serialise
//! the same work anyway).

pub mod position;
pub mod sequencer;
