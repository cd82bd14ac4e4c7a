//! The gateway's side of a restart: a journaled order back in the dedup
//! store, with its `STATUS`, and the ordering key of its `NEW` line. The
//! floor's [`Restore`] is implemented here; recovery
//! (`order/journal/startup.rs`) calls it for every id it keeps.

use std::sync::Arc;

use crate::model::order_reasons::{DeadReason, DoneStatus};
use crate::model::units::Lots;
use crate::order::msg::event::EventKind;
use crate::order::msg::order::Resumed;
use crate::order::msg::record::{Record, TerminalState};
use crate::order::msg::restore::Restore;

use super::dedup::{Dedup, IdState};
use super::status::OrderStatus;

impl Restore for Dedup {
    fn restore_id(
        &mut self,
        id: &str,
        now_ns: u64,
        age_ns: u64,
        qty: Lots,
        end: Option<&Record>,
        resumed: &Resumed,
    ) {
        if self.check(id, now_ns, false).is_err() {
            return;
        }
        let since = now_ns.saturating_sub(age_ns);
        self.insert(id, since);
        let (status, state) = restored_status(qty, end, resumed);
        if let Some(st) = self.track(id) {
            *st = status;
        }
        if end.is_some() {
            self.mark(id, state, since);
        }
    }

    fn acct_key(&self, raw: &str) -> Option<Arc<str>> {
        super::acct::key_of_raw(raw)
    }
}

/// The `STATUS` of a journaled order after a restart, and its dedup state:
/// `QUEUED` with its quantity (and the fills already sent) when it has no
/// `Terminal` record (it is re-queued), else the terminal state the record names, with its cum,
/// amount and attempts. A `Rejected` one (refused before its `ACK`) keeps
/// the id taken, as before the restart, and shows `DONE FAILED`: it never ran.
fn restored_status(qty: Lots, end: Option<&Record>, resumed: &Resumed) -> (OrderStatus, IdState) {
    let mut st = OrderStatus::queued(qty);
    st.set_attempts(resumed.attempts);
    if resumed.fills > 0 {
        st.apply(&EventKind::Fill {
            n: resumed.fills,
            cum: resumed.cum,
            amount: resumed.amount,
            left: Lots(qty.0.saturating_sub(resumed.cum.0)),
        });
    }
    let Some(Record::Terminal {
        state,
        reason,
        cum,
        amount,
        attempts,
        ..
    }) = end
    else {
        return (st, IdState::Live);
    };
    let attempts = *attempts;
    let (ev, id_state) = match state {
        TerminalState::Done | TerminalState::Rejected => {
            let status = DoneStatus::ALL
                .into_iter()
                .find(|d| d.as_str() == reason)
                .unwrap_or(DoneStatus::of(*cum, qty));
            let ev = EventKind::Done {
                status,
                cum: *cum,
                amount: *amount,
                attempts,
            };
            (ev, IdState::Done)
        }
        TerminalState::Dead => {
            let dead = DeadReason::ALL
                .into_iter()
                .find(|d| d.as_str() == reason)
                .unwrap_or(DeadReason::RetriesExhausted);
            let ev = EventKind::Dead {
                reason: dead,
                attempts,
                last: "recovered".into(),
            };
            (ev, IdState::Dead)
        }
        TerminalState::Expired => (EventKind::Expired { attempts }, IdState::Done),
    };
    st.apply(&ev);
    (st, id_state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::gateway::status::Phase;
    use crate::order::msg::record::tests::dead_k1;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn an_open_order_is_restored_queued_with_its_attempts_and_an_ended_one_as_it_ended() {
        let mut d = Dedup::new(300 * SEC, 16);
        let resumed = Resumed {
            attempts: 2,
            ..Resumed::default()
        };
        d.restore_id("k1", 100 * SEC, SEC, Lots(100), None, &resumed);
        let st = d.status("k1", 100 * SEC).unwrap();
        assert_eq!((st.phase(), st.attempts()), (Phase::Queued, 2));
        assert_eq!(d.state("k1", 100 * SEC), Some(IdState::Live));
        d.restore_id("k2", 100 * SEC, SEC, Lots(100), Some(&dead_k1(4)), &resumed);
        let st = d.status("k2", 100 * SEC).unwrap();
        assert_eq!(st.phase(), Phase::Dead(DeadReason::RetriesExhausted));
        assert_eq!(st.attempts(), 4);
        assert_eq!(d.state("k2", 100 * SEC), Some(IdState::Dead));
        assert!(
            d.check("k2", 100 * SEC, false).is_err(),
            "a NEW with it is refused again"
        );
    }

    #[test]
    fn an_id_remembered_already_keeps_its_entry() {
        let mut d = Dedup::new(300 * SEC, 16);
        d.restore_id(
            "k1",
            100 * SEC,
            SEC,
            Lots(100),
            Some(&dead_k1(4)),
            &Resumed::default(),
        );
        d.restore_id("k1", 100 * SEC, SEC, Lots(100), None, &Resumed::default());
        assert_eq!(d.state("k1", 100 * SEC), Some(IdState::Dead));
    }

    #[test]
    fn the_ordering_key_comes_from_the_new_line() {
        let d = Dedup::new(SEC, 1);
        assert_eq!(
            d.acct_key("NEW k1 EURUSD BUY 1 acct=A7").as_deref(),
            Some("A7 EURUSD")
        );
        assert_eq!(d.acct_key("NEW k1 EURUSD BUY 1"), None);
    }
}
