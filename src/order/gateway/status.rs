//! `STATUS <id>`: where an accepted order is, for any connection.
//!
//! Each order's [`OrderStatus`] lives in its [`super::dedup::Dedup`] entry,
//! not in a table of its own: the id is already there under the same key,
//! for exactly the retention `STATUS` must answer for (never forgotten while
//! in flight, kept for the dedup retention after its end), and the table is
//! allocated once at its bound. One lookup, one bound, no second hash table
//! to keep in step with the first. Cost: 24 bytes per slot (the slot grows
//! from 24 to 48 bytes; the table has two slots per id of
//! `--dedup-capacity`, so 48 more bytes per id: +48 MB at the default
//! capacity of one million ids).
//!
//! The gateway moves a status from the events it already applies:
//!
//! ```text
//!  ACK ──▶ QUEUED ──Attempt──▶ AT_BRIDGE ──Parked──▶ RETRY_WAIT
//!                                  ▲  │ FILL: cum/amount/left   │
//!                                  │  └──────────────────────┐   │
//!                                  └────────── Attempt ──────┼───┘
//!          DONE <FILLED|PARTIAL|FAILED> │ DEAD <reason> │ EXPIRED ◀── terminal
//! ```
//!
//! A terminal state never moves again (a late progress event cannot
//! reopen it); only a `REPLAY` of a dead order starts a new status.
//! `attempts` counts bridge attempts as they start (for a split order, those
//! of all its chunks, as `DONE` reports them); a split order shows the step
//! of its most recently reported chunk.
//!
//! Single writer and reader: the gateway thread.

use std::fmt::Write as _;

use bytes::BufMut;

use crate::model::order_reasons::{DeadReason, DoneStatus};
use crate::model::units::{Amount, Lots};
use crate::order::msg::event::EventKind;

/// Where an order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Accepted, waiting for a worker.
    #[default]
    Queued,
    /// A worker sent an attempt to a bridge.
    AtBridge,
    /// Failed transiently, parked until its retry is due.
    RetryWait,
    /// Ended with `DONE`.
    Done(DoneStatus),
    /// Dead-lettered.
    Dead(DeadReason),
    /// Its TTL passed before it could be sent.
    Expired,
}

impl Phase {
    /// Does this phase end the order?
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Done(_) | Phase::Dead(_) | Phase::Expired)
    }
}

/// One order's status. `cum + left` is the order's quantity throughout.
/// Lots are held as `u32` hundredths: the protocol's largest quantity
/// (1,000,000 lots = 10^8 hundredths) fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OrderStatus {
    /// Cumulative amount.
    amount: u64,
    /// Filled lots (hundredths).
    cum: u32,
    /// Remaining lots (hundredths).
    left: u32,
    /// Bridge attempts started.
    attempts: u16,
    /// Where it is.
    phase: Phase,
}

fn lots32(l: Lots) -> u32 {
    u32::try_from(l.0).unwrap_or(u32::MAX)
}

impl OrderStatus {
    /// Queued, with nothing filled and nothing left (the value of an empty
    /// dedup slot; [`queued`](Self::queued) sets the quantity).
    pub(crate) const EMPTY: OrderStatus = OrderStatus {
        amount: 0,
        cum: 0,
        left: 0,
        attempts: 0,
        phase: Phase::Queued,
    };

    /// Just accepted (`ACK`): queued, nothing filled.
    pub fn queued(qty: Lots) -> Self {
        OrderStatus {
            left: lots32(qty),
            ..OrderStatus::default()
        }
    }

    /// Where it is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Filled lots.
    pub fn cum(&self) -> Lots {
        Lots(u64::from(self.cum))
    }

    /// Remaining lots.
    pub fn left(&self) -> Lots {
        Lots(u64::from(self.left))
    }

    /// Cumulative amount.
    pub fn amount(&self) -> Amount {
        Amount(self.amount)
    }

    /// Attempts so far.
    pub fn attempts(&self) -> u32 {
        u32::from(self.attempts)
    }

    /// Applies one event of this order. A terminal status does not move.
    pub(crate) fn apply(&mut self, ev: &EventKind) {
        if self.phase.is_terminal() {
            return;
        }
        match ev {
            EventKind::Attempt => {
                self.attempts = self.attempts.saturating_add(1);
                self.phase = Phase::AtBridge;
            }
            EventKind::Parked => self.phase = Phase::RetryWait,
            EventKind::Fill {
                cum, amount, left, ..
            } => {
                self.cum = lots32(*cum);
                self.left = lots32(*left);
                self.amount = amount.0;
            }
            EventKind::Done {
                status,
                cum,
                amount,
                attempts,
            } => {
                // Keep `cum + left` the order's quantity.
                let qty = self.cum.saturating_add(self.left);
                self.cum = lots32(*cum);
                self.left = qty.saturating_sub(self.cum);
                self.amount = amount.0;
                self.set_attempts(*attempts);
                self.phase = Phase::Done(*status);
            }
            EventKind::Dead {
                reason, attempts, ..
            } => {
                self.set_attempts(*attempts);
                self.phase = Phase::Dead(*reason);
            }
            EventKind::Expired { attempts } => {
                self.set_attempts(*attempts);
                self.phase = Phase::Expired;
            }
        }
    }

    pub(crate) fn set_attempts(&mut self, n: u32) {
        self.attempts = u16::try_from(n).unwrap_or(u16::MAX);
    }
}

/// Appends the `STATUS` reply for `id`; `None` (never seen, or past its
/// retention) is `UNKNOWN cum=0 amount=0 left=0 attempts=0`, bare zeros
/// since nothing is known (a known order's numbers are written like `FILL`'s).
pub(crate) fn write_status(out: &mut impl BufMut, id: &str, st: Option<OrderStatus>) {
    let mut s = String::with_capacity(96);
    let _ = write!(s, "STATUS {id} ");
    let st = match st {
        None => {
            s.push_str("UNKNOWN cum=0 amount=0 left=0 attempts=0\n");
            out.put_slice(s.as_bytes());
            return;
        }
        Some(st) => {
            match st.phase {
                Phase::Queued => s.push_str("QUEUED"),
                Phase::AtBridge => s.push_str("AT_BRIDGE"),
                Phase::RetryWait => s.push_str("RETRY_WAIT"),
                Phase::Done(d) => {
                    let _ = write!(s, "DONE {}", d.as_str());
                }
                Phase::Dead(r) => {
                    let _ = write!(s, "DEAD {}", r.as_str());
                }
                Phase::Expired => s.push_str("EXPIRED"),
            }
            st
        }
    };
    let _ = writeln!(
        s,
        " cum={} amount={} left={} attempts={}",
        st.cum(),
        st.amount(),
        st.left(),
        st.attempts()
    );
    out.put_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::gateway::dedup::{Dedup, IdState};

    fn line(id: &str, st: Option<OrderStatus>) -> String {
        let mut out = Vec::new();
        write_status(&mut out, id, st);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_order_moves_through_its_phases_and_stops_at_the_end() {
        let mut s = OrderStatus::queued(Lots(100));
        assert_eq!(
            line("o1", Some(s)),
            "STATUS o1 QUEUED cum=0.00 amount=0.0000000 left=1.00 attempts=0\n"
        );
        s.apply(&EventKind::Attempt);
        assert_eq!(s.phase(), Phase::AtBridge);
        s.apply(&EventKind::Parked);
        assert_eq!((s.phase(), s.attempts()), (Phase::RetryWait, 1));
        s.apply(&EventKind::Attempt);
        s.apply(&EventKind::Fill {
            n: 1,
            cum: Lots(40),
            amount: Amount(4_340_480),
            left: Lots(60),
        });
        assert_eq!(
            line("o1", Some(s)),
            "STATUS o1 AT_BRIDGE cum=0.40 amount=0.4340480 left=0.60 attempts=2\n"
        );
        s.apply(&EventKind::Done {
            status: DoneStatus::Partial,
            cum: Lots(40),
            amount: Amount(4_340_480),
            attempts: 2,
        });
        let done = "STATUS o1 DONE PARTIAL cum=0.40 amount=0.4340480 left=0.60 attempts=2\n";
        assert_eq!(line("o1", Some(s)), done);
        // Terminal: nothing moves it.
        s.apply(&EventKind::Attempt);
        s.apply(&EventKind::Parked);
        assert_eq!(line("o1", Some(s)), done);
    }

    #[test]
    fn dead_expired_and_unknown_are_written_as_documented() {
        let mut d = OrderStatus::queued(Lots(150));
        d.apply(&EventKind::Attempt);
        d.apply(&EventKind::Dead {
            reason: DeadReason::RetriesExhausted,
            attempts: 5,
            last: "outage".into(),
        });
        assert_eq!(
            line("o2", Some(d)),
            "STATUS o2 DEAD retries_exhausted cum=0.00 amount=0.0000000 left=1.50 attempts=5\n"
        );
        let mut e = OrderStatus::queued(Lots(1));
        e.apply(&EventKind::Expired { attempts: 0 });
        assert_eq!(e.phase(), Phase::Expired);
        assert!(line("o3", Some(e)).starts_with("STATUS o3 EXPIRED cum=0.00 "));
        assert_eq!(
            line("o4", None),
            "STATUS o4 UNKNOWN cum=0 amount=0 left=0 attempts=0\n"
        );
    }

    /// The status lives exactly as long as the dedup entry: kept while in
    /// flight however long, then for the retention after its end (an
    /// injected clock: the store takes `now` on every call).
    #[test]
    fn the_status_is_kept_for_the_dedup_retention_after_the_end() {
        const RET: u64 = 1_000;
        let mut store = Dedup::new(RET, 4);
        store.check("a", 0, false).unwrap();
        store.insert("a", 0);
        *store.track("a").unwrap() = OrderStatus::queued(Lots(100));
        assert_eq!(store.status("a", 5_000).unwrap().phase(), Phase::Queued);
        store
            .track("a")
            .unwrap()
            .apply(&EventKind::Expired { attempts: 0 });
        store.mark("a", IdState::Done, 5_000);
        assert_eq!(store.status("a", 5_999).unwrap().phase(), Phase::Expired);
        assert_eq!(store.status("a", 6_000), None, "past the retention");
        assert_eq!(store.status("never", 0), None);
    }
}
