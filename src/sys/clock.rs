//! Clocks. Latencies inside the engine use a monotonic clock (never jumps);
//! the receive time that goes on the wire uses the wall clock (ns since the
//! Unix epoch, comparable with the source `ts_ns`).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Monotonic nanoseconds since a fixed epoch taken at construction.
///
/// Cheap to copy; every thread of one engine shares the same epoch, so values
/// from different threads can be subtracted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MonoClock {
    epoch: Instant,
}

impl MonoClock {
    /// A clock whose zero is now.
    pub(crate) fn new() -> Self {
        MonoClock {
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds since this clock's epoch.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The `Instant` this clock counts from.
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }
}

impl Default for MonoClock {
    fn default() -> Self {
        Self::new()
    }
}

/// Wall-clock nanoseconds since the Unix epoch (0 if the clock is before 1970).
#[inline]
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
