//! `tickfan subscribe --to ADDR`: subscriber load with end-to-end latency.
//!
//! ```text
//!                 ┌──────────── one mio event-loop thread ─────────────┐
//!  server ──RESP──▶ K normal connections: read until WouldBlock          │
//!         ──RESP──▶ S slow connections: read at most --slow-bytes-per-sec│
//!                 └── per class: HDR histogram of (receive time − ts_ns) ┘
//! ```
//!
//! Works against anything that speaks Redis pub/sub (tickfan, `redis-server`,
//! the raw forwarder). Per class (normal, slow) it counts messages, bytes,
//! **sequence gaps** (the payload's 7th field is the symbol's update number:
//! a jump from 5 to 9 means 3 updates were conflated away; the first message
//! of a symbol on a connection sets the base), repeats (a number not above
//! the last one), server errors and **disconnects** (the server closed the
//! connection before the end). Latency is the wall time of the `read` that
//! brought the message in minus its `ts_ns`; messages whose `ts_ns` is more
//! than an hour away from now (an unstamped replay) are counted as
//! `untimed` and not recorded.
//!
//! The run ends after `--duration` (counted from the moment every
//! connection's subscription is confirmed), on Ctrl-C, when every normal
//! connection has received a message on the `--until` channel (a sentinel
//! the publisher sends last: per connection, frames arrive in the order the
//! server appended them, so everything before it has been counted), or
//! when every connection has closed. Slow connections are then drained unthrottled for
//! up to two seconds, so a server that disconnected them (Redis does, past
//! its `client-output-buffer-limit pubsub`) is noticed even though the close
//! sat behind megabytes of unread data; those drained bytes are not counted
//! as messages.
//!
//! With `--sent FILE` (written by `replay --stamp --record-sent FILE`) it
//! also reports **freshness** per class: for every tick sent of a symbol a
//! connection follows, the time from its intended send time until that
//! connection first held that symbol at that tick or newer (see
//! [`super::freshness`]; ticks still unserved at the end count at the
//! end). With `--log-dir` too, it writes that per class per second of
//! intended send time into `freshness.hlog` (tags `freshness_normal`,
//! `freshness_slow`), which `tickfan report` leads the tick path with.
//! `--slow-rcvbuf` gives the slow connections a small kernel
//! receive buffer (`SO_RCVBUF`, set before connecting).
//!
//! [`LoadSpec::stall`] (the demo's `--stall-reader`) makes the first normal
//! connection stop reading for a while mid-run: a reader that stalls, so
//! the report shows what it costs (freshness) and what latency over
//! delivered messages hides.
//!
//! With `--token-file` (a secured engine, or a Redis with `requirepass`),
//! each connection first sends RESP `AUTH <token>` and reads its `+OK`
//! before it subscribes; an error reply (`-WRONGPASS …`) ends the run
//! (exit 1) with the server's line, and is never counted as data. So does
//! any error reply before a connection's subscriptions are all confirmed
//! (`-NOAUTH …` from a secured server when no token was given).

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use rustc_hash::FxHashMap;

use tickfan::auth::Token as AuthToken;
use tickfan::client::resp::command;
use tickfan::client::tls::{self, ClientStream};
use tickfan::feed::parse::ascii_u64;
use tickfan::metrics::hlog::HistogramLog;
use tickfan::sys::clock::wall_ns;

use super::auth;
use super::freshness::{self, SentSchedule};
use super::replay::leading_ts;
use tickfan::error::Failure;

/// Name of the interval log this tool writes in `--log-dir`.
pub const LOG_NAME: &str = "subscribers.hlog";

/// Flags of `tickfan subscribe`.
#[derive(Debug, Clone, Args)]
pub struct SubscribeArgs {
    /// Subscriber address of the server.
    #[arg(long, value_name = "ADDR", value_parser = tickfan::sys::net::parse_socket_addr, default_value = "127.0.0.1:9102")]
    pub to: SocketAddr,
    /// Normal subscriber connections.
    #[arg(short = 'k', long, value_name = "N", default_value_t = 10)]
    pub subscribers: usize,
    /// Slow subscriber connections.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub slow: usize,
    /// Read rate of each slow connection (a burst of at most 16 KiB: allowance unused beyond it is forfeited)
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024)]
    pub slow_bytes_per_sec: u64,
    /// PSUBSCRIBE to this pattern (repeatable; default `*` when no --channel is given).
    #[arg(long, value_name = "GLOB")]
    pub pattern: Vec<String>,
    /// SUBSCRIBE to these channels (repeatable or comma-separated).
    #[arg(long, value_name = "SYMBOL", value_delimiter = ',')]
    pub channel: Vec<String>,
    /// Stop this long after every subscription is confirmed (default: on Ctrl-C).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration)]
    pub duration: Option<Duration>,
    /// End once every normal connection has received a message on this channel (a sentinel sent last).
    #[arg(long, value_name = "SYMBOL")]
    pub until: Option<String>,
    /// Period of the interval line and of the histogram log.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s")]
    pub interval: Duration,
    /// Write latency histograms (HdrHistogram interval log `subscribers.hlog`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Also write the final report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// No interval lines.
    #[arg(long)]
    pub quiet: bool,
    /// File holding the server's token; each connection sends RESP `AUTH <token>` before subscribing.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// The replay's `--record-sent` file: report freshness per class (read once the run ends).
    #[arg(long, value_name = "PATH")]
    pub sent: Option<PathBuf>,
    /// Kernel receive buffer (SO_RCVBUF) of each slow connection in bytes (0 = OS default).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub slow_rcvbuf: usize,
    /// Connect with TLS, trusting the CA certificates in this PEM file (a server with --tls-cert).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Server address.
    pub to: SocketAddr,
    /// Normal connections.
    pub normal: usize,
    /// Slow connections.
    pub slow: usize,
    /// Read rate of a slow connection.
    pub slow_bytes_per_sec: u64,
    /// PSUBSCRIBE patterns.
    pub patterns: Vec<String>,
    /// SUBSCRIBE channels.
    pub channels: Vec<String>,
    /// Measurement length after all subscriptions are confirmed.
    pub duration: Option<Duration>,
    /// Sentinel channel: the run ends once every normal connection got it.
    pub until: Option<String>,
    /// Interval of lines and log entries.
    pub interval: Duration,
    /// Histogram log directory.
    pub log_dir: Option<PathBuf>,
    /// Print a line per interval (stderr).
    pub print_intervals: bool,
    /// Presented by every connection (RESP `AUTH`) before it subscribes.
    pub token: Option<AuthToken>,
    /// Sent schedule (`replay --record-sent`): compute freshness.
    pub sent: Option<PathBuf>,
    /// Receive entries kept per connection for freshness (at most
    /// [`freshness::MAX_HELD`]); past it a connection stops recording.
    pub held_max: usize,
    /// SO_RCVBUF of slow connections (0 = OS default).
    pub slow_rcvbuf: usize,
    /// The first normal connection stops reading for a while (a test and
    /// demo knob: a stalled reader).
    pub stall: Option<Stall>,
    /// Connect with TLS under this client configuration (`--tls-ca`).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

/// A reader that stops reading: from `after` past the moment every
/// subscription is confirmed, for `length`. Its data waits in its kernel
/// and in the server meanwhile (or, on a conflating server, is superseded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// From all-subscribed to the start of the stall.
    pub after: Duration,
    /// How long it reads nothing.
    pub length: Duration,
}

/// Live figures for a caller in the same process (the demo).
#[derive(Debug, Default)]
pub struct LoadProgress {
    /// Every connection's subscription is confirmed.
    pub ready: AtomicBool,
    /// Messages received so far, by class (normal, slow).
    pub messages: [AtomicU64; 2],
    /// Local addresses of the normal connections (set once, before
    /// `ready`): the server's per-subscriber figures name them as peers.
    pub normal_addrs: OnceLock<Vec<SocketAddr>>,
}

/// Latency percentiles, µs.
pub type Latency = tickfan::metrics::report::Percentiles;

/// One class of connections at the end of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClassReport {
    /// `normal` or `slow`.
    pub class: &'static str,
    /// Connections opened.
    pub connections: usize,
    /// Data messages received.
    pub messages: u64,
    /// Messages per second between the first and the last one received.
    pub delivered_per_s: f64,
    /// Bytes read (drain included).
    pub bytes: u64,
    /// Updates skipped according to the sequence numbers.
    pub gaps: u64,
    /// Messages whose sequence number was not above the previous one.
    pub repeats: u64,
    /// Connections the server closed before the end.
    pub disconnects: u64,
    /// Error replies received (and protocol errors, which close the connection).
    pub errors: u64,
    /// Messages not timed (ts_ns not within an hour of now).
    pub untimed: u64,
    /// End-to-end latency.
    pub latency: Latency,
    /// Freshness per sent tick (with `--sent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freshness: Option<Freshness>,
    /// Slow class: the most bytes any connection's own kernel held unread
    /// after a read, per second (empty for the normal class).
    pub reader_held_max_by_second: Vec<u64>,
}

/// Freshness of one class: every sent tick of a followed symbol, per connection.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Freshness {
    /// (connection, sent tick) pairs measured.
    pub ticks: u64,
    /// Of those, never held by the end (counted at the end).
    pub unserved_at_end: u64,
    /// Connections whose receive record reached its bound (they stopped
    /// recording; see `left_out`).
    pub truncated_connections: u64,
    /// (connection, sent tick) pairs not measured: sent before the end but
    /// not covered by a connection's record cut at its bound.
    pub left_out: u64,
    /// Percentiles, µs.
    pub freshness: Latency,
    /// The same per second of intended send time from the first tick sent
    /// (index = second): shows a start transient apart from the steady
    /// state.
    pub by_second: Vec<Latency>,
}

/// A whole run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// Seconds from all-subscribed to the end.
    pub measured_s: f64,
    /// Per class, normal first; a class with no connection is left out.
    pub classes: Vec<ClassReport>,
    /// The interval log written, if any.
    pub log: Option<PathBuf>,
    /// The freshness log written (with a sent schedule and a log dir).
    pub freshness_log: Option<PathBuf>,
}

impl LoadReport {
    /// The report of one class.
    pub fn class(&self, name: &str) -> Option<&ClassReport> {
        self.classes.iter().find(|c| c.class == name)
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "subscribers: end-to-end latency (receive − ts_ns), µs, over {:.1} s",
            self.measured_s
        )?;
        writeln!(
            f,
            "{:<7} {:>5} {:>11} {:>10} {:>9} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "class",
            "conns",
            "messages",
            "msg/s",
            "gaps",
            "disconn",
            "errors",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        )?;
        for c in &self.classes {
            let l = &c.latency;
            writeln!(
                f,
                "{:<7} {:>5} {:>11} {:>10.0} {:>9} {:>8} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                c.class,
                c.connections,
                c.messages,
                c.delivered_per_s,
                c.gaps,
                c.disconnects,
                c.errors,
                l.p50_us,
                l.p90_us,
                l.p99_us,
                l.p999_us,
                l.max_us
            )?;
            if let Some(fr) = &c.freshness {
                let p = &fr.freshness;
                writeln!(
                    f,
                    "        freshness (µs, {} ticks × connections, {} unserved at end): p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}",
                    fr.ticks, fr.unserved_at_end, p.p50_us, p.p99_us, p.p999_us, p.max_us
                )?;
                if fr.left_out > 0 {
                    writeln!(
                        f,
                        "        ({} ticks × connections left out: {} connections' records reached their bound)",
                        fr.left_out, fr.truncated_connections
                    )?;
                }
            }
            if c.untimed > 0 || c.repeats > 0 {
                writeln!(
                    f,
                    "        ({} untimed: ts_ns not recent; {} repeats)",
                    c.untimed, c.repeats
                )?;
            }
        }
        Ok(())
    }
}

/// Runs the subcommand.
pub fn run(args: &SubscribeArgs) -> Result<(), Failure> {
    let spec = LoadSpec {
        to: args.to,
        normal: args.subscribers,
        slow: args.slow,
        slow_bytes_per_sec: args.slow_bytes_per_sec,
        patterns: args.pattern.clone(),
        channels: args.channel.clone(),
        duration: args.duration,
        until: args.until.clone(),
        interval: args.interval,
        log_dir: args.log_dir.clone(),
        print_intervals: !args.quiet,
        token: auth::load(args.token_file.as_deref())?,
        sent: args.sent.clone(),
        held_max: freshness::MAX_HELD,
        slow_rcvbuf: args.slow_rcvbuf,
        stall: None,
        tls: args
            .tls_ca
            .as_deref()
            .map(|ca| tls::client_config(ca, None))
            .transpose()
            .map_err(|e| Failure::Usage(format!("--tls-ca: {e}")))?,
    };
    let stop = tickfan::sys::signals::stop_flag()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    let report = run_load(&spec, &stop, &LoadProgress::default())?;
    println!("{report}");
    for p in report.log.iter().chain(&report.freshness_log) {
        eprintln!("subscribe: histogram log {}", p.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, json)
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

const NORMAL: usize = 0;
const SLOW: usize = 1;
const CLASS_NAMES: [&str; 2] = ["normal", "slow"];
/// A frame larger than this is a protocol error (closes the connection).
const MAX_BUF: usize = 4 << 20;
/// What a slow connection may read before its rate applies (the confirmation).
const SLOW_ALLOWANCE: u64 = 4096;
/// A slow connection's unused allowance beyond this is forfeited (its read
/// buffer's size): a reader at R bytes/s never takes more than this over
/// R × t in any t, even after it had nothing to read (before the feed
/// started, or while its server held back). Without it a reader idle for
/// 2 s before the feed starts reads the first 128 KiB at once: not a reader
/// at R, and its kernel then auto-tunes its receive buffer upward.
const SLOW_BURST: u64 = 16 * 1024;
/// Latencies beyond this are not recorded (ts_ns is not a send time).
const UNTIMED_NS: u64 = 3_600_000_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds")
}

/// One connection. Owned by the event loop.
struct Conn {
    stream: ClientStream,
    class: usize,
    /// Received bytes; `buf[pos..len]` is not parsed yet.
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// Subscription confirmations still expected.
    confirmations_left: usize,
    /// The first error reply that came while confirmations were still
    /// expected (`-NOAUTH …`, `-ERR max …`): the run ends with it.
    refusal: Option<String>,
    /// There may be unread bytes (edge-triggered readiness not consumed).
    readable: bool,
    open: bool,
    read_total: u64,
    /// Slow: allowance forfeited (unused beyond [`SLOW_BURST`]).
    forfeited: u64,
    /// Last sequence number per symbol id; 0 = none seen.
    last_seq: Vec<u64>,
    /// A message on the `until` channel arrived.
    done: bool,
    opened: Instant,
    /// Record (stamp, receive ns) per symbol id, for freshness, up to
    /// `held_max` entries in all.
    record: bool,
    held: Vec<Vec<(u64, u64)>>,
    held_n: usize,
    held_max: usize,
}

/// Per-class counters. Owned by the event loop.
struct ClassStats {
    connections: usize,
    messages: u64,
    bytes: u64,
    gaps: u64,
    repeats: u64,
    disconnects: u64,
    errors: u64,
    untimed: u64,
    first_msg: Option<Instant>,
    last_msg: Option<Instant>,
    total: Histogram<u64>,
    interval: Histogram<u64>,
    interval_messages: u64,
    /// Slow class: the most bytes a connection's own kernel still held
    /// after one of its reads (`FIONREAD`), per second since its
    /// subscription was confirmed (bounded by the run).
    held_max_by_second: Vec<u64>,
}

impl ClassStats {
    fn new() -> Self {
        ClassStats {
            connections: 0,
            messages: 0,
            bytes: 0,
            gaps: 0,
            repeats: 0,
            disconnects: 0,
            errors: 0,
            untimed: 0,
            first_msg: None,
            last_msg: None,
            total: histogram(),
            interval: histogram(),
            held_max_by_second: Vec::new(),
            interval_messages: 0,
        }
    }
}

/// One parsed unit at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// Not a whole frame yet.
    Incomplete,
    /// A `message`/`pmessage`: channel and payload ranges, bytes used.
    Message {
        channel: (usize, usize),
        payload: (usize, usize),
        used: usize,
    },
    /// A subscription confirmation.
    Confirmation(usize),
    /// An error reply.
    ErrorReply(usize),
    /// Any other reply.
    Other(usize),
    /// Not RESP.
    Bad,
}

/// Finds `\r\n` at or after `from`; returns the index of `\r`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memchr(b'\n', buf.get(from..)?)
        .map(|i| from + i)
        .filter(|&i| i > from && buf[i - 1] == b'\r')
        .map(|i| i - 1)
}

fn parse_int(b: &[u8]) -> Option<i64> {
    match b.split_first() {
        Some((b'-', digits)) => i64::try_from(ascii_u64(digits)?).ok().map(|v| -v),
        _ => i64::try_from(ascii_u64(b)?).ok(),
    }
}

/// Scans one RESP2 reply frame at the front of `buf` without allocating.
/// Not `client::resp::read_frame`: that one blocks on a reader and
/// allocates each frame; this load tool's loop reads a non-blocking buffer
/// and allocates nothing per message.
/// Pub/sub frames are arrays of bulk strings and integers; nested arrays
/// are not expected and are reported as [`Scan::Bad`].
fn scan(buf: &[u8]) -> Scan {
    let Some(&kind) = buf.first() else {
        return Scan::Incomplete;
    };
    let Some(end) = line_end(buf, 1) else {
        return if buf.len() > 64 * 1024 {
            Scan::Bad
        } else {
            Scan::Incomplete
        };
    };
    match kind {
        b'+' | b':' => return Scan::Other(end + 2),
        b'-' => return Scan::ErrorReply(end + 2),
        b'*' => {}
        _ => return Scan::Bad,
    }
    let Some(n) = parse_int(&buf[1..end]) else {
        return Scan::Bad;
    };
    let mut at = end + 2;
    let mut items: [(usize, usize); 4] = [(0, 0); 4];
    for i in 0..n.max(0) as usize {
        let Some(&k) = buf.get(at) else {
            return Scan::Incomplete;
        };
        let Some(e) = line_end(buf, at + 1) else {
            return Scan::Incomplete;
        };
        match k {
            b'$' => {
                let Some(len) = parse_int(&buf[at + 1..e]) else {
                    return Scan::Bad;
                };
                let start = e + 2;
                if len < 0 {
                    at = start;
                    continue;
                }
                let stop = start + len as usize;
                if buf.len() < stop + 2 {
                    return Scan::Incomplete;
                }
                if let Some(slot) = items.get_mut(i) {
                    *slot = (start, stop);
                }
                at = stop + 2;
            }
            b':' | b'+' => at = e + 2,
            _ => return Scan::Bad,
        }
    }
    let item = |i: usize| &buf[items[i].0..items[i].1];
    match (n, item(0)) {
        (3, b"message") => Scan::Message {
            channel: items[1],
            payload: items[2],
            used: at,
        },
        (4, b"pmessage") => Scan::Message {
            channel: items[2],
            payload: items[3],
            used: at,
        },
        (3, b"subscribe" | b"psubscribe") => Scan::Confirmation(at),
        _ => Scan::Other(at),
    }
}

/// Field `i` (0-based) of a CSV payload as an integer.
fn field_u64(payload: &[u8], i: usize) -> Option<u64> {
    let f = payload.split(|&b| b == b',').nth(i)?;
    ascii_u64(f)
}

/// The event loop's state.
struct Load {
    conns: Vec<Conn>,
    classes: [ClassStats; 2],
    symbols: FxHashMap<Vec<u8>, u32>,
    measuring: bool,
    until: Option<Vec<u8>>,
    ivl: Intervals,
}

/// The tool's report intervals: `[k·I, (k+1)·I)` since `epoch` (the log's
/// start). A message belongs to the interval holding its receive time: the
/// interval is switched before a read's messages are counted, so a late
/// loop turn never files them in the previous interval.
struct Intervals {
    epoch: Instant,
    length: Duration,
    /// Start of the open interval.
    from: Instant,
    /// Its end: `from + length`.
    next: Instant,
    log: Option<HistogramLog>,
    /// Print a line per interval, timed from this instant (subscriptions ready).
    print_since: Option<Instant>,
}

impl Intervals {
    /// Closes the open interval (full) and opens the one holding `now`.
    fn roll(&mut self, classes: &mut [ClassStats; 2], now: Instant) {
        let (from, end) = (self.from, self.next);
        write_interval(classes, self, from, end);
        let k = now.duration_since(self.epoch).as_nanos() / self.length.as_nanos().max(1);
        self.from = self.epoch + self.length * k as u32;
        self.next = self.from + self.length;
    }
}

impl Load {
    /// Reads what connection `i` may read now and handles every whole frame.
    fn read(&mut self, i: usize, rate: u64, now: Instant, counting: bool) {
        let c = &mut self.conns[i];
        if !c.open {
            return;
        }
        loop {
            if c.pos == c.len {
                c.pos = 0;
                c.len = 0;
            }
            if c.len == c.buf.len() {
                if c.pos > 0 {
                    c.buf.copy_within(c.pos..c.len, 0);
                    c.len -= c.pos;
                    c.pos = 0;
                } else if c.buf.len() < MAX_BUF {
                    let n = c.buf.len() * 2;
                    c.buf.resize(n, 0);
                } else {
                    self.classes[c.class].errors += 1;
                    c.open = false;
                    return;
                }
            }
            let mut want = c.buf.len() - c.len;
            if c.class == SLOW && counting {
                let earned = SLOW_ALLOWANCE
                    + (now.duration_since(c.opened).as_secs_f64() * rate as f64) as u64;
                c.forfeited = c
                    .forfeited
                    .max(earned.saturating_sub(c.read_total + SLOW_BURST));
                let allowed = earned - c.forfeited;
                want = want.min(allowed.saturating_sub(c.read_total) as usize);
                if want == 0 {
                    return; // stays readable; retried when the budget refills
                }
            }
            match c.stream.read(&mut c.buf[c.len..c.len + want]) {
                Ok(0) => {
                    c.open = false;
                    c.readable = false;
                    if c.confirmations_left == 0 || self.measuring {
                        self.classes[c.class].disconnects += 1;
                    }
                    return;
                }
                Ok(n) => {
                    c.len += n;
                    c.read_total += n as u64;
                    self.classes[c.class].bytes += n as u64;
                    if c.class == SLOW && counting {
                        let held = tickfan::sys::tcp_signals::receive_queue_bytes(c.stream.tcp())
                            .unwrap_or(0) as u64;
                        let s = now.duration_since(c.opened).as_secs() as usize;
                        let v = &mut self.classes[SLOW].held_max_by_second;
                        if s >= v.len() {
                            v.resize(s + 1, 0);
                        }
                        v[s] = v[s].max(held);
                    }
                    // One clock read per `read`: its frames arrived together.
                    let recv = (wall_ns(), Instant::now());
                    if recv.1 >= self.ivl.next {
                        self.ivl.roll(&mut self.classes, recv.1);
                    }
                    let class = c.class;
                    Self::frames(
                        c,
                        &mut self.classes[class],
                        &mut self.symbols,
                        self.until.as_deref(),
                        recv,
                        counting,
                    );
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    c.readable = false;
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    c.open = false;
                    c.readable = false;
                    self.classes[c.class].disconnects += 1;
                    return;
                }
            }
        }
    }

    /// Handles every whole frame in `c.buf[pos..len]`.
    fn frames(
        c: &mut Conn,
        st: &mut ClassStats,
        symbols: &mut FxHashMap<Vec<u8>, u32>,
        until: Option<&[u8]>,
        (recv_ns, recv_at): (u64, Instant),
        counting: bool,
    ) {
        loop {
            let buf = &c.buf[c.pos..c.len];
            match scan(buf) {
                Scan::Incomplete => return,
                Scan::Bad => {
                    st.errors += 1;
                    c.open = false;
                    return;
                }
                Scan::Confirmation(used) => {
                    c.confirmations_left = c.confirmations_left.saturating_sub(1);
                    c.pos += used;
                }
                Scan::ErrorReply(used) => {
                    if c.confirmations_left > 0 && c.refusal.is_none() {
                        // Not subscribed: nothing this run measures would be real.
                        let text = &buf[1..used - 2];
                        c.refusal = Some(String::from_utf8_lossy(text).into_owned());
                    }
                    st.errors += 1;
                    c.pos += used;
                }
                Scan::Other(used) => c.pos += used,
                Scan::Message {
                    channel,
                    payload,
                    used,
                } => {
                    if counting {
                        st.first_msg.get_or_insert(recv_at);
                        st.last_msg = Some(recv_at);
                        st.messages += 1;
                        st.interval_messages += 1;
                        let payload = &buf[payload.0..payload.1];
                        match leading_ts(payload) {
                            Some(ts) if recv_ns.abs_diff(ts) < UNTIMED_NS => {
                                let lat = recv_ns.saturating_sub(ts).max(1);
                                st.interval.saturating_record(lat);
                            }
                            _ => st.untimed += 1,
                        }
                        let ch = &buf[channel.0..channel.1];
                        if until == Some(ch) {
                            c.done = true;
                        }
                        if let Some(seq) = field_u64(payload, 6) {
                            let id = match symbols.get(ch) {
                                Some(&id) => id,
                                None => {
                                    let id = symbols.len() as u32;
                                    symbols.insert(ch.to_vec(), id);
                                    id
                                }
                            } as usize;
                            if c.last_seq.len() <= id {
                                c.last_seq.resize(id + 1, 0);
                            }
                            let last = c.last_seq[id];
                            if last != 0 {
                                if seq > last + 1 {
                                    st.gaps += seq - last - 1;
                                } else if seq <= last {
                                    st.repeats += 1;
                                }
                            }
                            c.last_seq[id] = last.max(seq);
                            if c.record && c.held_n < c.held_max {
                                if c.held.len() <= id {
                                    c.held.resize_with(id + 1, Vec::new);
                                }
                                if let Some(ts) = leading_ts(payload) {
                                    c.held[id].push((ts, recv_ns));
                                    c.held_n += 1;
                                }
                            }
                        }
                    }
                    c.pos += used;
                }
            }
        }
    }
}

/// Opens the connections (each authenticated first when `spec.token` is
/// set) and runs the event loop until the end (see the module docs).
/// `stop` ends it early; `progress` is updated live.
///
/// # Errors
/// A connection that cannot be opened, a token the server refused, or a
/// log that cannot be written.
pub fn run_load(
    spec: &LoadSpec,
    stop: &AtomicBool,
    progress: &LoadProgress,
) -> Result<LoadReport, Failure> {
    let patterns: Vec<String> = if spec.patterns.is_empty() && spec.channels.is_empty() {
        vec!["*".into()]
    } else {
        spec.patterns.clone()
    };
    if spec.normal + spec.slow == 0 {
        return Err(Failure::Usage("no connections: -k and --slow are 0".into()));
    }
    if spec.interval < Duration::from_millis(10) {
        return Err(Failure::Usage("--interval must be at least 10ms".into()));
    }
    let mut cmds = Vec::new();
    if !patterns.is_empty() {
        let mut a: Vec<&[u8]> = vec![b"PSUBSCRIBE"];
        a.extend(patterns.iter().map(|p| p.as_bytes()));
        cmds.extend_from_slice(&command(&a));
    }
    if !spec.channels.is_empty() {
        let mut a: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        a.extend(spec.channels.iter().map(|p| p.as_bytes()));
        cmds.extend_from_slice(&command(&a));
    }
    let expected = patterns.len() + spec.channels.len();

    let mut poll = Poll::new().map_err(|e| Failure::Runtime(format!("poller: {e}")))?;
    let mut load = Load {
        conns: Vec::new(),
        classes: [ClassStats::new(), ClassStats::new()],
        symbols: FxHashMap::default(),
        measuring: false,
        until: spec.until.as_ref().map(|u| u.as_bytes().to_vec()),
        ivl: Intervals {
            epoch: Instant::now(),
            length: spec.interval,
            from: Instant::now(),
            next: Instant::now(),
            log: None,
            print_since: None,
        },
    };
    for i in 0..spec.normal + spec.slow {
        let class = if i < spec.normal { NORMAL } else { SLOW };
        let rcvbuf = if class == SLOW { spec.slow_rcvbuf } else { 0 };
        let mut s = connect(spec.to, rcvbuf)
            .map_err(|e| Failure::Runtime(format!("cannot connect to {}: {e}", spec.to)))?;
        let _ = s.set_nodelay(true);
        let mut stream = match &spec.tls {
            None => {
                if let Some(t) = &spec.token {
                    // Blocking, before SUBSCRIBE: the `+OK` is read here, so the
                    // event loop never sees it.
                    auth::resp_handshake(&s, t, "subscriber port")?;
                }
                s.write_all(&cmds)
                    .map_err(|e| Failure::Runtime(format!("cannot subscribe: {e}")))?;
                s.set_nonblocking(true)
                    .map_err(|e| Failure::Runtime(format!("socket: {e}")))?;
                ClientStream::Plain(mio::net::TcpStream::from_std(s))
            }
            Some(config) => {
                // The handshake, `AUTH` and the subscriptions, blocking.
                let token = spec.token.as_ref();
                let name = tls::server_name(spec.to);
                let (stream, auth) =
                    ClientStream::connect_blocking(s, config.clone(), name, |raw, io| {
                        let auth = token
                            .map(|t| auth::resp_handshake_on(raw, io, t, "subscriber port"))
                            .transpose();
                        io.write_all(&cmds)?;
                        Ok(auth)
                    })
                    .map_err(|e| Failure::Runtime(format!("TLS to {} failed: {e}", spec.to)))?;
                auth?;
                stream
            }
        };
        poll.registry()
            .register(stream.tcp_mut(), Token(i), Interest::READABLE)
            .map_err(|e| Failure::Runtime(format!("poller: {e}")))?;
        load.classes[class].connections += 1;
        load.conns.push(Conn {
            stream,
            class,
            buf: vec![0; if class == SLOW { 16 * 1024 } else { 256 * 1024 }],
            pos: 0,
            len: 0,
            confirmations_left: expected,
            refusal: None,
            readable: true,
            open: true,
            read_total: 0,
            last_seq: Vec::new(),
            done: false,
            opened: Instant::now(),
            forfeited: 0,
            record: spec.sent.is_some(),
            held: Vec::new(),
            held_n: 0,
            held_max: spec.held_max.min(freshness::MAX_HELD),
        });
    }
    let normal_addrs = load
        .conns
        .iter()
        .filter(|c| c.class == NORMAL)
        .filter_map(|c| c.stream.tcp().local_addr().ok())
        .collect();
    let _ = progress.normal_addrs.set(normal_addrs);
    let log = match &spec.log_dir {
        Some(dir) => Some(
            HistogramLog::create(
                dir,
                LOG_NAME,
                SystemTime::now(),
                "tickfan subscribe: end-to-end latency (receive - ts_ns) per class",
            )
            .map_err(|e| Failure::Runtime(e.to_string()))?,
        ),
        None => None,
    };
    let log_start = Instant::now();
    load.ivl = Intervals {
        epoch: log_start,
        length: spec.interval,
        from: log_start,
        next: log_start + spec.interval,
        log,
        print_since: None,
    };
    let mut events = Events::with_capacity(256);
    let mut ready_at: Option<Instant> = None;
    let rate = spec.slow_bytes_per_sec.max(1);
    let setup_deadline = Instant::now() + Duration::from_secs(30);
    let end_wall;

    loop {
        let now = Instant::now();
        // A stalled reader (see below) is readable but skipped: wake often
        // enough to notice its stall's end.
        let throttled = load
            .conns
            .iter()
            .any(|c| c.open && c.readable && (c.class == SLOW || spec.stall.is_some()));
        let mut timeout = load.ivl.next.saturating_duration_since(now);
        if throttled {
            timeout = timeout.min(Duration::from_millis(5));
        }
        if let (Some(r), Some(d)) = (ready_at, spec.duration) {
            timeout = timeout.min((r + d).saturating_duration_since(now));
        }
        timeout = timeout.min(Duration::from_millis(100)); // notice `stop`
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::Runtime(format!("poll: {e}"))),
        }
        for ev in events.iter() {
            if let Some(c) = load.conns.get_mut(ev.token().0) {
                c.readable = true;
            }
        }
        let now = Instant::now();
        // The stalled reader (connection 0, normal) skips its turns; its
        // readiness stays set, so it reads again once the stall is over.
        let stalled = match (spec.stall, ready_at) {
            (Some(s), Some(r)) if spec.normal > 0 => {
                now >= r + s.after && now < r + s.after + s.length
            }
            _ => false,
        };
        for i in 0..load.conns.len() {
            if load.conns[i].readable && !(stalled && i == 0) {
                load.read(i, rate, now, true);
            }
        }
        let progress_msgs = [load.classes[NORMAL].messages, load.classes[SLOW].messages];
        for (k, n) in progress_msgs.iter().enumerate() {
            progress.messages[k].store(*n, Ordering::Relaxed);
        }
        if ready_at.is_none() {
            if let Some(r) = load.conns.iter().find_map(|c| c.refusal.as_deref()) {
                let hint = if r.starts_with("NOAUTH") && spec.token.is_none() {
                    " (the server requires a token: --token-file)"
                } else {
                    ""
                };
                return Err(Failure::Runtime(format!(
                    "subscriber port {}: {r}{hint}",
                    spec.to
                )));
            }
            if load
                .conns
                .iter()
                .all(|c| c.confirmations_left == 0 || !c.open)
            {
                ready_at = Some(now);
                load.ivl.print_since = spec.print_intervals.then_some(now);
                load.measuring = true;
                progress.ready.store(true, Ordering::Release);
                eprintln!(
                    "subscribe: {} connections ({} normal, {} slow) subscribed to {}",
                    load.conns.len(),
                    spec.normal,
                    spec.slow,
                    patterns
                        .iter()
                        .chain(spec.channels.iter())
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            } else if now > setup_deadline {
                return Err(Failure::Runtime(format!(
                    "subscriptions to {} not confirmed within 30 s",
                    spec.to
                )));
            }
        }
        if now >= load.ivl.next {
            load.ivl.roll(&mut load.classes, now);
        }
        let over = stop.load(Ordering::Relaxed)
            || ready_at.is_some_and(|r| spec.duration.is_some_and(|d| now >= r + d))
            || load.conns.iter().all(|c| !c.open)
            || (load.until.is_some()
                && load.classes[NORMAL].connections > 0
                && load
                    .conns
                    .iter()
                    .all(|c| c.done || !c.open || c.class == SLOW));
        if over {
            end_wall = wall_ns();
            // The last interval, partial: it ends now.
            load.ivl.print_since = None;
            let from = load.ivl.from;
            write_interval(&mut load.classes, &mut load.ivl, from, now.max(from));
            break;
        }
    }
    let measured = ready_at.map(|r| r.elapsed()).unwrap_or_default();
    drain_slow(&mut load, &mut poll, &mut events);
    let mut freshness_log = None;
    let mut fresh = match &spec.sent {
        Some(p) => {
            let sent = SentSchedule::load(p)?;
            let (fresh, seconds) = freshness_of(&load, &sent, &patterns, &spec.channels, end_wall);
            if let (Some(dir), true) = (&spec.log_dir, sent.ticks > 0) {
                let classes: Vec<freshness::ClassSeconds<'_>> = (0..2)
                    .filter(|&k| load.classes[k].connections > 0)
                    .map(|k| freshness::ClassSeconds {
                        class: CLASS_NAMES[k],
                        seconds: &seconds[k],
                    })
                    .collect();
                freshness_log = Some(freshness::write_log(
                    dir,
                    sent.first_ns,
                    sent.last_ns,
                    &classes,
                )?);
            }
            Some(fresh)
        }
        None => None,
    };
    let classes = (0..2)
        .filter(|&k| load.classes[k].connections > 0)
        .map(|k| {
            let st = &load.classes[k];
            let active = match (st.first_msg, st.last_msg) {
                (Some(a), Some(b)) if b > a => b.duration_since(a).as_secs_f64(),
                _ => 0.0,
            };
            ClassReport {
                class: CLASS_NAMES[k],
                connections: st.connections,
                messages: st.messages,
                delivered_per_s: if active > 0.0 {
                    st.messages as f64 / active
                } else {
                    0.0
                },
                bytes: st.bytes,
                gaps: st.gaps,
                repeats: st.repeats,
                disconnects: st.disconnects,
                errors: st.errors,
                untimed: st.untimed,
                latency: Latency::of(&st.total),
                freshness: fresh.as_mut().map(|f| f[k].take().expect("one per class")),
                reader_held_max_by_second: st.held_max_by_second.clone(),
            }
        })
        .collect();
    Ok(LoadReport {
        measured_s: measured.as_secs_f64(),
        classes,
        log: load.ivl.log.as_ref().map(|l| l.path().to_path_buf()),
        freshness_log,
    })
}

/// Connects to `to`, with SO_RCVBUF `rcvbuf` set before the handshake
/// (so the window is scaled for it) when not 0.
fn connect(to: SocketAddr, rcvbuf: usize) -> std::io::Result<std::net::TcpStream> {
    if rcvbuf == 0 {
        return std::net::TcpStream::connect(to);
    }
    let s = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    s.set_recv_buffer_size(rcvbuf)?;
    s.connect(&to.into())?;
    Ok(s.into())
}

/// Per class (normal, slow): histograms of freshness per second of
/// intended send time since the first tick sent.
type Seconds = [Vec<Histogram<u64>>; 2];

/// Freshness per class (normal, slow) from what each connection held and
/// the sent schedule, for the symbols each follows; the run ended at
/// `end_ns` (wall). Also the per-second histograms, for the log.
fn freshness_of(
    load: &Load,
    sent: &SentSchedule,
    patterns: &[String],
    channels: &[String],
    end_ns: u64,
) -> ([Option<Freshness>; 2], Seconds) {
    let follows = |sym: &[u8]| {
        channels.iter().any(|c| c.as_bytes() == sym)
            || patterns
                .iter()
                .any(|p| tickfan::protocol::glob::glob_match(p.as_bytes(), sym))
    };
    let mut out: [Option<Freshness>; 2] = [None, None];
    let mut seconds: Seconds = [Vec::new(), Vec::new()];
    for (k, slot) in out.iter_mut().enumerate() {
        let mut h = histogram();
        // Bounded by the run: one histogram per second sent.
        let per_s = &mut seconds[k];
        let (mut ticks, mut unserved, mut truncated, mut left_out) = (0, 0, 0, 0);
        for c in load.conns.iter().filter(|c| c.class == k) {
            let complete = c.held_n < c.held_max;
            if !complete {
                truncated += 1;
            }
            for (sym, stamps) in sent.by_symbol.iter().filter(|(s, _)| follows(s)) {
                let held = load
                    .symbols
                    .get(sym)
                    .and_then(|&id| c.held.get(id as usize))
                    .map_or(&[][..], |v| &v[..]);
                let n = freshness::record_symbol(stamps, held, end_ns, complete, |t, f| {
                    h.saturating_record(f);
                    let s = (t.saturating_sub(sent.first_ns) / 1_000_000_000) as usize;
                    if s >= per_s.len() {
                        per_s.resize_with(s + 1, histogram);
                    }
                    per_s[s].saturating_record(f);
                });
                ticks += n.ticks;
                unserved += n.unserved;
                left_out += n.left_out;
            }
        }
        *slot = Some(Freshness {
            ticks,
            unserved_at_end: unserved,
            truncated_connections: truncated,
            left_out,
            freshness: Latency::of(&h),
            by_second: per_s.iter().map(Latency::of).collect(),
        });
    }
    (out, seconds)
}

/// Merges each class's interval histogram into its total, appends the
/// interval `[from, end)` to the log and prints a line.
fn write_interval(classes: &mut [ClassStats; 2], ivl: &mut Intervals, from: Instant, end: Instant) {
    let secs = end.duration_since(from).as_secs_f64().max(1e-9);
    let mut line = String::new();
    for (k, name) in CLASS_NAMES.iter().enumerate() {
        let st = &mut classes[k];
        if st.connections == 0 {
            continue;
        }
        if let Some(l) = ivl.log.as_mut() {
            let tag = format!("e2e_{name}");
            let r = l.append(
                &tag,
                from.duration_since(ivl.epoch),
                end - from,
                &st.interval,
            );
            if let Err(e) = r {
                log::warn!("{e}; subscribe stops writing its histogram log");
                ivl.log = None;
            }
        }
        let lat = Latency::of(&st.interval);
        line.push_str(&format!(
            " {} {:>8.0} msg/s p99 {:>8.1}µs max {:>8.1}µs |",
            name,
            st.interval_messages as f64 / secs,
            lat.p99_us,
            lat.max_us
        ));
        let _ = st.total.add(&st.interval);
        st.interval.reset();
        st.interval_messages = 0;
    }
    if let Some(l) = ivl.log.as_mut() {
        if let Err(e) = l.flush() {
            log::warn!("{e}; subscribe stops writing its histogram log");
            ivl.log = None;
        }
    }
    if let Some(since) = ivl.print_since {
        let c = &*classes;
        eprintln!(
            "[{:>6.1}s]{} gaps {} disconnects {}",
            end.saturating_duration_since(since).as_secs_f64(),
            line,
            c[NORMAL].gaps + c[SLOW].gaps,
            c[NORMAL].disconnects + c[SLOW].disconnects
        );
    }
}

/// Reads the slow connections unthrottled (≤ 2 s, until each would block)
/// to notice a close that waited behind unread data. Nothing read here is
/// counted as a message.
fn drain_slow(load: &mut Load, poll: &mut Poll, events: &mut Events) {
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let pending: Vec<usize> = (0..load.conns.len())
            .filter(|&i| load.conns[i].class == SLOW && load.conns[i].open)
            .collect();
        if pending.is_empty() || Instant::now() >= end {
            return;
        }
        let mut progressed = false;
        for i in pending {
            let before = load.conns[i].read_total;
            load.conns[i].readable = true;
            load.read(i, u64::MAX, Instant::now(), false);
            progressed |= load.conns[i].read_total > before || !load.conns[i].open;
        }
        if !progressed {
            // Everything read: one more short wait for a late close.
            let _ = poll.poll(events, Some(Duration::from_millis(50)));
            if events.is_empty() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp_integers_and_payload_fields_parse_without_str() {
        assert_eq!(parse_int(b"-1"), Some(-1));
        assert_eq!(parse_int(b"42"), Some(42));
        assert_eq!(parse_int(b"9223372036854775808"), None, "past i64");
        assert_eq!(parse_int(b"-"), None);
        assert_eq!(parse_int(b""), None);
        assert_eq!(parse_int(b"1x"), None);
        assert_eq!(field_u64(b"1,EURUSD,1.1,1.2,1,1,77,9", 6), Some(77));
        assert_eq!(field_u64(b"1,EURUSD,1.1,1.2,1,1,,9", 6), None);
        assert_eq!(field_u64(b"1,EURUSD", 6), None);
    }

    #[test]
    fn scans_messages_confirmations_and_partial_frames() {
        let pm = b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$6\r\nEURUSD\r\n$5\r\n1,2,3\r\n";
        match scan(pm) {
            Scan::Message {
                channel,
                payload,
                used,
            } => {
                assert_eq!(&pm[channel.0..channel.1], b"EURUSD");
                assert_eq!(&pm[payload.0..payload.1], b"1,2,3");
                assert_eq!(used, pm.len());
            }
            other => panic!("{other:?}"),
        }
        for cut in 0..pm.len() {
            assert_eq!(scan(&pm[..cut]), Scan::Incomplete, "cut at {cut}");
        }
        let conf = b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n";
        assert_eq!(scan(conf), Scan::Confirmation(conf.len()));
        assert_eq!(scan(b"-ERR max\r\n"), Scan::ErrorReply(10));
        assert_eq!(scan(b"+PONG\r\n"), Scan::Other(7));
        assert_eq!(scan(b"hello\r\n"), Scan::Bad);
        let m = b"*3\r\n$7\r\nmessage\r\n$1\r\nA\r\n$3\r\nx,y\r\n";
        assert!(matches!(scan(m), Scan::Message { .. }));
    }

    #[test]
    fn payload_fields() {
        let p = b"17,EURUSD,1.1,1.2,100,200,42,99";
        assert_eq!(field_u64(p, 0), Some(17));
        assert_eq!(field_u64(p, 6), Some(42));
        assert_eq!(field_u64(p, 2), None);
        assert_eq!(field_u64(p, 9), None);
    }
}
