//! `tickfan orders --to ADDR`: open-loop order flow against an order port.
//!
//! ```text
//!  K connections, each: writer thread ──NEW lines──▶ engine order port
//!                       reader thread ◀──replies───┘
//! ```
//!
//! Order `i` (all connections together) is due at `start + i / rate` and
//! goes on connection `i mod K`; its id `c<K>-<i>` tells the reader its due
//! time, so latencies are measured from when the order was *meant* to be
//! sent (no coordinated omission). The reader checks the protocol: one first
//! answer (`ACK` or `REJECT`) per order, exactly one terminal reply, nothing
//! after it. The run fails (exit 1) if any order lacks its terminal reply
//! by `--drain-timeout` or the protocol was broken.
//!
//! With `--token-file` (a secured engine) each connection first sends
//! `AUTH <token>` and reads the `OK` line, before its writer and reader
//! start; an `ERR …` answer ends the run (exit 1) with that line. The
//! schedule starts once every connection is open and authenticated. An
//! `ERR …` line later (the engine refusing the connection, e.g. a secured
//! engine and no token given) ends the run the same way.
//!
//! With `--status`, the run ends by asking `STATUS` for every id it sent
//! (`orders_status.rs`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use tickfan::client::orders::{new_order_line, Reply};
use tickfan::model::units::{Lots, Side};

use super::{auth, orders_status};
use tickfan::error::Failure;

/// Flags of `tickfan orders`.
#[derive(Debug, Clone, Args)]
pub struct OrdersArgs {
    /// Order port of the engine.
    #[arg(long, value_name = "ADDR", value_parser = tickfan::sys::net::parse_socket_addr, default_value = "127.0.0.1:9103")]
    pub to: SocketAddr,
    /// Orders per second, all connections together.
    #[arg(long, value_name = "PER_SEC", default_value_t = 1_000)]
    pub rate: u64,
    /// Connections (K).
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub connections: usize,
    /// Orders to send in all.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub count: u64,
    /// Quantity distribution in lots: `fixed:Q`, `uniform:A..B`, or
    /// `loguniform:A..B` (many small, few large).
    #[arg(long, value_name = "DIST", default_value = "uniform:0.01..5")]
    pub qty: String,
    /// Symbols the orders spread over.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub symbols: usize,
    /// Time to live of every order (none by default).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub ttl: Option<Duration>,
    /// How long to wait for the last terminal replies after the last send.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub drain_timeout: Duration,
    /// Seed of the quantities and symbols.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Prefix of the client order ids (change it between runs against the
    /// same engine, or they are duplicates).
    #[arg(long, default_value = "t")]
    pub id_prefix: String,
    /// File holding the engine's token; each connection sends `AUTH <token>` first.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// At the end, ask `STATUS <id>` for every id sent (on a new connection)
    /// and print the answers by state.
    #[arg(long)]
    pub status: bool,
}

/// A quantity distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QtyDist {
    /// Always the same.
    Fixed(Lots),
    /// Uniform in hundredths.
    Uniform(Lots, Lots),
    /// Uniform in log space.
    LogUniform(Lots, Lots),
}

impl QtyDist {
    /// Parses `fixed:Q`, `uniform:A..B`, `loguniform:A..B`.
    ///
    /// # Errors
    /// One line saying what is wrong.
    pub fn parse(s: &str) -> Result<QtyDist, String> {
        let lots = |v: &str| Lots::parse(v.trim()).map_err(|e| format!("--qty: '{v}': {e}"));
        let (kind, arg) = s.split_once(':').ok_or("--qty: expected KIND:ARGS")?;
        let range = |arg: &str| -> Result<(Lots, Lots), String> {
            let (a, b) = arg.split_once("..").ok_or("--qty: expected A..B")?;
            let (a, b) = (lots(a)?, lots(b)?);
            if a > b {
                return Err("--qty: A must not exceed B".into());
            }
            Ok((a, b))
        };
        match kind {
            "fixed" => Ok(QtyDist::Fixed(lots(arg)?)),
            "uniform" => range(arg).map(|(a, b)| QtyDist::Uniform(a, b)),
            "loguniform" => range(arg).map(|(a, b)| QtyDist::LogUniform(a, b)),
            other => Err(format!(
                "--qty: unknown kind '{other}' (fixed, uniform, loguniform)"
            )),
        }
    }

    fn draw(&self, rng: &mut StdRng) -> Lots {
        match *self {
            QtyDist::Fixed(q) => q,
            QtyDist::Uniform(a, b) => Lots(rng.random_range(a.0..=b.0)),
            QtyDist::LogUniform(a, b) => {
                let (la, lb) = ((a.0 as f64).ln(), (b.0 as f64).ln());
                let x = (la + rng.random::<f64>() * (lb - la)).exp();
                Lots((x.round() as u64).clamp(a.0, b.0))
            }
        }
    }
}

/// What one connection saw.
#[derive(Debug)]
struct ConnResult {
    sent: u64,
    acked: u64,
    rejected: BTreeMap<String, u64>,
    done: BTreeMap<String, u64>,
    dead: BTreeMap<String, u64>,
    missing: u64,
    violations: Vec<String>,
    ack_latency: Histogram<u64>,
    done_latency: Histogram<u64>,
    /// Completion of the orders `DONE` at their first attempt: the orders
    /// no retry touched (during a retry storm, what the fresh orders get).
    first_try_latency: Histogram<u64>,
    reject_latency: Histogram<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Unsent,
    Acked,
    Ended,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds")
}

/// Runs the subcommand.
pub fn run(args: &OrdersArgs) -> Result<(), Failure> {
    if args.rate == 0 || args.connections == 0 || args.count == 0 || args.symbols == 0 {
        return Err(Failure::Usage(
            "--rate, --connections, --count and --symbols must be positive".into(),
        ));
    }
    let dist = QtyDist::parse(&args.qty).map_err(Failure::Usage)?;
    let token = auth::load(args.token_file.as_deref())?;
    let mut streams = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let stream = TcpStream::connect(args.to)
            .map_err(|e| Failure::Runtime(format!("cannot connect to {}: {e}", args.to)))?;
        let _ = stream.set_nodelay(true);
        if let Some(t) = &token {
            // The `OK` line is read here, before the reader starts.
            auth::line_handshake(&stream, t, "order port")?;
        }
        streams.push(stream);
    }
    let start = Instant::now() + Duration::from_millis(50);
    let args = Arc::new(args.clone());
    let mut handles = Vec::new();
    for (k, stream) in streams.into_iter().enumerate() {
        let a = Arc::clone(&args);
        handles.push(std::thread::spawn(move || {
            connection(k, stream, &a, dist, start)
        }));
    }
    let mut results = Vec::new();
    for h in handles {
        results.push(
            h.join()
                .map_err(|_| Failure::Runtime("a connection thread panicked".into()))??,
        );
    }
    let elapsed = start.elapsed();
    let mut total = results.remove(0);
    for r in results {
        total.sent += r.sent;
        total.acked += r.acked;
        total.missing += r.missing;
        for (m, o) in [
            (&mut total.rejected, r.rejected),
            (&mut total.done, r.done),
            (&mut total.dead, r.dead),
        ] {
            for (k, v) in o {
                *m.entry(k).or_default() += v;
            }
        }
        total.violations.extend(r.violations);
        let _ = total.ack_latency.add(&r.ack_latency);
        let _ = total.done_latency.add(&r.done_latency);
        let _ = total.first_try_latency.add(&r.first_try_latency);
        let _ = total.reject_latency.add(&r.reject_latency);
    }
    print_summary(&total, elapsed, &args);
    if args.status {
        let k = args.connections as u64;
        let ids: Vec<String> = (0..args.count)
            .map(|i| format!("{}{}-{i}", args.id_prefix, i % k))
            .collect();
        orders_status::print(&orders_status::query(args.to, token.as_ref(), &ids)?);
    }
    if total.missing > 0 || !total.violations.is_empty() {
        for v in total.violations.iter().take(10) {
            eprintln!("  violation: {v}");
        }
        return Err(Failure::Runtime(format!(
            "{} orders without a terminal reply, {} protocol violations",
            total.missing,
            total.violations.len()
        )));
    }
    Ok(())
}

fn connection(
    k: usize,
    stream: TcpStream,
    args: &OrdersArgs,
    dist: QtyDist,
    start: Instant,
) -> Result<ConnResult, Failure> {
    let k_total = args.connections as u64;
    let mine: Vec<u64> = (k as u64..args.count).step_by(args.connections).collect();
    let reader = stream
        .try_clone()
        .map_err(|e| Failure::Runtime(format!("socket: {e}")))?;
    let rate = args.rate;
    let due = move |i: u64| start + Duration::from_secs_f64(i as f64 / rate as f64);
    let prefix = args.id_prefix.clone();
    let (symbols, seed, ttl) = (args.symbols, args.seed, args.ttl);
    let to_send = mine.clone();
    let writer = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, stream);
        let mut rng = StdRng::seed_from_u64(seed ^ (k as u64) << 32);
        let mut sent = 0;
        for &i in &to_send {
            let at = due(i);
            let now = Instant::now();
            if at > now {
                out.flush()?;
                std::thread::sleep(at - now);
            }
            let sym = format!("SYM{}", rng.random_range(0..symbols));
            let side = if rng.random_bool(0.5) {
                Side::Buy
            } else {
                Side::Sell
            };
            let line = new_order_line(
                &format!("{prefix}{k}-{i}"),
                &sym,
                side,
                dist.draw(&mut rng),
                ttl,
            );
            out.write_all(line.as_bytes())?;
            sent += 1;
        }
        out.flush()?;
        Ok(sent)
    });
    // Reader: every order of this connection, by its position in `mine`.
    let mut state = vec![State::Unsent; mine.len()];
    let mut r = ConnResult {
        sent: 0,
        acked: 0,
        rejected: BTreeMap::new(),
        done: BTreeMap::new(),
        dead: BTreeMap::new(),
        missing: 0,
        violations: Vec::new(),
        ack_latency: hist(),
        done_latency: hist(),
        first_try_latency: hist(),
        reject_latency: hist(),
    };
    let last_due = due(*mine.last().unwrap_or(&0));
    let give_up = last_due + args.drain_timeout;
    let mut ended = 0usize;
    let _ = reader.set_read_timeout(Some(Duration::from_millis(200)));
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    while ended < mine.len() && Instant::now() < give_up {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(Failure::Runtime(format!("read failed: {e}"))),
        }
        let now = Instant::now();
        if line.starts_with("ERR ") {
            // The engine refused the connection and closed it; the writer
            // ends on its next write (not joined: it may be sleeping).
            let hint = if line.starts_with("ERR authentication") && args.token_file.is_none() {
                " (the engine requires a token: --token-file)"
            } else {
                ""
            };
            return Err(Failure::Runtime(format!(
                "order port {}: {}{hint}",
                args.to,
                line.trim_end()
            )));
        }
        let Some(reply) = Reply::parse(line.trim_end()) else {
            r.violations
                .push(format!("unparseable reply: {}", line.trim_end()));
            continue;
        };
        let Some(i) = reply
            .id()
            .and_then(|id| id.strip_prefix(&*format!("{}{k}-", args.id_prefix)))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            r.violations.push(format!(
                "reply for an order this connection did not send: {}",
                line.trim_end()
            ));
            continue;
        };
        let pos = ((i - k as u64) / k_total) as usize;
        if pos >= state.len() || mine[pos] != i {
            r.violations
                .push(format!("unknown order id in: {}", line.trim_end()));
            continue;
        }
        let lat = now.saturating_duration_since(due(i)).as_nanos() as u64;
        let st = &mut state[pos];
        if *st == State::Ended {
            r.violations
                .push(format!("reply after the terminal one: {}", line.trim_end()));
            continue;
        }
        match &reply {
            Reply::Ack { .. } => {
                if *st == State::Acked {
                    r.violations
                        .push(format!("second ACK: {}", line.trim_end()));
                }
                *st = State::Acked;
                r.acked += 1;
                r.ack_latency.saturating_record(lat.max(1));
            }
            Reply::Fill { .. } => {
                if *st != State::Acked {
                    r.violations
                        .push(format!("FILL before ACK: {}", line.trim_end()));
                }
            }
            Reply::Reject { reason, .. } => {
                let was_acked = *st == State::Acked;
                *st = State::Ended;
                ended += 1;
                *r.rejected.entry(reason.as_str().to_string()).or_default() += 1;
                if was_acked {
                    r.done_latency.saturating_record(lat.max(1));
                } else {
                    r.reject_latency.saturating_record(lat.max(1));
                }
            }
            Reply::Done {
                status, attempts, ..
            } => {
                if *st != State::Acked {
                    r.violations
                        .push(format!("DONE before ACK: {}", line.trim_end()));
                }
                *st = State::Ended;
                ended += 1;
                *r.done.entry(status.as_str().to_string()).or_default() += 1;
                r.done_latency.saturating_record(lat.max(1));
                if *attempts == 1 {
                    r.first_try_latency.saturating_record(lat.max(1));
                }
            }
            Reply::Dead { reason, .. } => {
                *st = State::Ended;
                ended += 1;
                *r.dead.entry(reason.clone()).or_default() += 1;
                r.done_latency.saturating_record(lat.max(1));
            }
            Reply::Status { .. } => r
                .violations
                .push(format!("STATUS reply never asked for: {}", line.trim_end())),
            Reply::Pong => {}
        }
    }
    r.sent = writer
        .join()
        .map_err(|_| Failure::Runtime("writer panicked".into()))?
        .map_err(|e| Failure::Runtime(format!("send failed: {e}")))?;
    r.missing = r.sent - ended as u64;
    Ok(r)
}

fn pct(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "n/a".into();
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    format!(
        "p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms  (n {})",
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max()),
        h.len()
    )
}

fn print_summary(t: &ConnResult, elapsed: Duration, args: &OrdersArgs) {
    let join = |m: &BTreeMap<String, u64>| {
        if m.is_empty() {
            "none".to_string()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    println!(
        "orders: sent {} in {:.2} s ({} connections, target {}/s, qty {})",
        t.sent,
        elapsed.as_secs_f64(),
        args.connections,
        args.rate,
        args.qty
    );
    println!("  accepted {}  rejected: {}", t.acked, join(&t.rejected));
    println!(
        "  done: {}  dead-lettered: {}",
        join(&t.done),
        join(&t.dead)
    );
    println!("  acceptance (due → ACK):        {}", pct(&t.ack_latency));
    println!(
        "  rejection  (due → REJECT):     {}",
        pct(&t.reject_latency)
    );
    println!("  completion (due → terminal):   {}", pct(&t.done_latency));
    println!(
        "    DONE at the first attempt:   {}",
        pct(&t.first_try_latency)
    );
    if t.missing == 0 && t.violations.is_empty() {
        println!("  every order got exactly one terminal reply");
    } else {
        println!(
            "  MISSING terminal replies: {}  protocol violations: {}",
            t.missing,
            t.violations.len()
        );
    }
}
