//! Retry storm: how retry policies behave when the only venue goes down.
//!
//! ```text
//!  10,000 orders ──▶ main queue ──▶ 4 workers ──▶ the only bridge (down for D s from t = 0)
//!                       ▲              │ transient (503-like)
//!                       │ immediate    ▼
//!                       └── requeue ◀─ policy ─▶ delay queue (DelayQueue) ─▶ due first
//! ```
//!
//! A discrete-event run on a simulated clock (`retry::SimClock`), with the
//! engine's own parts: `retry::Backoff` draws the delays, `retry::DelayQueue`
//! holds the waiting orders (capacity 10,000), `bridge::sim::SimBridge`
//! decides each attempt (its scheduled outage). Workers take due retries
//! first, then the main queue, as `order::lanes::worker` does. An attempt
//! occupies a worker for 1 ms when the bridge is up and 0.333 ms when it is
//! down (a fast 503), so 4 workers make ~12,000 failing attempts per second.
//!
//! Policies (the delayed ones have the engine's budget of 4 retries, then
//! the DLQ; immediate requeue has no budget, as a broker's requeue):
//! immediate requeue; fixed 5 s; exponential 5, 10, 20, 40 s (cap 60 s);
//! the same with full jitter.
//!
//! `cargo bench --bench retry_storm` runs 10,000 orders with outages of 5 s
//! and 30 s, prints the table and writes `perf/retry_storm_{5,30}s.svg`
//! (attempts per 100 ms over time, per policy). Under `cargo test` it runs a
//! small smoke version and checks that every order ended exactly once.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

use tickfan::bridge::sim::SimBridge;
use tickfan::bridge::spec::{Outage, SimSpec};
use tickfan::bridge::{BridgeOrder, Outcome};
use tickfan::model::units::{Lots, Side};
use tickfan::retry::{Backoff, Clock, DelayQueue, Jitter, SimClock};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const WORKERS: usize = 4;
const UP_NS: u64 = MS;
const DOWN_NS: u64 = MS / 3;
const BUCKET_NS: u64 = 100 * MS;

#[derive(Debug, Clone, Copy)]
enum Policy {
    Immediate,
    Delayed(Backoff),
}

#[derive(Debug)]
struct Outcomes {
    name: &'static str,
    attempts: u64,
    completed: u64,
    dead: u64,
    drain_ns: u64,
    buckets: Vec<u64>,
    /// Retries only (attempt 2 and later), per 100 ms.
    retry_buckets: Vec<u64>,
    peak_during: u64,
    peak_after: u64,
    retry_peak_during: u64,
    retry_peak_after: u64,
}

fn policies() -> Vec<(&'static str, Policy)> {
    let exp = Backoff {
        base: Duration::from_secs(5),
        cap: Duration::from_secs(60),
        retries: 4,
        jitter: Jitter::None,
    };
    vec![
        ("immediate requeue", Policy::Immediate),
        (
            "fixed 5 s",
            Policy::Delayed(Backoff {
                cap: Duration::from_secs(5),
                ..exp
            }),
        ),
        ("exponential 5-10-20-40 s", Policy::Delayed(exp)),
        (
            "exponential + full jitter",
            Policy::Delayed(Backoff {
                jitter: Jitter::Full,
                ..exp
            }),
        ),
    ]
}

/// One order in the simulation: its index and retries so far.
#[derive(Debug, Clone, Copy)]
struct Msg {
    i: u32,
    retries: u32,
    last_delay: u64,
}

fn run(name: &'static str, policy: Policy, orders: u32, outage_s: u64, seed: u64) -> Outcomes {
    let clock = SimClock::new();
    let bridge = SimBridge::new(
        SimSpec {
            outages: vec![Outage {
                from: Duration::ZERO,
                len: Duration::from_secs(outage_s),
            }],
            ..SimSpec::instant("venue")
        },
        0,
    );
    let ids: Vec<String> = (0..orders).map(|i| format!("o{i}")).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim_rng = StdRng::seed_from_u64(seed ^ 0xb1d6e);
    // Main queue: (available at, msg). Delay queue: the engine's.
    let mut main: VecDeque<(u64, Msg)> = (0..orders)
        .map(|i| {
            (
                0,
                Msg {
                    i,
                    retries: 0,
                    last_delay: 0,
                },
            )
        })
        .collect();
    let mut delayed: DelayQueue<Msg> = DelayQueue::with_capacity(orders as usize);
    let mut workers: BinaryHeap<Reverse<(u64, usize)>> =
        (0..WORKERS).map(|w| Reverse((0, w))).collect();
    // End of each worker's current attempt (0 = idle): an idle worker sleeps
    // until the next thing that can give it work.
    let mut busy_until = [0u64; WORKERS];
    let mut out = Outcomes {
        name,
        attempts: 0,
        completed: 0,
        dead: 0,
        drain_ns: 0,
        buckets: Vec::new(),
        retry_buckets: Vec::new(),
        peak_during: 0,
        peak_after: 0,
        retry_peak_during: 0,
        retry_peak_after: 0,
    };
    let total = u64::from(orders);
    while out.completed + out.dead < total {
        let Reverse((t, w)) = workers.pop().expect("workers never vanish");
        clock.set(t);
        let now = clock.now_ns();
        // Due retries first, then the main queue (as the engine's workers).
        let msg = match delayed.pop_due(now) {
            Some((_, m)) => Some(m),
            None => match main.front() {
                Some(&(avail, m)) if avail <= now => {
                    main.pop_front();
                    Some(m)
                }
                _ => None,
            },
        };
        let Some(mut m) = msg else {
            busy_until[w] = 0;
            let next = [delayed.next_due(), main.front().map(|f| f.0)]
                .into_iter()
                .flatten()
                .chain(busy_until.iter().copied().filter(|&b| b > now))
                .min()
                .expect("an unfinished run always has a next event")
                .max(now + 1);
            workers.push(Reverse((next, w)));
            continue;
        };
        out.attempts += 1;
        let b = (now / BUCKET_NS) as usize;
        if out.buckets.len() <= b {
            out.buckets.resize(b + 1, 0);
        }
        out.buckets[b] += 1;
        if m.retries > 0 {
            if out.retry_buckets.len() <= b {
                out.retry_buckets.resize(b + 1, 0);
            }
            out.retry_buckets[b] += 1;
        }
        let outcome = bridge.decide(
            &BridgeOrder {
                order_id: &ids[m.i as usize],
                symbol: "EURUSD",
                side: Side::Buy,
                qty: Lots(100),
                attempt: m.retries + 1,
                fence_token: u64::from(m.retries) + 1,
            },
            now,
            &mut sim_rng,
        );
        let service = if matches!(outcome, Outcome::Executed(_)) {
            UP_NS
        } else {
            DOWN_NS
        };
        let end = now + service;
        busy_until[w] = end;
        workers.push(Reverse((end, w)));
        match outcome {
            Outcome::Executed(_) => {
                out.completed += 1;
                out.drain_ns = out.drain_ns.max(end);
            }
            Outcome::Permanent(_) => unreachable!("no permanent failures configured"),
            Outcome::Transient(_) => {
                m.retries += 1;
                match policy {
                    Policy::Immediate => main.push_back((end, m)),
                    Policy::Delayed(bk) => {
                        if bk.allows(m.retries) {
                            let d = bk.delay_ns(m.retries, m.last_delay, &mut rng);
                            m.last_delay = d;
                            delayed
                                .push(end + d, m)
                                .expect("capacity holds every order");
                        } else {
                            out.dead += 1;
                            out.drain_ns = out.drain_ns.max(end);
                        }
                    }
                }
            }
        }
    }
    let d = (outage_s * S / BUCKET_NS) as usize;
    let after = d + (5 * S / BUCKET_NS) as usize;
    let peak = |v: &[u64], r: std::ops::Range<usize>| {
        v.get(r.start.min(v.len())..r.end.min(v.len()))
            .map_or(0, |s| s.iter().copied().max().unwrap_or(0))
    };
    out.peak_during = peak(&out.buckets, 0..d);
    out.peak_after = peak(&out.buckets, d..after);
    out.retry_peak_during = peak(&out.retry_buckets, 0..d);
    out.retry_peak_after = peak(&out.retry_buckets, d..after);
    out
}

fn svg(path: &str, outage_s: u64, runs: &[Outcomes]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let t_max = runs
        .iter()
        .map(|r| r.buckets.len() as f64 * 0.1)
        .fold(0.0, f64::max)
        .max(1.0);
    let y_max = runs
        .iter()
        .flat_map(|r| r.buckets.iter().copied())
        .max()
        .unwrap_or(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Attempts sent to the bridge per 100 ms — 10,000 orders, bridge down 0–{outage_s} s"
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, (0.8f64..y_max * 1.5).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("time (s, simulated)")
        .y_desc("attempts / 100 ms (log)")
        .draw()?;
    let colors = [RED, BLUE, GREEN, MAGENTA];
    for (r, c) in runs.iter().zip(colors) {
        chart
            .draw_series(LineSeries::new(
                r.buckets
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (i as f64 * 0.1, (n as f64).max(0.9))),
                c.stroke_width(2),
            ))?
            .label(r.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    if !bench {
        // `cargo test`: a small smoke run of every policy.
        for (name, p) in policies() {
            let r = run(name, p, 500, 5, 1);
            assert_eq!(r.completed + r.dead, 500, "{name}: every order ends once");
        }
        println!(
            "retry_storm: smoke run ok (run `cargo bench --bench retry_storm` for the experiment)"
        );
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("perf");
    for outage in [5u64, 30] {
        let wall = Instant::now();
        let runs: Vec<Outcomes> = policies()
            .into_iter()
            .map(|(name, p)| run(name, p, 10_000, outage, 42))
            .collect();
        println!(
            "\n### Bridge down for {outage} s (10,000 orders, {WORKERS} workers; simulated in {:.2} s of real time)\n",
            wall.elapsed().as_secs_f64()
        );
        println!("| policy | attempts to the bridge | per order | peak attempts / 100 ms: during outage | 5 s after | of which retries: during | after | completed | dead-lettered | time to drain |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &runs {
            println!(
                "| {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {:.2} s |",
                r.name,
                r.attempts,
                r.attempts as f64 / 10_000.0,
                r.peak_during,
                r.peak_after,
                r.retry_peak_during,
                r.retry_peak_after,
                r.completed,
                r.dead,
                r.drain_ns as f64 / S as f64
            );
        }
        let path = dir.join(format!("retry_storm_{outage}s.svg"));
        match svg(path.to_str().expect("utf-8 path"), outage, &runs) {
            Ok(()) => println!("\n(chart: perf/retry_storm_{outage}s.svg)"),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
}
