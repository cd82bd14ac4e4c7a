//! `slots/*`: the conflation point. One slot write (the feed's per-tick
//! cost after parsing) and a write + publisher take round trip.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tickfan::feed::parse::{parse_line, Line};
use tickfan::model::decimal::Decimal;
use tickfan::model::tick::{Quote, SlotValue};
use tickfan::slots::slots;
use tickfan::symbols::SymbolInterner;

fn value(seq: u64) -> SlotValue {
    SlotValue {
        quote: Quote {
            ts_ns: 1_701_388_800_123_456_789,
            bid: Decimal::new(108_512, 5),
            ask: Decimal::new(108_515, 5),
            bid_qty: Decimal::new(1_000_000, 0),
            ask_qty: Decimal::new(1_500_000, 0),
        },
        seq,
        recv_wall_ns: 1,
        recv_mono_ns: 2,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("slots");
    let (mut w, mut r) = slots(1024);
    let mut seq = 0u64;
    g.bench_function("write_conflating", |b| {
        // The id stays queued: every write after the first conflates.
        b.iter(|| {
            seq += 1;
            black_box(w.write(black_box(7), &value(seq)))
        })
    });
    g.bench_function("write_then_take", |b| {
        b.iter(|| {
            seq += 1;
            w.write(black_box(9), &value(seq));
            let id = r.pop_dirty().unwrap();
            black_box(r.take(id))
        })
    });
    // The target: parse + validate + intern + slot write per tick.
    let (mut interner, _) = SymbolInterner::new(1024);
    for s in ["EURUSD", "GBPUSD", "USDJPY", "AUDUSD"] {
        interner.intern(s.as_bytes()).unwrap();
    }
    let line = b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000";
    g.bench_function("parse_intern_write", |b| {
        b.iter(|| {
            let Ok(Line::Tick { symbol, quote }) = parse_line(black_box(line)) else {
                unreachable!()
            };
            let id = interner.intern(symbol).unwrap();
            seq += 1;
            let v = SlotValue {
                quote,
                seq,
                recv_wall_ns: 1,
                recv_mono_ns: 2,
            };
            black_box(w.write(id, &v))
        })
    });
    g.finish();
    while r.pop_dirty().is_some() {}
}

criterion_group!(benches, bench);
criterion_main!(benches);
