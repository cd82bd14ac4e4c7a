//! Who may still act on an order: a worker (to send it to a bridge) or a
//! `CANCEL` (to end it before it gets there). One small atomic per order,
//! shared by the order as it travels, its chunks, and the gateway's cancel
//! book.
//!
//! ```text
//!   Free ──take (worker, or the timer ending it)──▶ Taken ──release (parked for a retry)──▶ Free
//!     └──cancel──▶ Cancelled (final: whoever holds the order next drops it unsent)
//!   Taken ──split into n chunks (large order)──▶ Split(n unstarted)
//!     Split(n) ──a chunk's first attempt──▶ Split(n − 1)
//!     Split(n > 0) ──cancel──▶ SplitCancelled (final: each unstarted chunk ends `cancelled`)
//! ```
//!
//! Invariant: exactly one side wins each race. A worker that fails to take
//! an order drops it without a reply (the gateway already answered
//! `DONE … CANCELED`); a `CANCEL` that finds it taken (or every chunk
//! started) answers `REJECT … TOO_LATE at_bridge` and the order ends as it
//! would have. A cancelled split order still ends through the fill thread,
//! once each chunk has ended (executed, or dropped unstarted). So an order
//! has exactly one terminal reply either way.

use std::sync::atomic::{AtomicU64, Ordering};

const FREE: u64 = 0;
const TAKEN: u64 = 1;
const CANCELLED: u64 = 2;
const SPLIT: u64 = 3;
const SPLIT_CANCELLED: u64 = 4;
const STATE: u64 = 0xff;
const ONE_CHUNK: u64 = 1 << 32;

/// What a successful cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cancelled {
    /// The whole order: the gateway answers `DONE … CANCELED` now.
    Whole,
    /// The chunks not yet started of a split order: the fill thread answers
    /// when every chunk has ended.
    Chunks,
}

/// Why a cancel did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelRefused {
    /// A worker holds it (at a bridge, or about to be), or every chunk started.
    Taken,
    /// Cancelled already.
    Cancelled,
}

/// The claim on one order (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Claim(AtomicU64);

impl Claim {
    /// Takes the order to act on it; `false` when it was cancelled (drop it).
    pub(crate) fn take(&self) -> bool {
        self.0
            .compare_exchange(FREE, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Lets go of a taken order (it waits for a retry: cancellable again).
    pub(crate) fn release(&self) {
        let _ = self
            .0
            .compare_exchange(TAKEN, FREE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A taken large order was split into `chunks` chunks, none started.
    pub(crate) fn split(&self, chunks: u32) {
        let _ = self.0.compare_exchange(
            TAKEN,
            SPLIT | (u64::from(chunks) << 32),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// A chunk's first attempt is about to start; `false` when its order
    /// was cancelled (the chunk ends unsent).
    pub(crate) fn start_chunk(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v & STATE == SPLIT && v >= ONE_CHUNK).then(|| v - ONE_CHUNK)
            })
            .is_ok()
            || self.0.load(Ordering::Acquire) & STATE != SPLIT_CANCELLED
    }

    /// Cancels the order if no worker holds it (or, split, if a chunk has
    /// not started).
    ///
    /// # Errors
    /// [`CancelRefused`]: taken by a worker (every chunk started), or cancelled before.
    pub(crate) fn cancel(&self) -> Result<Cancelled, CancelRefused> {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let (next, what) = match cur & STATE {
                FREE => (CANCELLED, Cancelled::Whole),
                SPLIT if cur >= ONE_CHUNK => (SPLIT_CANCELLED, Cancelled::Chunks),
                CANCELLED | SPLIT_CANCELLED => return Err(CancelRefused::Cancelled),
                _ => return Err(CancelRefused::Taken),
            };
            match self
                .0
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(what),
                Err(now) => cur = now,
            }
        }
    }

    /// Was the whole order cancelled?
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire) == CANCELLED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_side_wins_each_race() {
        let c = Claim::default();
        assert!(c.take());
        assert_eq!(c.cancel(), Err(CancelRefused::Taken), "at a bridge");
        c.release();
        assert_eq!(c.cancel(), Ok(Cancelled::Whole), "waiting for its retry");
        assert!(!c.take(), "the worker drops it");
        assert!(c.is_cancelled());
        c.release();
        assert_eq!(c.cancel(), Err(CancelRefused::Cancelled), "final");
    }

    #[test]
    fn a_split_order_cancels_its_unstarted_chunks_only_while_one_is_left() {
        let c = Claim::default();
        assert!(c.take());
        c.split(3);
        assert!(c.start_chunk() && c.start_chunk());
        assert_eq!(c.cancel(), Ok(Cancelled::Chunks));
        assert!(!c.start_chunk(), "the third chunk ends unsent");
        assert!(!c.is_cancelled(), "its started chunks run on");
        assert_eq!(c.cancel(), Err(CancelRefused::Cancelled));
        let all = Claim::default();
        assert!(all.take());
        all.split(2);
        assert!(all.start_chunk() && all.start_chunk());
        assert_eq!(
            all.cancel(),
            Err(CancelRefused::Taken),
            "every chunk started"
        );
    }

    #[test]
    fn racing_threads_agree_on_one_winner() {
        for _ in 0..200 {
            let c = std::sync::Arc::new(Claim::default());
            let c2 = std::sync::Arc::clone(&c);
            let worker = std::thread::spawn(move || c2.take());
            let cancelled = c.cancel().is_ok();
            let taken = worker.join().unwrap();
            assert!(cancelled != taken, "exactly one wins");
        }
    }
}
