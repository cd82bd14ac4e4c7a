//! The two sides of the order protocol agree: what the gateway writes
//! ([`crate::order::gateway::codec`], [`crate::order::gateway::status`])
//! the client side ([`crate::client::orders`]) reads back as the same
//! reply.
//!
//! Here, above both, because `client/` sits below the stages (it imports
//! only the vocabulary) and a test inside it may not import the order side
//! either ([`crate::layering`]).

use crate::client::orders::{new_order_line, status_line, OrderState, Reply};
use crate::model::order_reasons::{DeadReason, DoneStatus, RejectReason};
use crate::model::units::{Amount, Lots, Side};
use crate::order::gateway::codec::{write_ack, write_dead, write_done, write_fill, write_reject};
use crate::order::gateway::status::{write_status, OrderStatus};
use crate::order::msg::event::EventKind;

#[test]
fn replies_round_trip() {
    let mut out = Vec::new();
    write_ack(&mut out, "o1");
    write_fill(&mut out, "o1", 1, Lots(40), Amount(4_340_480), Lots(60));
    write_done(
        &mut out,
        "o1",
        DoneStatus::Partial,
        Lots(40),
        Amount(4_340_480),
        2,
    );
    write_dead(&mut out, "o2", DeadReason::RetriesExhausted, 5, "outage");
    write_reject(
        &mut out,
        "o3",
        RejectReason::SystemBusy,
        "queue full (10000)",
    );
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "FILL o1 n=1 cum=0.40 amount=0.4340480 left=0.60");
    assert_eq!(
        lines[2],
        "DONE o1 PARTIAL cum=0.40 amount=0.4340480 attempts=2"
    );
    assert_eq!(lines[3], "DEAD o2 retries_exhausted attempts=5 last=outage");
    let parsed: Vec<Reply> = lines.iter().map(|l| Reply::parse(l).unwrap()).collect();
    assert_eq!(parsed[0], Reply::Ack { id: "o1".into() });
    assert_eq!(
        parsed[1],
        Reply::Fill {
            id: "o1".into(),
            n: 1,
            cum: Lots(40),
            amount: Amount(4_340_480),
            left: Lots(60)
        }
    );
    assert!(matches!(
        &parsed[2],
        Reply::Done {
            status: DoneStatus::Partial,
            attempts: 2,
            ..
        }
    ));
    assert!(
        matches!(&parsed[3], Reply::Dead { attempts: 5, reason, .. } if reason == "retries_exhausted")
    );
    assert!(
        matches!(&parsed[4], Reply::Reject { reason: RejectReason::SystemBusy, detail, .. } if detail == "queue full (10000)")
    );
    assert!(parsed[2].is_terminal() && !parsed[1].is_terminal());
    assert_eq!(
        new_order_line("a", "B", Side::Sell, Lots(5), None),
        "NEW a B SELL 0.05\n"
    );
}

#[test]
fn status_replies_round_trip() {
    let mut st = OrderStatus::queued(Lots(100));
    let mut out = Vec::new();
    write_status(&mut out, "q", Some(st));
    st.apply(&EventKind::Attempt);
    write_status(&mut out, "a", Some(st));
    st.apply(&EventKind::Parked);
    write_status(&mut out, "r", Some(st));
    let mut done = st;
    done.apply(&EventKind::Done {
        status: DoneStatus::Filled,
        cum: Lots(100),
        amount: Amount(11_000_000),
        attempts: 2,
    });
    write_status(&mut out, "d", Some(done));
    let mut dead = st;
    dead.apply(&EventKind::Dead {
        reason: DeadReason::BridgeRejected,
        attempts: 1,
        last: String::new(),
    });
    write_status(&mut out, "x", Some(dead));
    let mut exp = st;
    exp.apply(&EventKind::Expired { attempts: 1 });
    write_status(&mut out, "e", Some(exp));
    write_status(&mut out, "u", None);
    let text = String::from_utf8(out).unwrap();
    let parsed: Vec<Reply> = text.lines().map(|l| Reply::parse(l).unwrap()).collect();
    let states: Vec<OrderState> = parsed
        .iter()
        .map(|r| match r {
            Reply::Status { state, .. } => state.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        states,
        [
            OrderState::Queued,
            OrderState::AtBridge,
            OrderState::RetryWait,
            OrderState::Done(DoneStatus::Filled),
            OrderState::Dead("bridge_rejected".into()),
            OrderState::Expired,
            OrderState::Unknown,
        ]
    );
    assert_eq!(
        parsed[3],
        Reply::Status {
            id: "d".into(),
            state: OrderState::Done(DoneStatus::Filled),
            cum: Lots(100),
            amount: Amount(11_000_000),
            left: Lots(0),
            attempts: 2,
        }
    );
    assert!(matches!(
        &parsed[0],
        Reply::Status {
            left: Lots(100),
            attempts: 0,
            ..
        }
    ));
    assert!(
        !parsed[3].is_terminal(),
        "a STATUS answers, it ends nothing"
    );
    assert_eq!(parsed[6].id(), Some("u"));
    assert!(matches!(
        &parsed[6],
        Reply::Status {
            amount: Amount(0),
            attempts: 0,
            ..
        }
    ));
    assert_eq!(status_line("o1"), "STATUS o1\n");
}
