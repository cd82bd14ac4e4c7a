//! `tickfan demo`: the whole market-data path in one process, on ephemeral
//! loopback ports, then a p99 report of every stage and of end-to-end
//! latency, with its files (HdrHistogram logs, SVG plots, JSON) written to
//! `--report-dir` (default `./tickfan-report/`).
//!
//! ```text
//!  replay sender ──CSV ticks──▶ engine feed ─▶ slots ─▶ publisher ──RESP──▶ K subscribers ┐ one mio
//!  (open-loop, --stamp)                                           └──RESP──▶ S slow ones  ┘ thread
//!        │ send_lag, sent ticks    │ every stage                         │ e2e per class; at the end,
//!        ▼                         ▼                                     ▼ freshness from the sent ticks
//!   replay.hlog               engine.hlog                 subscribers.hlog, freshness.hlog ──▶ tickfan report
//!   sent-ticks.csv ─────────────────────────────────────────────▶ (read at the end, then deleted)
//! ```
//!
//! The report leads the tick path with **freshness** (per sent tick, the
//! time until a reader holds that symbol at that tick or newer), not with
//! latency over delivered messages: a conflating server supersedes ticks,
//! and a superseded tick never shows in latency. So the sender always
//! records what it sent (`replay --record-sent`, the first
//! [`DEMO_SENT_MAX`] ticks, into `sent-ticks.csv` in the report directory,
//! deleted once read) and the subscribers always compute freshness from it
//! (`subscribe --sent`) into `freshness.hlog`. `--stall-reader D` makes
//! one normal subscriber stop reading for D a third into the run, to see
//! what the report shows of a reader that stalls.
//!
//! Ticks come from `--file` (any file `replay` reads, decoded into memory and looped) or from `tickfan gen`'s
//! model over `--symbols` symbols. The sender is `replay`'s open-loop sender
//! at `--rate` with `--stamp`: each tick carries the time it was *meant* to
//! be sent, so the subscribers' latency includes any time the sender fell
//! behind (no coordinated omission). The subscribers are `subscribe`'s
//! event loop. The run succeeds (exit 0) when the normal subscribers
//! received updates and every file was written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use tickfan::config::Config;
use tickfan::metrics::Stage;
use tickfan::runtime::Engine;

use super::freshness::DEMO_SENT_MAX;
use super::gen::{GenSpec, TickGen};
use super::orders::{self, OrdersArgs};
use super::replay::{progress_bar, Pace, SendAs, Sender, SenderSettings};
use super::report;
use super::subscribe::{run_load, LoadProgress, LoadReport, LoadSpec, Stall};
use tickfan::error::Failure;

/// Flags of `tickfan demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Replay this tick file (looped) instead of generated ticks: tickfan CSV, DBN or Tardis CSV, plain or compressed; `ts_ns` is re-stamped.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Ticks per second sent to the engine.
    #[arg(long, value_name = "PER_SEC", default_value_t = 50_000)]
    pub rate: u64,
    /// How long to send.
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration, default_value = "10s")]
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
    /// Where the histogram logs, plots and JSON summary go (created if missing; files of the same names are overwritten).
    #[arg(long, value_name = "DIR", default_value = "tickfan-report")]
    pub report_dir: PathBuf,
    /// Orders per second sent to the order port during the run (0 = none).
    #[arg(long, value_name = "PER_SEC", default_value_t = 500)]
    pub order_rate: u64,
    /// Run across the NATS backbone instead: a 3-server NATS cluster, one ingest, `--edges` edges; one NATS server killed halfway.
    #[arg(long)]
    pub cluster: bool,
    /// Edges of `--cluster` (the subscribers are spread over them).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub edges: usize,
    /// With `--cluster`: do not kill a NATS server (for steady-state figures).
    #[arg(long)]
    pub keep_nats: bool,
    /// One normal subscriber stops reading for this long, a third into the run (what a stalled reader costs).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration, conflicts_with = "cluster")]
    pub stall_reader: Option<Duration>,
}

/// The sent record in the report directory (deleted once the subscribers read it).
const SENT_FILE: &str = "sent-ticks.csv";

/// Ticks held in memory, sent round-robin: one buffer, lines split on `\n`.
pub(crate) struct TickRing {
    bytes: Vec<u8>,
    at: usize,
}

impl TickRing {
    /// The next line and whether it ended a pass over the buffer.
    pub(crate) fn next_line(&mut self) -> (&[u8], bool) {
        let start = self.at;
        let end =
            memchr::memchr(b'\n', &self.bytes[start..]).map_or(self.bytes.len(), |i| start + i);
        self.at = end + 1;
        let wrapped = self.at >= self.bytes.len();
        if wrapped {
            self.at = 0;
        }
        (&self.bytes[start..end], wrapped)
    }
}

pub(crate) fn ticks(args: &DemoArgs) -> Result<TickRing, Failure> {
    let bytes = match &args.file {
        // Any replay format (tickfan CSV, DBN, Tardis; plain or
        // compressed), decoded to quote lines the demo loops over.
        Some(p) => {
            let (lines, skips) = super::replay::decode_all(p)?;
            if skips.total() > 0 {
                eprintln!(
                    "demo: {}: skipped {} records: {skips}",
                    p.display(),
                    skips.total()
                );
            }
            lines
        }
        None => {
            // Enough distinct ticks for the run, at most 200,000 (then they repeat).
            let n = (args.rate as f64 * args.duration.as_secs_f64()).clamp(1.0, 200_000.0) as usize;
            let mut g = TickGen::new(&GenSpec::steady(args.symbols, args.seed));
            let mut b = Vec::with_capacity(n * 64);
            for _ in 0..n {
                g.next_into(&mut b);
                b.push(b'\n');
            }
            b
        }
    };
    let mut bytes = bytes;
    while bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(Failure::Usage("no ticks to send".into()));
    }
    Ok(TickRing { bytes, at: 0 })
}

/// Runs the subcommand.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    if args.rate == 0 || args.symbols == 0 || args.subscribers == 0 {
        return Err(Failure::Usage(
            "--rate, --symbols and --subscribers must be positive".into(),
        ));
    }
    if args.cluster {
        return super::demo_cluster::run(args);
    }
    let dir = args.report_dir.clone();
    let mut ring = ticks(args)?;
    // The demo's orders go through the journal, as a served engine's do,
    // in a directory of its own that each run starts afresh (a previous
    // run's ids would otherwise be duplicates, its open orders recovered).
    let data_dir = dir.join("journal");
    match std::fs::remove_dir_all(&data_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Failure::Runtime(format!(
                "cannot clear {}: {e}",
                data_dir.display()
            )))
        }
    }
    let mut config = Config {
        print_intervals: true,
        report_interval: Duration::from_secs(1),
        sub_hwm: args.sub_hwm,
        log_dir: Some(dir.clone()),
        ..Config::ephemeral()
    };
    config.order.journal = true;
    config.order.data_dir = data_dir.clone();
    let engine = Engine::start(&config).map_err(|e| Failure::Runtime(e.to_string()))?;
    eprintln!(
        "demo: engine feed {} subscribers {}; {} subscribers + {} slow, {} ticks/s for {:?}; report files in {}; order journal in {}",
        engine.feed_addr(),
        engine.subscriber_addr(),
        args.subscribers,
        args.slow,
        args.rate,
        args.duration,
        dir.display(),
        data_dir.display()
    );

    // The load generators. Each writes its own histogram log into `dir`;
    // `report` reads every `*.hlog` there. The order flow runs beside the
    // tick sender; its stages are in the engine's log and final report.
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(LoadProgress::default());
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    let sent_file = dir.join(SENT_FILE);
    let load = {
        let spec = LoadSpec {
            to: engine.subscriber_addr(),
            normal: args.subscribers,
            slow: args.slow,
            slow_bytes_per_sec: args.slow_bytes_per_sec,
            patterns: vec!["*".into()],
            channels: Vec::new(),
            duration: None,
            until: None,
            interval: Duration::from_secs(1),
            log_dir: Some(dir.clone()),
            print_intervals: false,
            token: None,
            sent: Some(sent_file.clone()),
            // A connection receives at most one message per tick sent.
            held_max: DEMO_SENT_MAX as usize,
            slow_rcvbuf: 0,
            stall: args.stall_reader.map(|length| Stall {
                after: args.duration / 3,
                length,
            }),
            tls: None,
        };
        let (stop, progress) = (Arc::clone(&stop), Arc::clone(&progress));
        std::thread::Builder::new()
            .name("demo-subscribers".into())
            .spawn(move || run_load(&spec, &stop, &progress))
            .map_err(|e| Failure::Runtime(format!("cannot start subscribers: {e}")))?
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !progress.ready.load(Ordering::Acquire) {
        if load.is_finished() {
            return Err(load
                .join()
                .map_err(|_| Failure::Runtime("subscriber thread panicked".into()))?
                .err()
                .unwrap_or_else(|| Failure::Runtime("subscribers ended early".into())));
        }
        if Instant::now() > deadline {
            return Err(Failure::Runtime(
                "subscribers did not subscribe within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }

    let orders = (args.order_rate > 0).then(|| {
        let oargs = OrdersArgs {
            to: engine.order_addr(),
            rate: args.order_rate,
            connections: 2,
            count: ((args.order_rate as f64 * args.duration.as_secs_f64()) as u64).max(1),
            // Many small orders and a few above the 100-lot threshold, so
            // both lanes (and the chunking) run and report.
            qty: "loguniform:0.01..300".into(),
            symbols: 10,
            ttl: None,
            drain_timeout: Duration::from_secs(30),
            seed: args.seed,
            id_prefix: "demo".into(),
            token_file: None,
            status: false,
        };
        std::thread::spawn(move || orders::run(&oargs))
    });
    let mut sender = Sender::connect(
        engine.feed_addr(),
        SenderSettings {
            pace: Pace::Rate(args.rate as f64),
            stamp: true,
            send_as: SendAs::Csv,
            duration: Some(args.duration),
            log_dir: Some(dir.clone()),
            stop: None,
            // The demo's engine runs without a token.
            token: None,
            record_sent: Some(sent_file.clone()),
            record_sent_max: DEMO_SENT_MAX,
        },
        // The engine prints a line per second on stderr; a bar would fight it.
        progress_bar(None, true),
    )?;
    loop {
        let (line, wrapped) = ring.next_line();
        if !sender.send(line)? {
            break;
        }
        if wrapped {
            sender.end_loop();
        }
    }
    let sent = sender.finish()?;
    if let Some(h) = orders {
        // Every order it sent has its terminal reply (the tool checks).
        h.join()
            .map_err(|_| Failure::Runtime("order flow thread panicked".into()))??;
    }

    // Let the engine take every tick and the subscribers read every update.
    wait_for(
        "the engine to read every tick",
        Duration::from_secs(10),
        || {
            let c = engine.counters().snapshot();
            c.ticks_received + c.feed.lines_skipped >= sent.lines
                && c.publish.published + c.publish.conflated >= c.feed.ticks_valid
        },
    );
    // Every frame the engine queued for a normal subscriber, and nothing
    // still pending for one (a reader that stalled was conflated: it gets
    // fewer frames than updates published, the latest value of each).
    let normal: Vec<String> = progress
        .normal_addrs
        .get()
        .map(|a| a.iter().map(|a| a.to_string()).collect())
        .unwrap_or_default();
    wait_for(
        "the subscribers to read every update",
        Duration::from_secs(10),
        || {
            let (mut frames, mut pending) = (0, 0);
            for s in engine
                .subscribers()
                .iter()
                .filter(|s| normal.contains(&s.peer))
            {
                frames += s.frames;
                pending += s.pending_symbols;
            }
            pending == 0 && progress.messages[0].load(Ordering::Relaxed) >= frames
        },
    );
    stop.store(true, Ordering::Release);
    let subs = load
        .join()
        .map_err(|_| Failure::Runtime("subscriber thread panicked".into()));
    // Read at the end of the subscribers' run; not kept (it is as long as
    // the run, and freshness.hlog holds what it was for).
    let _ = std::fs::remove_file(&sent_file);
    let subs: LoadReport = subs??;
    let engine_report = engine.stop();

    println!("{engine_report}");
    println!(
        "sender: {} ticks in {:.2} s, behind schedule p99 {:.2} ms, max {:.2} ms",
        sent.lines,
        sent.elapsed.as_secs_f64(),
        sent.p99_behind.as_secs_f64() * 1e3,
        sent.max_behind.as_secs_f64() * 1e3
    );
    println!("{subs}");
    if sent.recorded < sent.lines {
        println!(
            "freshness is measured over the first {} ticks sent of {} (the sent record's bound)",
            sent.recorded, sent.lines
        );
    }
    // The run's counts, for `report` (its page shows them), as `serve --log-dir` writes them.
    let p = dir.join("final-report.json");
    let json = serde_json::to_string_pretty(&engine_report).expect("serialises");
    std::fs::write(&p, json)
        .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", p.display())))?;
    print_files(&dir)?;
    if subs.class("normal").is_none_or(|c| c.messages == 0) {
        return Err(Failure::Runtime(
            "the subscribers received no update".into(),
        ));
    }
    if let Some(e2e) = engine_report.stage(Stage::EngineE2e) {
        println!(
            "engine end-to-end p99 {:.1} µs over {} updates; subscribers (intended send → received) p99 {:.1} µs",
            e2e.pct.p99_us,
            e2e.pct.count,
            subs.class("normal").map_or(0.0, |c| c.latency.p99_us)
        );
    }
    for c in &subs.classes {
        if let Some(f) = &c.freshness {
            println!(
                "{} subscribers: freshness p99 {:.1} µs (what a reader waits for), delivered latency p99 {:.1} µs",
                c.class, f.freshness.p99_us, c.latency.p99_us
            );
        }
    }
    Ok(())
}

/// Renders the report directory and says where it is.
fn print_files(dir: &Path) -> Result<(), Failure> {
    let r = report::render(dir, dir)?;
    print!("{}", report::headline(&r.series));
    println!("percentiles per stage and end to end (from the histogram logs):");
    print!("{}", report::table(&r.series));
    let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    println!("report files written to {}:", shown.display());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Failure::Runtime(format!("cannot list {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    println!("  {}", names.join("  "));
    println!("  (re-render with: tickfan report {})", dir.display());
    Ok(())
}

/// Polls `cond` until it holds or `limit` passes (then goes on: the report
/// shows what arrived).
fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        if Instant::now() > end {
            eprintln!("demo: gave up waiting for {what} after {limit:?}");
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
