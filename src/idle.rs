//! Idle strategies: what an event loop does with a step that found no work.
//!
//! After Agrona's `IdleStrategy`: busy-spinning is right on a dedicated host
//! with spare cores and wrong on a small one, where a spinning thread starves
//! everything else. The choice is a setting, measured in `perf/`.

use std::time::Duration;

/// How a loop waits when a step did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleStrategy {
    /// Poll without blocking, forever (lowest latency, burns a core).
    Spin,
    /// Poll without blocking, yielding the core between polls.
    Yield,
    /// Block in the OS poller until an event or a wake-up (default; no CPU when idle).
    #[default]
    Park,
}

impl IdleStrategy {
    /// The poll timeout a loop should use after a step that did `work` units,
    /// given the longest it may sleep (`max_park`, e.g. until its next timer).
    ///
    /// A step that did work never blocks: there may be more.
    pub fn poll_timeout(self, work: usize, max_park: Duration) -> Option<Duration> {
        if work > 0 {
            return Some(Duration::ZERO);
        }
        match self {
            IdleStrategy::Spin => Some(Duration::ZERO),
            IdleStrategy::Yield => {
                std::thread::yield_now();
                Some(Duration::ZERO)
            }
            IdleStrategy::Park => Some(max_park),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_never_parks_and_park_waits_up_to_max() {
        let max = Duration::from_millis(7);
        for s in [IdleStrategy::Spin, IdleStrategy::Yield, IdleStrategy::Park] {
            assert_eq!(s.poll_timeout(1, max), Some(Duration::ZERO));
        }
        assert_eq!(IdleStrategy::Park.poll_timeout(0, max), Some(max));
        assert_eq!(
            IdleStrategy::Spin.poll_timeout(0, max),
            Some(Duration::ZERO)
        );
    }
}
