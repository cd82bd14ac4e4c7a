//! The clock everything that waits, retries or times out reads.
//!
//! The engine runs on [`MonoClock`] (monotonic ns since start); tests and the
//! retry experiment run on [`SimClock`], a clock that moves only when told,
//! so a 30 s outage or an 800 ms backoff takes no real time and the outcome
//! does not depend on how busy the machine is.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::sys::clock::MonoClock;

/// A source of monotonic nanoseconds. Values from one clock may be
/// subtracted; they never go backwards.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Nanoseconds since the clock's epoch.
    fn now_ns(&self) -> u64;
}

/// A clock shared by the threads of one engine.
pub(crate) type SharedClock = Arc<dyn Clock>;

impl Clock for MonoClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        MonoClock::now_ns(self)
    }
}

/// A simulated clock: starts at 0 and moves only through [`advance`](Self::advance)
/// or [`set`](Self::set). Cheap to clone; clones share the same time.
///
/// Thread safety: any thread may read; writers should be one test driver
/// (time never goes backwards: `set` to an earlier value is ignored).
#[derive(Debug, Clone, Default)]
pub struct SimClock {
    now: Arc<AtomicU64>,
}

impl SimClock {
    /// A clock at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `ns`; returns the new time.
    pub fn advance(&self, ns: u64) -> u64 {
        // AcqRel: pairs with the Acquire in `now_ns`, so a thread that sees
        // the new time also sees what the driver did before advancing.
        self.now.fetch_add(ns, Ordering::AcqRel) + ns
    }

    /// Moves time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) -> u64 {
        self.advance(ms * 1_000_000)
    }

    /// Sets the time to `ns` if that is later than now.
    pub fn set(&self, ns: u64) {
        self.now.fetch_max(ns, Ordering::AcqRel);
    }
}

impl Clock for SimClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_clock_moves_only_forward_and_clones_share_time() {
        let c = SimClock::new();
        let d = c.clone();
        assert_eq!(c.now_ns(), 0);
        c.advance_ms(5);
        assert_eq!(d.now_ns(), 5_000_000);
        d.set(1);
        assert_eq!(c.now_ns(), 5_000_000);
        d.set(7_000_000);
        assert_eq!(c.now_ns(), 7_000_000);
        let shared: SharedClock = Arc::new(c);
        assert_eq!(shared.now_ns(), 7_000_000);
    }
}
