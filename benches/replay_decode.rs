//! Benchmarks of `replay`'s vendor decoding (issue 28, item 4): quotes
//! per second from a Databento DBN mbp-1 stream to tickfan CSV lines, on
//! one core, through the very reader `replay` uses (`tools/replay`:
//! `Source`, the zstd decoder, the `dbn` crate's decoder, the mapping to a
//! quote line in a reused buffer).
//!
//! - `replay/dbn_zst_mbp1_to_lines`: a `.dbn.zst` held in memory (what a
//!   desk ships), decompressed and decoded. The goal: at least 2M quotes/s.
//! - `replay/dbn_mbp1_to_lines`: the same records uncompressed, to show
//!   what zstd costs.
//!
//! The input is `gen --dbn`'s stream (1,000 symbols, generated outside the
//! timed loop); throughput is per quote (`elements`). Sending is not
//! measured (the sender is the same for every format).
//!
//! Run: `cargo bench --bench replay_decode -- --warm-up-time 1 --measurement-time 5`.

use std::hint::black_box;
use std::io::Cursor;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[allow(dead_code, unused_imports)]
// reason: only the replay source and the DBN generator are used here; the tools' test modules are built without their tests
#[path = "../tools/mod.rs"]
mod tools;

use tools::gen::{GenSpec, Limit};
use tools::replay::{DecodeOptions, InputFormat, Source, Step};

/// Quotes per timed iteration.
const QUOTES: u64 = 200_000;

/// Decodes every quote of `bytes`; returns the count.
fn decode_all(bytes: &Arc<[u8]>) -> u64 {
    let reader = Box::new(Cursor::new(Arc::clone(bytes)));
    let mut src = Source::from_reader(
        "bench",
        reader,
        InputFormat::Auto,
        &DecodeOptions::default(),
    )
    .expect("a DBN stream");
    let mut line = Vec::with_capacity(128);
    let mut n = 0;
    loop {
        match src.next_line(&mut line) {
            Step::Line => {
                black_box(&line);
                n += 1;
            }
            Step::Skipped(s) => panic!("{s}"),
            Step::End => return n,
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut zst = Vec::new();
    tools::gen_dbn::write_dbn(&GenSpec::steady(1_000, 7), Limit::Ticks(QUOTES), &mut zst)
        .expect("in memory");
    let plain = zstd::stream::decode_all(&zst[..]).expect("our own stream");
    let (zst, plain): (Arc<[u8]>, Arc<[u8]>) = (zst.into(), plain.into());
    assert_eq!(decode_all(&zst), QUOTES);
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(QUOTES));
    g.sample_size(10);
    g.bench_function("dbn_zst_mbp1_to_lines", |b| {
        b.iter(|| decode_all(black_box(&zst)))
    });
    g.bench_function("dbn_mbp1_to_lines", |b| {
        b.iter(|| decode_all(black_box(&plain)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
