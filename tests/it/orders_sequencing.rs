//! Fill sequencing over the order port: fills delivered out of order and
//! twice reach the client in order, once each, with absolute values; a
//! missing fill is skipped by the gap timer on a simulated clock, with no
//! other message arriving.

use std::collections::HashMap;
use std::sync::Arc;

use tickfan::bridge::spec::SimSpec;
use tickfan::bridge::{Bridge, BridgeOrder, Outcome, VenueFill};
use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::DoneStatus;
use tickfan::model::units::{Amount, Lots, Price};
use tickfan::retry::SimClock;

use crate::util::{bridges_engine, engine_with, wait_until, OrderClient};

#[test]
fn shuffled_and_duplicated_fills_reach_the_client_in_order_once() {
    // The simulator itself: every execution shuffled, half the fills twice.
    let e = engine_with(|c| {
        c.order.bridges = vec![SimSpec {
            max_fills: 5,
            reorder: 1.0,
            dup: 0.5,
            ..SimSpec::instant("shuffler")
        }];
    });
    let mut cl = OrderClient::connect(e.order_addr());
    const N: usize = 100;
    for i in 0..N {
        cl.new_order(&format!("o{i}"), "EURUSD", "3");
    }
    let mut last: HashMap<String, (u32, Lots, Amount)> = HashMap::new();
    let mut ended = 0;
    while ended < N {
        match cl.reply() {
            Reply::Ack { .. } => {}
            Reply::Fill {
                id,
                n,
                cum,
                amount,
                left,
            } => {
                let prev = last.get(&id).copied().unwrap_or_default();
                assert_eq!(n, prev.0 + 1, "{id}: in order, no repeats");
                assert!(
                    cum > prev.1 && amount > prev.2,
                    "{id}: absolute, increasing"
                );
                assert_eq!(cum.0 + left.0, 300);
                last.insert(id, (n, cum, amount));
            }
            Reply::Done {
                id, status, cum, ..
            } => {
                assert_eq!((status, cum), (DoneStatus::Filled, Lots(300)), "{id}");
                assert_eq!(last[&id].1, cum, "{id}: position = last applied values");
                ended += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    wait_until("counters settle", || {
        e.counters().snapshot().orders.gateway.in_flight == 0
    });
    let q = e.counters().snapshot().orders.sequencing;
    assert!(q.held > 0, "some fills arrived early: {q:?}");
    assert!(q.stale > 0, "some arrived twice: {q:?}");
    assert_eq!((q.gaps_skipped, q.fills_missing, q.held_now), (0, 0, 0));
    e.stop();
}

/// Delivers fill 3 of 3, then fill 1; fill 2 never comes.
#[derive(Debug)]
struct LosesFillTwo;

impl Bridge for LosesFillTwo {
    fn name(&self) -> &str {
        "lossy"
    }

    fn execute(&self, o: &BridgeOrder<'_>, _now_ns: u64) -> Outcome {
        let p = Price(100_000);
        let f = |n: u32| {
            let cum = Lots(o.qty.0 * u64::from(n) / 3);
            VenueFill {
                fill_no: n,
                cum_lots: cum,
                cum_amount: Amount::of(cum, p),
                price: p,
            }
        };
        Outcome::Executed(vec![f(3), f(1)])
    }
}

#[test]
fn the_gap_timer_skips_a_missing_fill_with_no_further_traffic() {
    let clock = SimClock::new();
    let e = bridges_engine(&clock, vec![Arc::new(LosesFillTwo) as _], |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("g", "EURUSD", "3");
    assert!(matches!(
        cl.reply(),
        Reply::Fill {
            n: 1,
            cum: Lots(100),
            ..
        }
    ));
    let seq = || e.counters().snapshot().orders.sequencing;
    wait_until("fill 3 held behind the gap", || seq().held_now == 1);
    // 150 ms of engine time: the timer ticks but the gap is not old enough.
    clock.advance_ms(150);
    let t0 = seq().ticks;
    wait_until("two timer ticks", || seq().ticks >= t0 + 2);
    assert_eq!((seq().gaps_skipped, seq().held_now), (0, 1));
    // Past 200 ms: the next tick skips fill 2 and applies fill 3. Nothing
    // else arrives; the timer fires on its own.
    clock.advance_ms(60);
    assert!(matches!(
        cl.reply(),
        Reply::Fill {
            n: 2,
            cum: Lots(300),
            left: Lots(0),
            ..
        }
    ));
    assert!(matches!(
        cl.reply(),
        Reply::Done {
            status: DoneStatus::Filled,
            cum: Lots(300),
            ..
        }
    ));
    let q = seq();
    assert_eq!((q.gaps_skipped, q.fills_missing, q.held_now), (1, 1, 0));
    e.stop();
}
