//! `dedup/*`: the order path's idempotency check at a steady state of
//! 300,000 ids inside their window (1,000 orders/s for the default 5 min),
//! in the default 1,000,000-id table; and the `STATUS` each entry carries
//! (set at `ACK`, read by `STATUS <id>`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tickfan::model::units::Lots;
use tickfan::order::gateway::dedup::{Dedup, IdState};
use tickfan::order::gateway::status::OrderStatus;

/// Ids in the window at steady state; one order per clock unit.
const HELD: u64 = 300_000;

fn bench(c: &mut Criterion) {
    let ids: Vec<String> = (0..4 * HELD).map(|i| format!("c1-{i:07}")).collect();
    let mut d = Dedup::new(HELD, 1_000_000);
    let mut now = 0u64;
    let mut next = 0usize;
    // Warm up to the steady state: the window full, ids turning over.
    for _ in 0..2 * HELD {
        let id = &ids[next % ids.len()];
        next += 1;
        now += 1;
        d.check(id, now, false).expect("room");
        d.insert(id, now);
        d.mark(id, IdState::Done, now);
    }
    let mut g = c.benchmark_group("dedup");
    g.bench_function("accept_and_end_one_order", |b| {
        b.iter(|| {
            let id = &ids[next % ids.len()];
            next += 1;
            now += 1;
            black_box(d.check(black_box(id), now, false)).expect("room");
            d.insert(id, now);
            d.mark(id, IdState::Done, now);
        })
    });
    g.bench_function("accept_track_and_end_one_order", |b| {
        b.iter(|| {
            let id = &ids[next % ids.len()];
            next += 1;
            now += 1;
            black_box(d.check(black_box(id), now, false)).expect("room");
            d.insert(id, now);
            // What the gateway adds for STATUS: the quantity at ACK.
            if let Some(st) = d.track(id) {
                *st = OrderStatus::queued(Lots(150));
            }
            d.mark(id, IdState::Done, now);
        })
    });
    g.bench_function("status_of_a_recent_id", |b| {
        b.iter(|| {
            let id = &ids[(next - 1) % ids.len()];
            black_box(d.status(black_box(id), now)).expect("known");
        })
    });
    g.bench_function("refuse_a_duplicate", |b| {
        b.iter(|| {
            // The id accepted most recently: inside its window.
            let id = &ids[(next - 1) % ids.len()];
            black_box(d.check(black_box(id), now, false)).expect_err("duplicate");
        })
    });
    g.finish();
    assert!(d.len() as u64 <= 2 * HELD, "held {}", d.len());
}

criterion_group!(benches, bench);
criterion_main!(benches);
