//! `journal/*`: the order journal's append and group commit on this
//! machine's disk (a temporary directory): one thread appends `Accepted`
//! records (one order each, ~110 bytes) and waits for the last to be
//! durable; the journal thread writes each batch with one `write` and one
//! `fdatasync`. Throughput is in records (accepted orders) per second.
//!
//! `append_and_commit/N`: N appends then the wait, so a batch holds up to
//! N records (N = 1 is one sync per order: the worst case).
//!
//! `recover/1M_accepted`: reading back a journal of 1,000,000 `Accepted`
//! records (≈ 120 MB in 2 segments of 64 MiB), checksums and decoding
//! included, from the page cache (written just before).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tickfan::model::lane::Lane;
use tickfan::model::units::{Lots, Side};
use tickfan::order::journal::recover::recover;
use tickfan::order::journal::start_unbounded;
use tickfan::order::msg::record::Record;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (j, thread) = start_unbounded(dir.path()).expect("journal starts");
    let rec = |n: u64| Record::Accepted {
        seq: n,
        id: format!("c1-{n:09}"),
        symbol: "EURUSD".into(),
        side: Side::Buy,
        qty: Lots(100),
        lane: Lane::Small,
        deadline_wall_ns: None,
        recv_wall_ns: 1_700_000_000_000_000_000 + n,
        raw: format!("NEW c1-{n:09} EURUSD BUY 1"),
    };
    let records: Vec<Record> = (0..1_000).map(rec).collect();
    let mut g = c.benchmark_group("journal");
    for n in [1usize, 100, 1_000] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("append_and_commit", n), &n, |b, &n| {
            b.iter(|| {
                let mut last = 0;
                for r in &records[..n] {
                    last = j.append(black_box(r)).expect("room");
                }
                assert!(j.wait_durable(last));
            })
        });
    }
    g.finish();
    j.stop();
    thread.join().expect("journal thread");

    let big = tempfile::tempdir().expect("temporary directory");
    let (j, thread) = start_unbounded(big.path()).expect("journal starts");
    for chunk in 0..1_000u64 {
        let mut last = 0;
        for n in 0..1_000 {
            last = j.append(&rec(chunk * 1_000 + n)).expect("room");
        }
        assert!(j.wait_durable(last));
    }
    j.stop();
    thread.join().expect("journal thread");
    let mut g = c.benchmark_group("journal");
    g.sample_size(10);
    g.throughput(Throughput::Elements(1_000_000));
    g.bench_function("recover/1M_accepted", |b| {
        b.iter(|| {
            let mut n = 0u64;
            recover(big.path(), |r| {
                black_box(r);
                n += 1;
            })
            .expect("recovers");
            assert_eq!(n, 1_000_000);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
