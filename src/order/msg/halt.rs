//! The order kill switch: `POST /orders/halt`, `POST /orders/resume` and
//! `serve --start-halted`.
//!
//! While halted the gateway refuses every `NEW` (and `REPLAY`) with
//! `REJECT <id> SYSTEM_BUSY halted`; the workers take no queued order and
//! no due retry (they stay in their queues, held), but the chunks of a
//! large order already split run on, and an order at a bridge ends as it
//! would have. `halt` with `cancel_queued` also asks the gateway to cancel
//! every order not yet at a bridge (each gets its `DONE … CANCELED`); the
//! gateway takes the request on its next turn ([`Halt::take_cancel_request`]).
//!
//! One writer per field: the admin thread flips the state (compare and
//! swap, so halting twice or resuming when running changes nothing and
//! says so), the gateway and the workers read it.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::admin::orders_switch::{OrdersSwitch, SwitchError};

/// The switch, shared by the admin endpoint, the gateway and the workers.
#[derive(Debug, Default)]
pub struct Halt {
    halted: AtomicBool,
    cancel_queued: AtomicBool,
}

impl Halt {
    /// A switch, halted from the start or not (`--start-halted`).
    pub fn new(halted: bool) -> Self {
        Halt {
            halted: AtomicBool::new(halted),
            cancel_queued: AtomicBool::new(false),
        }
    }

    /// Is the order path halted now?
    pub(crate) fn is_halted(&self) -> bool {
        self.halted.load(Ordering::Acquire)
    }

    /// Was a cancel of the queued orders asked for since the last call? (The gateway's.)
    pub(crate) fn take_cancel_request(&self) -> bool {
        self.cancel_queued.swap(false, Ordering::AcqRel)
    }
}

impl OrdersSwitch for Halt {
    fn halt(&self, cancel_queued: bool) -> Result<(), SwitchError> {
        self.halted
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| SwitchError::AlreadyHalted)?;
        if cancel_queued {
            self.cancel_queued.store(true, Ordering::Release);
        }
        log::warn!(
            "orders halted{}",
            if cancel_queued {
                ": cancelling the orders not yet at a bridge"
            } else {
                ""
            }
        );
        Ok(())
    }

    fn resume(&self) -> Result<(), SwitchError> {
        self.halted
            .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| SwitchError::NotHalted)?;
        log::warn!("orders resumed");
        Ok(())
    }

    fn is_halted(&self) -> bool {
        Halt::is_halted(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halting_twice_or_resuming_when_running_changes_nothing() {
        let h = Halt::new(false);
        assert_eq!(h.resume(), Err(SwitchError::NotHalted));
        h.halt(false).unwrap();
        assert_eq!(h.halt(true), Err(SwitchError::AlreadyHalted));
        assert!(!h.take_cancel_request(), "a refused halt asks for nothing");
        assert!(h.is_halted());
        h.resume().unwrap();
        assert!(!h.is_halted());
        h.halt(true).unwrap();
        assert!(h.take_cancel_request());
        assert!(!h.take_cancel_request(), "taken once");
    }
}
