//! Micro-benchmarks for the subscriber-side hot paths: encoding the shared
//! `message` tail once per update (`protocol::resp`), parsing a subscriber's
//! command, and matching a channel against PSUBSCRIBE patterns
//! (`protocol::glob`).
//!
//! Run with `cargo bench --bench protocol_resp -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tickfan::protocol::glob::glob_match;
use tickfan::protocol::resp::{
    append_message_tail, message_tail_len, parse_command, Limits, Parsed, MESSAGE_PREFIX,
};

/// A realistic tick: sequence/timestamp, symbol, bid, ask, sizes, venue, time.
const TICK: &[u8] =
    b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999";

fn encode_message_tail(c: &mut Criterion) {
    let mut group = c.benchmark_group("protocol/encode_message_tail");
    group.throughput(Throughput::Bytes(
        (MESSAGE_PREFIX.len() + message_tail_len(6, TICK.len())) as u64,
    ));
    let mut out = Vec::with_capacity(256);
    group.bench_function("eurusd_tick_81b", |b| {
        b.iter(|| {
            out.clear();
            append_message_tail(&mut out, black_box(b"EURUSD"), black_box(TICK));
            black_box(out.len())
        })
    });
    group.finish();
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("protocol/parse_command");
    let limits = Limits::default();
    let mut args = Vec::with_capacity(limits.max_args);
    for (name, input) in [
        (
            "subscribe_multibulk",
            &b"*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nEURUSD\r\n"[..],
        ),
        ("subscribe_inline", b"SUBSCRIBE EURUSD\r\n"),
    ] {
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let parsed = parse_command(black_box(input), &mut args, &limits);
                debug_assert!(matches!(parsed, Parsed::Command { .. }));
                black_box((parsed, args.len()))
            })
        });
    }
    group.finish();
}

fn glob(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish/glob_match");
    group.bench_function("prefix_star_hit", |b| {
        b.iter(|| glob_match(black_box(b"EUR*"), black_box(b"EURUSD")))
    });
    group.bench_function("class_miss", |b| {
        b.iter(|| glob_match(black_box(b"fx.[A-F]??USD.*"), black_box(b"fx.GBPUSD.spot")))
    });
    let long = vec![b'a'; 256];
    group.bench_function("pathological_256b", |b| {
        b.iter(|| glob_match(black_box(b"a*a*a*a*a*a*a*b"), black_box(&long)))
    });
    group.finish();
}

criterion_group!(benches, encode_message_tail, parse, glob);
criterion_main!(benches);
