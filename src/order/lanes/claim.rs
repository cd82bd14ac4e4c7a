//! Who may still act on an order: a worker (to send it to a bridge) or a
//! `CANCEL` (to end it before it gets there). One small atomic per order,
//! shared by the order as it travels and the gateway's cancel book.
//!
//! ```text
//!   Free ──take (worker, or the timer expiring it)──▶ Taken ──release (parked for a retry)──▶ Free
//!     └──cancel (gateway)──▶ Cancelled   (final: whoever holds the order next drops it unsent)
//! ```
//!
//! Invariant: exactly one side wins each race. A worker that fails to take
//! an order drops it without a reply (the gateway already answered
//! `DONE … CANCELED`); a `CANCEL` that finds it taken answers
//! `REJECT … TOO_LATE at_bridge` and the order ends as it would have. So an
//! order has exactly one terminal reply either way.

use std::sync::atomic::{AtomicU8, Ordering};

const FREE: u8 = 0;
const TAKEN: u8 = 1;
const CANCELLED: u8 = 2;

/// Why a cancel did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelRefused {
    /// A worker holds it: at a bridge (or about to be).
    Taken,
    /// Cancelled already.
    Cancelled,
}

/// The claim on one order (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Claim(AtomicU8);

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

    /// Cancels the order if no worker holds it.
    ///
    /// # Errors
    /// [`CancelRefused`]: taken by a worker, or cancelled before.
    pub(crate) fn cancel(&self) -> Result<(), CancelRefused> {
        match self
            .0
            .compare_exchange(FREE, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(CANCELLED) => Err(CancelRefused::Cancelled),
            Err(_) => Err(CancelRefused::Taken),
        }
    }

    /// Was the order cancelled?
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
        assert_eq!(c.cancel(), Ok(()), "waiting for its retry");
        assert!(!c.take(), "the worker drops it");
        assert!(c.is_cancelled());
        c.release();
        assert_eq!(c.cancel(), Err(CancelRefused::Cancelled), "final");
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
