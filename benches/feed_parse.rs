//! Benchmarks of the feed hot path: parsing one tick line
//! (`feed/parse_line`, `feed::parse`) and splitting a 64 KiB receive buffer
//! into lines (`feed/lines`: the connection kit's `net::LineReader`, which
//! the feed reads with; the group keeps its name so results compare).
//!
//! Throughput is per line (`elements`), so criterion's time per iteration in
//! `feed/lines` divided by the line count is the cost per line; inputs are
//! built outside the timed loop and passed through `black_box`.
//!
//! Run: `cargo bench --bench feed_parse -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickfan::feed::conflate::FeedConflater;
use tickfan::feed::parse::{parse_line, Line};
use tickfan::net::lines::{LineEvent, LineReader};
use tickfan::symbols::SymbolInterner;

/// A realistic FX tick as the venue sends it.
const EURUSD: &[u8] = b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000";

/// Size of one receive buffer's worth of lines.
const BUF_LEN: usize = 64 * 1024;

/// Deterministic real-looking lines (varied symbols, prices, sizes, CRLF on
/// some), whole lines only, filling at most `len` bytes.
fn feed_bytes(len: usize) -> (Vec<u8>, usize) {
    const SYMBOLS: [&str; 8] = [
        "EURUSD",
        "GBPUSD",
        "USDJPY",
        "EURUSD.FXCM",
        "AUDUSD",
        "XAUUSD",
        "BTC-USD",
        "USDCHF",
    ];
    let mut out = Vec::with_capacity(len);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ts: u64 = 1_701_388_800_000_000_000;
    let mut lines = 0;
    loop {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ts += state % 1_000_000;
        let sym = SYMBOLS[(state >> 8) as usize % SYMBOLS.len()];
        let bid = 100_000 + (state >> 16) % 50_000;
        let spread = 1 + (state >> 40) % 30;
        let bid_qty = ((state >> 20) % 50 + 1) * 100_000;
        let ask_qty = ((state >> 30) % 50 + 1) * 100_000;
        let eol = if state.is_multiple_of(4) {
            "\r\n"
        } else {
            "\n"
        };
        let line = format!(
            "{ts},{sym},{}.{:05},{}.{:05},{bid_qty},{ask_qty}{eol}",
            bid / 100_000,
            bid % 100_000,
            (bid + spread) / 100_000,
            (bid + spread) % 100_000,
        );
        if out.len() + line.len() > len {
            return (out, lines);
        }
        out.extend_from_slice(line.as_bytes());
        lines += 1;
    }
}

fn bench_parse_line(c: &mut Criterion) {
    let mut g = c.benchmark_group("feed/parse_line");
    g.throughput(Throughput::Elements(1));
    g.bench_function("eurusd", |b| {
        let line = EURUSD;
        b.iter(|| parse_line(black_box(line)))
    });
    g.bench_function("eurusd_crlf", |b| {
        let line = [EURUSD, b"\r"].concat();
        b.iter(|| parse_line(black_box(&line)))
    });
    g.bench_function("poison_negative_qty", |b| {
        let line = b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,-1500000";
        b.iter(|| parse_line(black_box(line)))
    });
    g.finish();
}

fn bench_lines(c: &mut Criterion) {
    let (bytes, n_lines) = feed_bytes(BUF_LEN);
    let mut g = c.benchmark_group("feed/lines");
    g.throughput(Throughput::Elements(n_lines as u64));
    // Split only: one 64 KiB read, then every line out of the buffer.
    g.bench_function("split_64k", |b| {
        let mut reader = LineReader::new(256, BUF_LEN);
        b.iter(|| {
            let mut src = black_box(&bytes[..]);
            let n = reader.read_from(&mut src).expect("slice read");
            let mut count = 0usize;
            while let Some(ev) = reader.next_line() {
                if let LineEvent::Line(l) = ev {
                    count += black_box(l).len();
                }
            }
            assert!(reader.take_partial().is_none());
            (n, count)
        })
    });
    // Split and parse: what the feed loop does per buffer.
    g.bench_function("split_parse_64k", |b| {
        let mut reader = LineReader::new(256, BUF_LEN);
        b.iter(|| {
            let mut src = black_box(&bytes[..]);
            reader.read_from(&mut src).expect("slice read");
            let mut sum = 0u64;
            while let Some(ev) = reader.next_line() {
                if let LineEvent::Line(l) = ev {
                    if let Ok(Line::Tick { quote, .. }) = parse_line(l) {
                        sum = sum.wrapping_add(quote.bid.mantissa);
                    }
                }
            }
            assert!(reader.take_partial().is_none());
            sum
        })
    });
    g.finish();
}

/// One full 1 MiB read of scenario (c)-like ticks: 1,000 symbols with Zipf
/// (exponent 1) popularity, as `tickfan gen` makes them.
fn zipf_bytes(len: usize) -> (Vec<u8>, usize) {
    const N: usize = 1_000;
    let cdf: Vec<f64> = (1..=N)
        .scan(0.0, |acc, k| {
            *acc += 1.0 / k as f64;
            Some(*acc)
        })
        .collect();
    let total = cdf[N - 1];
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut out = Vec::with_capacity(len);
    let mut lines = 0;
    loop {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 11) as f64 / (1u64 << 53) as f64 * total;
        let sym = cdf.partition_point(|&c| c < u).min(N - 1);
        let bid = 100_000 + (state >> 20) % 50_000;
        let line = format!(
            "{},SYM{sym:04},{}.{:05},{}.{:05},{},{}\n",
            1_700_000_000_000_000_000u64 + lines as u64 * 1_000,
            bid / 100_000,
            bid % 100_000,
            (bid + 3) / 100_000,
            (bid + 3) % 100_000,
            (state >> 40) % 50 * 100_000,
            (state >> 30) % 50 * 100_000,
        );
        if out.len() + line.len() > len {
            return (out, lines);
        }
        out.extend_from_slice(line.as_bytes());
        lines += 1;
    }
}

/// The feed's work for one full 1 MiB read: every line parsed and its
/// symbol looked up (a read the feed keeps up with), against the plan of
/// conflation at the feed (the newest line per symbol parsed, the rest
/// skipped). Throughput is lines of the read, so the two compare as the
/// feed's drain rate.
fn bench_conflate(c: &mut Criterion) {
    const CHUNK: usize = 1024 * 1024;
    let (bytes, n_lines) = zipf_bytes(CHUNK);
    let (mut interner, _table) = SymbolInterner::new(1_000);
    for k in 0..1_000 {
        interner.intern(format!("SYM{k:04}").as_bytes()).unwrap();
    }
    let mut g = c.benchmark_group("feed/conflate");
    g.throughput(Throughput::Elements(n_lines as u64));
    g.bench_function("parse_every_line_1m", |b| {
        let mut reader = LineReader::new(256, CHUNK);
        b.iter(|| {
            let mut src = black_box(&bytes[..]);
            reader.read_from(&mut src).expect("slice read");
            let mut sum = 0u64;
            while let Some(ev) = reader.next_line() {
                if let LineEvent::Line(l) = ev {
                    if let Ok(Line::Tick { symbol, quote }) = parse_line(l) {
                        sum = sum.wrapping_add(quote.bid.mantissa);
                        sum = sum.wrapping_add(u64::from(interner.get(symbol).unwrap_or(0)));
                    }
                }
            }
            sum
        })
    });
    g.bench_function("plan_then_parse_newest_1m", |b| {
        let mut reader = LineReader::new(256, CHUNK);
        let mut plan = FeedConflater::new(1_000, 256 + CHUNK);
        b.iter(|| {
            let mut src = black_box(&bytes[..]);
            reader.read_from(&mut src).expect("slice read");
            plan.plan(reader.events(), |s| interner.get(s));
            let mut sum = 0u64;
            let mut walk = reader.events();
            let mut k = 0;
            for ev in walk.by_ref() {
                if let LineEvent::Line(l) = ev {
                    if !plan.is_superseded(k) {
                        if let Ok(Line::Tick { symbol, quote }) = parse_line(l) {
                            sum = sum.wrapping_add(quote.bid.mantissa);
                            sum = sum.wrapping_add(u64::from(interner.get(symbol).unwrap_or(0)));
                        }
                    }
                    k += 1;
                }
            }
            reader.seek(walk.position());
            sum
        })
    });
    g.finish();
}

criterion_group!(benches, bench_parse_line, bench_lines, bench_conflate);
criterion_main!(benches);
