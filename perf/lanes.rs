//! Head-of-line blocking: small-order latency with one shared lane versus
//! separate lanes with chunking, side by side in one run.
//!
//! ```text
//!  open-loop client ──NEW (99% 0.01–5 lots, 1% 1,000 lots)──▶ tickfan serve (library, loopback)
//!   (due = start + i/rate;                                      │
//!    latency = DONE − due)                                      ├─ shared: one queue, 4 workers, orders whole
//!                                                               └─ split:  small queue → 2 workers,
//!                                                                          large queue → 2 workers, chunks of 100 lots
//!                                                                 ──▶ 2 simulated venues: 1 ms + 2 ms per lot
//! ```
//!
//! The engine is the real one (`runtime::Engine`, real threads, real
//! sockets, real time); only the venues are simulated: an attempt takes
//! 1 ms plus 2 ms per lot, so a 1,000-lot order takes ~2 s in one piece and
//! a 100-lot chunk ~0.2 s. Both modes get the same seeded order flow (the
//! same sizes at the same intended times) and the same four worker threads;
//! only `--order-lanes` differs. Latency is measured from each order's
//! intended send time (open loop, so a stalled engine cannot hide its
//! stall by slowing the sender) to its `DONE`.
//!
//! `cargo bench --bench lanes` runs 35 s per mode at 60 orders/s (~2,100
//! orders, ~20 large, per mode), prints the table and writes
//! `perf/lanes_small_latency.svg`. `RATE`, `SECS` and `SEED` override.
//! Without `--bench` (e.g. `cargo test --benches`) it makes a one-second
//! smoke run of both modes and checks every order ended once.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use tickfan::bridge::spec::{Latency, SimSpec};
use tickfan::client::orders::Reply;
use tickfan::config::Config;
use tickfan::model::units::Lots;
use tickfan::order::config::LaneMode;
use tickfan::runtime::Engine;

#[derive(Debug, Clone, Copy)]
struct Params {
    rate: f64,
    secs: f64,
    seed: u64,
    per_lot: Duration,
}

#[derive(Debug)]
struct Run {
    mode: LaneMode,
    small: Histogram<u64>,
    large: Histogram<u64>,
}

/// The flow: (intended offset from start, lots in hundredths), seeded.
fn flow(p: &Params) -> Vec<(Duration, u64)> {
    let mut rng = StdRng::seed_from_u64(p.seed);
    let n = (p.rate * p.secs) as usize;
    (0..n)
        .map(|i| {
            let at = Duration::from_secs_f64(i as f64 / p.rate);
            let qty = if rng.random_bool(0.01) {
                100_000
            } else {
                rng.random_range(1..=500)
            };
            (at, qty)
        })
        .collect()
}

fn run(mode: LaneMode, p: &Params) -> Run {
    let mut c = Config::ephemeral();
    c.order.lanes.mode = mode;
    c.order.workers = 2;
    c.order.large_workers = 2; // shared mode: one lane with 2 + 2 workers
    c.order.bridges = ["v1", "v2"]
        .iter()
        .map(|n| SimSpec {
            latency: Latency::Fixed(Duration::from_millis(1)),
            per_lot: p.per_lot,
            max_fills: 3,
            reorder: 0.05,
            dup: 0.01,
            ..SimSpec::instant(n)
        })
        .collect();
    let engine = Engine::start(&c).expect("engine starts");
    let orders = Arc::new(flow(p));
    let stream = TcpStream::connect(engine.order_addr()).expect("connect");
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let start = Instant::now() + Duration::from_millis(100);
    let sender = {
        let orders = Arc::clone(&orders);
        std::thread::spawn(move || {
            for (i, (at, qty)) in orders.iter().enumerate() {
                let due = start + *at;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let kind = if *qty > 10_000 { 'L' } else { 's' };
                let line = format!("NEW {kind}{i} EURUSD BUY {}\n", Lots(*qty));
                writer.write_all(line.as_bytes()).expect("send");
            }
        })
    };
    let mut small = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).unwrap();
    let mut large = small.clone();
    let mut reader = BufReader::new(stream);
    let mut ended: HashMap<usize, ()> = HashMap::new();
    let mut line = String::new();
    while ended.len() < orders.len() {
        line.clear();
        assert!(
            reader.read_line(&mut line).expect("read") > 0,
            "engine closed"
        );
        let r = Reply::parse(line.trim_end()).unwrap_or_else(|| panic!("bad reply {line}"));
        if !r.is_terminal() {
            continue;
        }
        let id = r.id().unwrap();
        assert!(matches!(r, Reply::Done { .. }), "every order fills: {r:?}");
        let i: usize = id[1..].parse().unwrap();
        assert!(
            ended.insert(i, ()).is_none(),
            "one terminal reply per order"
        );
        let due = start + orders[i].0;
        let us = Instant::now().saturating_duration_since(due).as_micros() as u64;
        if id.starts_with('L') {
            large.saturating_record(us.max(1));
        } else {
            small.saturating_record(us.max(1));
        }
    }
    sender.join().unwrap();
    engine.stop();
    Run { mode, small, large }
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1_000.0)
}

fn svg(path: &std::path::Path, runs: &[Run], p: &Params) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let y_max = runs.iter().map(|r| r.small.max()).max().unwrap_or(1) as f64 / 1_000.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Small-order latency (intended send → DONE), {:.0} orders/s, 1% of 1,000 lots",
                p.rate
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (1f64..10_000f64).log_scale(),
            (0.5f64..y_max * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ms, log)")
        .x_label_formatter(&|x| {
            let q = 100.0 * (1.0 - 1.0 / x);
            if q < 99.0 {
                format!("{q:.0}%")
            } else {
                format!("{q:.2}%")
            }
        })
        .draw()?;
    for (r, c) in runs.iter().zip([RED, BLUE]) {
        let name = match r.mode {
            LaneMode::Shared => "one shared lane (4 workers, orders whole)",
            LaneMode::Split => "separate lanes (2 + 2 workers, chunks of 100 lots)",
        };
        chart
            .draw_series(LineSeries::new(
                (0..=400).map(|k| {
                    let x = 10f64.powf(k as f64 / 100.0);
                    let q = 1.0 - 1.0 / x;
                    (x, (r.small.value_at_quantile(q) as f64 / 1_000.0).max(0.5))
                }),
                c.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn env<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    if !bench {
        let p = Params {
            rate: 200.0,
            secs: 1.0,
            seed: 7,
            per_lot: Duration::from_micros(20),
        };
        for mode in [LaneMode::Shared, LaneMode::Split] {
            let r = run(mode, &p);
            assert_eq!(r.small.len() + r.large.len(), flow(&p).len() as u64);
        }
        println!("lanes: smoke run ok (run `cargo bench --bench lanes` for the experiment)");
        return;
    }
    let p = Params {
        rate: env("RATE", 60.0),
        secs: env("SECS", 35.0),
        seed: env("SEED", 42),
        per_lot: Duration::from_millis(2),
    };
    let f = flow(&p);
    let n_large = f.iter().filter(|(_, q)| *q > 10_000).count();
    let wall = Instant::now();
    let runs: Vec<Run> = [LaneMode::Shared, LaneMode::Split]
        .into_iter()
        .map(|m| run(m, &p))
        .collect();
    println!(
        "\n### {} orders at {:.0}/s for {:.0} s per mode ({} small of 0.01–5 lots, {} of 1,000 lots); {:.0} s of real time\n",
        f.len(),
        p.rate,
        p.secs,
        f.len() - n_large,
        n_large,
        wall.elapsed().as_secs_f64()
    );
    println!("| lanes | small p50 | p90 | p99 | p99.9 | max | large p50 | large max |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        let s = &r.small;
        println!(
            "| {} | {} ms | {} ms | {} ms | {} ms | {} ms | {} ms | {} ms |",
            match r.mode {
                LaneMode::Shared => "one shared lane, 4 workers",
                LaneMode::Split => "separate lanes, 2 + 2 workers, chunks of 100 lots",
            },
            ms(s.value_at_quantile(0.5)),
            ms(s.value_at_quantile(0.9)),
            ms(s.value_at_quantile(0.99)),
            ms(s.value_at_quantile(0.999)),
            ms(s.max()),
            ms(r.large.value_at_quantile(0.5)),
            ms(r.large.max()),
        );
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("perf/lanes_small_latency.svg");
    svg(&path, &runs, &p).expect("svg written");
    println!("\nwrote {}", path.display());
}
