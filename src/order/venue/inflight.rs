//! Per-bridge call limits (`max_inflight=N` in a `--bridge` spec): never
//! more calls at one venue at once than it takes.
//!
//! ```text
//!  worker ── acquire(bridge) ──▶ Permit ──(moved into the Call)──▶ call thread
//!    ▲ waits while the venue has N calls      bridge.execute(…) returns ─▶ Permit dropped ─▶ a waiter wakes
//! ```
//!
//! A counting semaphore per bridge (a mutex-guarded count and a condvar;
//! the wait happens off the hot path of the market data, once per bridge
//! attempt). Policy when the venue is at its limit: the worker **waits**
//! for a permit of the bridge its routing chose (it does not pick another
//! bridge): the routing rule (`order seq + attempt`) and a recovered
//! order's return to the venue that knows its id stay as they are, and a
//! retry still moves to the next bridge. While it waits the order is not
//! at a bridge yet (its STATUS stays `QUEUED`/`RETRY_WAIT`); the wait is
//! counted as the worker being busy (utilisation, `order::lanes::capacity`).
//!
//! The permit belongs to the *call*, not to the worker: it is moved into
//! the call thread ([`super::lease`]) and released when the venue's
//! `execute` returns. A call abandoned at its lease's expiry therefore
//! still counts against `max_inflight` until the venue answers: the venue
//! is still working on it, and a hung venue must not be handed more calls
//! than it accepted.
//!
//! Invariant: `used ≤ max` at every instant, for every bridge with a limit;
//! a bridge without one hands out no permit and is not counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often a waiting worker looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// One bridge's limit.
#[derive(Debug)]
pub(crate) struct InflightLimit {
    /// `None`: no limit.
    max: Option<usize>,
    /// Permits out now (≤ `max`).
    used: Mutex<usize>,
    freed: Condvar,
}

/// A call's place under its bridge's limit; released when dropped.
#[derive(Debug)]
pub(crate) struct Permit(Arc<InflightLimit>);

impl Drop for Permit {
    fn drop(&mut self) {
        let mut used = self.0.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= 1;
        drop(used);
        self.0.freed.notify_one();
    }
}

impl InflightLimit {
    /// A limit of `max` calls at once (`None`: unlimited).
    pub(crate) fn new(max: Option<u32>) -> Arc<Self> {
        Arc::new(InflightLimit {
            max: max.map(|m| m.max(1) as usize),
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Waits for a permit. `Ok(None)` when the bridge has no limit;
    /// `Err(())` when `stop` was set while waiting (no permit taken).
    pub(crate) fn acquire(self: &Arc<Self>, stop: &AtomicBool) -> Result<Option<Permit>, ()> {
        let Some(max) = self.max else {
            return Ok(None);
        };
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used >= max {
            if stop.load(Ordering::Acquire) {
                return Err(());
            }
            used = self
                .freed
                .wait_timeout(used, STOP_POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *used += 1;
        Ok(Some(Permit(Arc::clone(self))))
    }

    /// Permits out now.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_hands_out_nothing_to_count() {
        let l = InflightLimit::new(None);
        assert!(l.acquire(&AtomicBool::new(false)).unwrap().is_none());
        assert_eq!(l.in_use(), 0);
    }

    #[test]
    fn at_the_limit_a_caller_waits_until_a_permit_is_dropped() {
        let l = InflightLimit::new(Some(2));
        let stop = Arc::new(AtomicBool::new(false));
        let a = l.acquire(&stop).unwrap();
        let _b = l.acquire(&stop).unwrap();
        assert_eq!(l.in_use(), 2);
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let (l, stop) = (Arc::clone(&l), Arc::clone(&stop));
            std::thread::spawn(move || {
                let p = l.acquire(&stop).unwrap();
                tx.send(()).unwrap();
                p
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(50)).is_err(),
            "a third permit while two are out"
        );
        drop(a);
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the waiter gets the freed permit");
        let c = waiter.join().unwrap();
        assert_eq!(l.in_use(), 2);
        drop(c);
        assert_eq!(l.in_use(), 1);
    }

    #[test]
    fn a_stopped_wait_takes_no_permit() {
        let l = InflightLimit::new(Some(1));
        let _a = l.acquire(&AtomicBool::new(false)).unwrap();
        assert!(l.acquire(&AtomicBool::new(true)).is_err());
        assert_eq!(l.in_use(), 1);
    }
}
