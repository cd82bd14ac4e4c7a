//! `tickfan demo`: the whole market-data path in one process, on ephemeral
//! loopback ports, then a p99 report.
//!
//! ```text
//!  sender thread ──CSV ticks──▶ engine feed ─▶ slots ─▶ publisher ──RESP──▶ N subscribers
//!  (open-loop, ts_ns = intended send time)                           └──▶ 1 slow subscriber
//! ```
//!
//! Ticks come from `--file` when given, otherwise from a built-in
//! deterministic random walk over `--symbols` symbols. Each tick is stamped
//! with the time it is *meant* to be sent, so the subscribers' end-to-end
//! latency (receive time − `ts_ns`) includes any time the sender fell behind
//! (no coordinated omission).

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use tickfan::config::Config;
use tickfan::metrics::report::StageSummary;
use tickfan::metrics::Stage;
use tickfan::runtime::Engine;
use tickfan::sys::clock::wall_ns;

use crate::Failure;
use tickfan::protocol::client::{as_message, command, read_frame};

/// Flags of `tickfan demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Replay this tick file instead of generated ticks (`ts_ns` is re-stamped).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Ticks per second sent to the engine.
    #[arg(long, value_name = "PER_SEC", default_value_t = 50_000)]
    pub rate: u64,
    /// How long to send.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// Symbols of the generated ticks.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    pub symbols: usize,
    /// Normal subscribers (`PSUBSCRIBE *`).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub subscribers: usize,
    /// Slow subscribers (read at `--slow-bytes-per-sec`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub slow: usize,
    /// Read rate of a slow subscriber.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024)]
    pub slow_bytes_per_sec: u64,
    /// Seed of the generated ticks.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Subscriber output buffer high-water mark of the engine.
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024)]
    pub sub_hwm: usize,
}

/// One subscriber's view of the run.
#[derive(Debug)]
struct SubResult {
    slow: bool,
    messages: u64,
    latency: Histogram<u64>,
}

/// Runs the subcommand.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    if args.rate == 0 || args.symbols == 0 {
        return Err(Failure::Usage(
            "--rate and --symbols must be positive".into(),
        ));
    }
    let config = Config {
        print_intervals: true,
        report_interval: Duration::from_secs(1),
        sub_hwm: args.sub_hwm,
        ..Config::ephemeral()
    };
    let engine = Engine::start(&config).map_err(|e| Failure::Runtime(e.to_string()))?;
    eprintln!(
        "demo: engine feed {} subscribers {}; {} subscribers + {} slow, {} ticks/s for {:?}",
        engine.feed_addr(),
        engine.subscriber_addr(),
        args.subscribers,
        args.slow,
        args.rate,
        args.duration
    );
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicU64::new(0));
    let mut subs = Vec::new();
    for i in 0..args.subscribers + args.slow {
        let slow = i >= args.subscribers;
        let (addr, stop, ready) = (
            engine.subscriber_addr(),
            Arc::clone(&stop),
            Arc::clone(&ready),
        );
        let rate = args.slow_bytes_per_sec;
        subs.push(std::thread::spawn(move || {
            subscriber(addr, slow, rate, &stop, &ready)
        }));
    }
    // Start sending once every subscriber has its subscription confirmed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ready.load(Ordering::Acquire) < (args.subscribers + args.slow) as u64 {
        if Instant::now() > deadline {
            return Err(Failure::Runtime(
                "subscribers did not connect within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let lines = match &args.file {
        Some(p) => load_lines(p)?,
        None => generate(args.symbols, args.seed, 100_000),
    };
    let sent = send(engine.feed_addr(), &lines, args.rate, args.duration)?;
    // Let the publisher drain what is in the slots, then stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = engine.counters().snapshot();
        if c.ticks_received >= sent && c.published + c.conflated >= c.ticks_valid {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Release);
    let report = engine.stop();
    let results: Vec<SubResult> = subs.into_iter().filter_map(|h| h.join().ok()).collect();
    println!("{report}");
    print_subscribers(&results, sent);
    if let Some(e2e) = report.stage(Stage::EngineE2e) {
        println!(
            "engine end-to-end p99 {:.1} µs over {} updates",
            e2e.p99_us, e2e.count
        );
    }
    Ok(())
}

fn print_subscribers(results: &[SubResult], sent: u64) {
    println!("subscriber end-to-end latency (intended send time → received), µs:");
    println!(
        "{:<8} {:>6} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "class", "subs", "messages", "p50", "p90", "p99", "p99.9", "max"
    );
    for slow in [false, true] {
        let mut h =
            Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds");
        let mut n = 0;
        let mut msgs = 0;
        for r in results.iter().filter(|r| r.slow == slow) {
            let _ = h.add(&r.latency);
            n += 1;
            msgs += r.messages;
        }
        if n == 0 {
            continue;
        }
        let s = StageSummary::from_histogram(Stage::EngineE2e, &h);
        println!(
            "{:<8} {:>6} {:>12} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            if slow { "slow" } else { "normal" },
            n,
            msgs,
            s.p50_us,
            s.p90_us,
            s.p99_us,
            s.p999_us,
            s.max_us
        );
    }
    println!("ticks sent {sent}");
}

fn subscriber(
    addr: SocketAddr,
    slow: bool,
    bytes_per_sec: u64,
    stop: &AtomicBool,
    ready: &AtomicU64,
) -> SubResult {
    let mut res = SubResult {
        slow,
        messages: 0,
        latency: Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds"),
    };
    let Ok(mut stream) = TcpStream::connect(addr) else {
        ready.fetch_add(1, Ordering::AcqRel);
        return res;
    };
    let _ = stream.write_all(&command(&[b"PSUBSCRIBE", b"*"]));
    let reader: Box<dyn Read> = if slow {
        Box::new(Throttled {
            inner: stream.try_clone().expect("clone socket"),
            bytes_per_sec,
            started: Instant::now(),
            read: 0,
        })
    } else {
        Box::new(stream.try_clone().expect("clone socket"))
    };
    let mut r = BufReader::with_capacity(if slow { 512 } else { 64 * 1024 }, reader);
    // The confirmation.
    let _ = read_frame(&mut r);
    ready.fetch_add(1, Ordering::AcqRel);
    while let Ok(frame) = read_frame(&mut r) {
        if let Some((_, payload)) = as_message(&frame) {
            res.messages += 1;
            let ts = payload
                .split(|&b| b == b',')
                .next()
                .and_then(|f| std::str::from_utf8(f).ok())
                .and_then(|s| s.parse::<u64>().ok());
            if let Some(ts) = ts {
                res.latency
                    .saturating_record(wall_ns().saturating_sub(ts).max(1));
            }
        }
        if slow && stop.load(Ordering::Acquire) {
            break;
        }
    }
    res
}

/// A reader limited to a byte rate (the slow subscriber).
struct Throttled {
    inner: TcpStream,
    bytes_per_sec: u64,
    started: Instant,
    read: u64,
}

impl Read for Throttled {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let allowed = (self.started.elapsed().as_secs_f64() * self.bytes_per_sec as f64) as u64;
        if self.read >= allowed {
            std::thread::sleep(Duration::from_millis(10));
        }
        let n = buf.len().min(256);
        let got = self.inner.read(&mut buf[..n])?;
        self.read += got as u64;
        Ok(got)
    }
}

/// Generated ticks: a random walk per symbol with 5-decimal prices.
/// Each line lacks its `ts_ns` (stamped when sent): `symbol,bid,ask,bq,aq`.
fn generate(symbols: usize, seed: u64, count: usize) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut mids: Vec<i64> = (0..symbols)
        .map(|_| rng.random_range(50_000..200_000))
        .collect();
    (0..count)
        .map(|_| {
            let s = rng.random_range(0..symbols);
            mids[s] = (mids[s] + rng.random_range(-3..=3)).max(10);
            let spread = rng.random_range(1..4);
            let (bid, ask) = (mids[s], mids[s] + spread);
            format!(
                "SYM{s:04},{}.{:05},{}.{:05},{},{}",
                bid / 100_000,
                bid % 100_000,
                ask / 100_000,
                ask % 100_000,
                rng.random_range(1..50) * 100_000,
                rng.random_range(1..50) * 100_000
            )
        })
        .collect()
}

/// A tick file's data lines without their `ts_ns` field.
fn load_lines(path: &PathBuf) -> Result<Vec<String>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("ts_ns,") && !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split_once(',').map(|(_, rest)| rest.to_string()))
        .collect();
    if lines.is_empty() {
        return Err(Failure::Usage(format!("{} holds no ticks", path.display())));
    }
    Ok(lines)
}

/// Sends `lines` round-robin at `rate` for `duration`, stamping each with its
/// intended send time. Returns the ticks sent.
fn send(addr: SocketAddr, lines: &[String], rate: u64, duration: Duration) -> Result<u64, Failure> {
    let stream =
        TcpStream::connect(addr).map_err(|e| Failure::Runtime(format!("connect feed: {e}")))?;
    let _ = stream.set_nodelay(true);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stream);
    let start = Instant::now();
    let start_wall = wall_ns();
    let total = (rate as f64 * duration.as_secs_f64()) as u64;
    let mut buf = Vec::with_capacity(256);
    // Send in 1 ms slices: every tick due by now goes out, then flush.
    let mut sent = 0u64;
    while sent < total {
        let elapsed = start.elapsed();
        let due = ((elapsed.as_secs_f64() * rate as f64) as u64 + 1).min(total);
        while sent < due {
            let intended = start_wall + (sent as f64 * 1e9 / rate as f64) as u64;
            buf.clear();
            buf.extend_from_slice(itoa::Buffer::new().format(intended).as_bytes());
            buf.push(b',');
            buf.extend_from_slice(lines[(sent % lines.len() as u64) as usize].as_bytes());
            buf.push(b'\n');
            out.write_all(&buf)
                .map_err(|e| Failure::Runtime(format!("send: {e}")))?;
            sent += 1;
        }
        out.flush()
            .map_err(|e| Failure::Runtime(format!("send: {e}")))?;
        if sent < total {
            let next_due = Duration::from_secs_f64(sent as f64 / rate as f64);
            if let Some(wait) = next_due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait.min(Duration::from_millis(1)));
            }
        }
    }
    Ok(sent)
}
