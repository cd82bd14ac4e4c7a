//! `tickfan replay FILE --to ADDR`: sends a tick file to a feed port (or,
//! for the benchmark, to a Redis server or the raw forwarder).
//!
//! - **Every line, once per loop, in order.** Lines go out exactly as they
//!   are in the file (a malformed line is sent as is: the engine
//!   dead-letters it), each ending with `\n`.
//! - **Pacing is open-loop.** Each line has an intended send time fixed in
//!   advance by the [`Schedule`] (fixed rate, or the file's recorded `ts_ns`
//!   gaps divided by a speed factor). The sender never sends a line before
//!   its time; when it falls behind it sends at once and does *not* move the
//!   schedule, so the lag shows up as latency (no coordinated omission).
//! - **`--stamp`** rewrites `ts_ns` to the line's intended send time (wall
//!   clock, ns), so subscribers measure end to end from when the tick was
//!   meant to leave. A line whose first field is not a number is not stamped.
//! - **Formats**: `csv` (the feed), `redis-publish` (`PUBLISH symbol payload`
//!   as RESP, pipelined; replies are drained by a second thread), `pmessage`
//!   (ready-made `pmessage` frames for the raw forwarder). In the two RESP
//!   formats the payload is the line plus `,seq,send_ns` (seq = that
//!   symbol's count so far), the same shape as tickfan's payload, and lines
//!   that are not ticks (header, comments, fewer than six fields) are skipped.
//! - **`--record-sent FILE`** (with `--stamp`): one line per tick sent,
//!   `intended_ns,symbol`, for `subscribe --sent` to compute freshness
//!   ([`super::freshness`]); bounded by the run (~25 bytes a tick).
//! - **`--token-file`** (a secured engine): the connection opens with
//!   `AUTH <token>` and waits for `OK` before the first line (`csv`), or with
//!   RESP `AUTH <token>` and waits for `+OK` (`redis-publish`, a Redis with
//!   `requirepass`). A refusal ends the run (exit 1) with the server's line.
//!   `pmessage` goes to the raw forwarder, which has no authentication: the
//!   flag is refused there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rustc_hash::FxHashMap;

use tickfan::auth::Token;
use tickfan::metrics::hlog::HistogramLog;
use tickfan::sys::clock::wall_ns;

use super::auth;
use tickfan::error::Failure;

/// Flags of `tickfan replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The tick file (CSV, one tick per line).
    pub file: PathBuf,
    /// Where to send: the engine's feed port (or Redis / the forwarder, see --format).
    #[arg(long, value_name = "ADDR", value_parser = tickfan::sys::net::parse_socket_addr, default_value = "127.0.0.1:9101")]
    pub to: SocketAddr,
    /// Fixed rate in lines per second (0 = as fast as possible).
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 0.0,
        conflicts_with = "speed"
    )]
    pub rate: f64,
    /// Recorded pacing: the file's ts_ns gaps divided by this factor (2 = twice as fast).
    #[arg(long, value_name = "FACTOR")]
    pub speed: Option<f64>,
    /// Times to send the whole file.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub loops: u64,
    /// Stop after this long even if loops remain (e.g. `10s`).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration)]
    pub duration: Option<Duration>,
    /// Rewrite ts_ns to each line's intended send time (wall clock ns).
    #[arg(long)]
    pub stamp: bool,
    /// What to send each line as.
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
    /// Write the send-lag histogram (HdrHistogram interval log `replay.hlog`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// File holding the engine's token, presented first (`AUTH <token>`; RESP `AUTH` with --format redis-publish).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Write `intended_ns,symbol` per tick sent to this file (needs --stamp), for `subscribe --sent`.
    #[arg(long, value_name = "PATH", requires = "stamp")]
    pub record_sent: Option<PathBuf>,
}

/// What each line is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The line itself (tickfan's feed).
    Csv,
    /// `PUBLISH symbol payload` as a RESP command, pipelined (a Redis server).
    RedisPublish,
    /// A ready-made `pmessage` frame for pattern `*` (the raw forwarder).
    Pmessage,
}

/// When lines are meant to be sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// As fast as possible: every line is due at once.
    Unpaced,
    /// Line `k` (counting every line of every loop) is due at `k / rate` s.
    Rate(f64),
    /// Each line is due at its `ts_ns` gap from the file's first tick
    /// divided by the factor; each loop starts one mean gap after the
    /// previous one ended.
    Recorded(f64),
}

/// The intended send offsets of a stream of lines: a pure function of the
/// lines and the pace, so tests check the schedule without a clock.
///
/// Invariant: offsets never decrease (a line with a smaller or unreadable
/// `ts_ns` is due with the line before it).
#[derive(Debug, Clone)]
pub struct Schedule {
    pace: Pace,
    /// Lines scheduled so far (all loops).
    lines: u64,
    /// Offset (ns) of the current loop's start.
    loop_base: u64,
    /// First `ts_ns` of the current loop.
    first_ts: Option<u64>,
    /// Largest offset given so far.
    last: u64,
    /// Ticks with a `ts_ns` in the current loop.
    ticks_in_loop: u64,
}

impl Schedule {
    /// A schedule for `pace`.
    pub fn new(pace: Pace) -> Schedule {
        Schedule {
            pace,
            lines: 0,
            loop_base: 0,
            first_ts: None,
            last: 0,
            ticks_in_loop: 0,
        }
    }

    /// The intended offset (ns from the start) of the next line, `None`
    /// when unpaced.
    pub fn next(&mut self, line: &[u8]) -> Option<u64> {
        let k = self.lines;
        self.lines += 1;
        let off = match self.pace {
            Pace::Unpaced => return None,
            Pace::Rate(r) => (k as f64 * 1e9 / r) as u64,
            Pace::Recorded(speed) => match leading_ts(line) {
                Some(ts) => {
                    self.ticks_in_loop += 1;
                    let first = *self.first_ts.get_or_insert(ts);
                    self.loop_base + (ts.saturating_sub(first) as f64 / speed) as u64
                }
                None => self.last,
            },
        };
        self.last = self.last.max(off);
        Some(self.last)
    }

    /// Marks the end of one pass over the file.
    pub fn end_loop(&mut self) {
        if let Pace::Recorded(_) = self.pace {
            let span = self.last.saturating_sub(self.loop_base);
            let gap = span / self.ticks_in_loop.saturating_sub(1).max(1);
            self.loop_base = self.last + gap.max(1);
            self.last = self.loop_base;
            self.first_ts = None;
            self.ticks_in_loop = 0;
        }
    }
}

/// The line's first field as a `ts_ns`, if it is an integer.
pub fn leading_ts(line: &[u8]) -> Option<u64> {
    let end = memchr::memchr(b',', line)?;
    tickfan::feed::parse::ascii_u64(&line[..end])
}

/// Appends `ts_ns,symbol` of a stamped tick `line` to the sent record
/// (nothing for a line that is not a tick). Returns whether it wrote.
fn record_sent(w: &mut impl Write, line: &[u8]) -> std::io::Result<bool> {
    let mut fields = line.splitn(3, |&b| b == b',');
    if let (Some(ts), Some(sym), Some(_)) = (fields.next(), fields.next(), fields.next()) {
        if tickfan::feed::parse::ascii_u64(ts).is_some() && !sym.is_empty() {
            w.write_all(ts)?;
            w.write_all(b",")?;
            w.write_all(sym)?;
            w.write_all(b"\n")?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// Unpaced lines stamped with one clock read (~10 µs of lines at full speed).
const UNPACED_CLOCK_BATCH: u32 = 64;

/// What a replay sent.
#[derive(Debug, Clone, Default)]
pub struct ReplaySummary {
    /// Lines sent (all loops).
    pub lines: u64,
    /// Lines not sent because they are not ticks (RESP formats only).
    pub skipped: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Wall time taken.
    pub elapsed: Duration,
    /// Largest lag behind the schedule.
    pub max_behind: Duration,
    /// Lag behind the schedule at the 99th percentile.
    pub p99_behind: Duration,
    /// Replies received (Redis format only).
    pub replies: u64,
    /// Ticks written to the sent record (`record_sent`).
    pub recorded: u64,
}

/// Settings of one replay, independent of where the lines come from.
#[derive(Debug, Clone)]
pub struct SenderSettings {
    /// Intended send times.
    pub pace: Pace,
    /// Rewrite `ts_ns` to the intended send time.
    pub stamp: bool,
    /// Wire format.
    pub format: Format,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Send-lag interval log directory.
    pub log_dir: Option<PathBuf>,
    /// Set (by Ctrl-C) to stop early; the summary still comes.
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Presented once, before the first line: an `AUTH` line (`csv`) or a
    /// RESP `AUTH` command (`redis-publish`); not allowed with `pmessage`.
    pub token: Option<Token>,
    /// Record `intended_ns,symbol` of each stamped tick sent here.
    pub record_sent: Option<PathBuf>,
    /// Record at most this many ticks (the first ones sent): the record
    /// of a long run stays bounded.
    pub record_sent_max: u64,
}

/// The open-loop sender: schedules, stamps, encodes and writes lines.
/// Single owner (the sending thread).
pub struct Sender {
    s: SenderSettings,
    schedule: Schedule,
    out: std::io::BufWriter<TcpStream>,
    start: Instant,
    start_wall: u64,
    deadline: Option<Instant>,
    seqs: FxHashMap<Vec<u8>, u64>,
    /// The current line, stamped.
    line: Vec<u8>,
    /// The current payload (RESP formats).
    payload: Vec<u8>,
    /// The current line's wire form.
    buf: Vec<u8>,
    lag: Histogram<u64>,
    lag_interval: Histogram<u64>,
    log: Option<HistogramLog>,
    next_log: Instant,
    log_from: Instant,
    summary: ReplaySummary,
    /// Unpaced: the clock read shared by the next lines (`Instant`, wall
    /// ns) and how many lines may still use it.
    batch_clock: (Instant, u64),
    batch_left: u32,
    replies: Option<(Arc<AtomicU64>, std::thread::JoinHandle<()>)>,
    progress: ProgressBar,
    since_progress: u64,
    /// The `--record-sent` file; flushed and closed once it holds
    /// `record_sent_max` ticks.
    record: Option<std::io::BufWriter<std::fs::File>>,
    /// Ticks written to `record`.
    recorded: u64,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("settings", &self.s)
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

fn send_err(e: std::io::Error) -> Failure {
    Failure::Runtime(format!("send failed: {e}"))
}

fn lag_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds")
}

impl Sender {
    /// Connects to `to` and, with a token, authenticates (see the module
    /// docs). `progress` is shown on stderr (hidden when stderr is not a
    /// terminal).
    ///
    /// # Errors
    /// A token with the `pmessage` format (usage); the connection or the
    /// log file cannot be opened, or the server refused the token (runtime).
    pub fn connect(
        to: SocketAddr,
        s: SenderSettings,
        progress: ProgressBar,
    ) -> Result<Sender, Failure> {
        if s.token.is_some() && s.format == Format::Pmessage {
            return Err(Failure::Usage(
                "--token-file does not apply to --format pmessage (the raw forwarder has no authentication)"
                    .into(),
            ));
        }
        let stream = TcpStream::connect(to)
            .map_err(|e| Failure::Runtime(format!("cannot connect to {to}: {e}")))?;
        let _ = stream.set_nodelay(true);
        // Before the reply-draining thread starts, so the answer is ours.
        match (&s.token, s.format) {
            (Some(t), Format::Csv) => auth::line_handshake(&stream, t, "feed port")?,
            (Some(t), Format::RedisPublish) => auth::resp_handshake(&stream, t, "server")?,
            _ => {}
        }
        let replies = if s.format == Format::RedisPublish {
            let mut r = stream
                .try_clone()
                .map_err(|e| Failure::Runtime(format!("socket: {e}")))?;
            let n = Arc::new(AtomicU64::new(0));
            let counted = Arc::clone(&n);
            // Drain the replies (one `:N\r\n` per PUBLISH) so the server
            // never buffers them; count them to know when it is done.
            let h = std::thread::spawn(move || {
                let mut b = vec![0u8; 64 * 1024];
                while let Ok(k) = r.read(&mut b) {
                    if k == 0 {
                        break;
                    }
                    let lines = memchr::memchr_iter(b'\n', &b[..k]).count() as u64;
                    counted.fetch_add(lines, Ordering::Relaxed);
                }
            });
            Some((n, h))
        } else {
            None
        };
        let log = match &s.log_dir {
            Some(dir) => Some(
                HistogramLog::create(
                    dir,
                    "replay.hlog",
                    SystemTime::now(),
                    "tickfan replay: lag behind the intended send time (send_lag)",
                )
                .map_err(|e| Failure::Runtime(e.to_string()))?,
            ),
            None => None,
        };
        let record = match &s.record_sent {
            Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
                |e| Failure::Runtime(format!("cannot create {}: {e}", p.display())),
            )?)),
            None => None,
        };
        // Wall time first: a stamp (start_wall + offset) is then never later
        // than the wall time at which its line actually leaves.
        let start_wall = wall_ns();
        let start = Instant::now();
        Ok(Sender {
            schedule: Schedule::new(s.pace),
            deadline: s.duration.map(|d| start + d),
            s,
            out: std::io::BufWriter::with_capacity(64 * 1024, stream),
            start,
            start_wall,
            seqs: FxHashMap::default(),
            line: Vec::with_capacity(512),
            payload: Vec::with_capacity(512),
            buf: Vec::with_capacity(512),
            lag: lag_histogram(),
            lag_interval: lag_histogram(),
            log,
            next_log: start + Duration::from_secs(1),
            log_from: start,
            summary: ReplaySummary::default(),
            batch_clock: (start, start_wall),
            batch_left: 0,
            replies,
            progress,
            since_progress: 0,
            record,
            recorded: 0,
        })
    }

    /// Sends one line (without its newline). Returns `false` once the
    /// duration is over (the line is then not sent).
    ///
    /// # Errors
    /// The connection failed.
    pub fn send(&mut self, line: &[u8]) -> Result<bool, Failure> {
        let mut now = self.now();
        if self.deadline.is_some_and(|d| now >= d)
            || self
                .s
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            return Ok(false);
        }
        let intended = self.schedule.next(line);
        let stamp = match intended {
            Some(off) => {
                let due = self.start + Duration::from_nanos(off);
                if due > now {
                    // Ahead of schedule: hand over what is buffered, then
                    // wait (in slices, so Ctrl-C is heard during long gaps).
                    self.out.flush().map_err(send_err)?;
                    self.tick_progress(now, true);
                    while due > now {
                        if self
                            .s
                            .stop
                            .as_ref()
                            .is_some_and(|s| s.load(Ordering::Relaxed))
                        {
                            return Ok(false);
                        }
                        std::thread::sleep((due - now).min(Duration::from_millis(100)));
                        now = Instant::now();
                    }
                }
                let lag = now.saturating_duration_since(due).as_nanos() as u64;
                // The sample belongs to the interval holding `now`.
                if now >= self.next_log {
                    self.write_interval(now);
                }
                self.lag.saturating_record(lag.max(1));
                self.lag_interval.saturating_record(lag.max(1));
                self.start_wall + off
            }
            None => self.batch_clock.1,
        };
        let n = self.encode(line, stamp);
        if n > 0 {
            self.out.write_all(&self.buf).map_err(send_err)?;
            if let Some(r) = &mut self.record {
                self.recorded += u64::from(record_sent(r, &self.line).map_err(send_err)?);
                if self.recorded >= self.s.record_sent_max {
                    r.flush().map_err(send_err)?;
                    self.record = None;
                }
            }
            self.summary.lines += 1;
            self.summary.bytes += n as u64;
        } else {
            self.summary.skipped += 1;
        }
        self.since_progress += 1;
        if self.since_progress >= 1024 {
            self.tick_progress(now, false);
        }
        Ok(true)
    }

    /// The time for this line. Paced lines read the clock each time (they
    /// may have to wait). Unpaced lines share one read per
    /// [`UNPACED_CLOCK_BATCH`] lines: they leave in the same buffered write
    /// anyway, and at millions of lines a second a clock read per line was
    /// a sixth of the sender's CPU. A shared stamp is never later than the
    /// line's actual send, so latencies are not flattered.
    fn now(&mut self) -> Instant {
        if !matches!(self.s.pace, Pace::Unpaced) {
            return Instant::now();
        }
        if self.batch_left == 0 {
            self.batch_clock = (Instant::now(), wall_ns());
            self.batch_left = UNPACED_CLOCK_BATCH;
        }
        self.batch_left -= 1;
        self.batch_clock.0
    }

    /// Marks the end of one pass over the file.
    pub fn end_loop(&mut self) {
        self.schedule.end_loop();
    }

    /// Encodes `line` into `self.buf`; returns its length (0 = skipped).
    /// Reuses the sender's buffers: no allocation per line in steady state.
    fn encode(&mut self, line: &[u8], stamp: u64) -> usize {
        let mut num = itoa::Buffer::new();
        // 1. The line, stamped when asked (into `self.line`).
        self.line.clear();
        match (self.s.stamp, memchr::memchr(b',', line), leading_ts(line)) {
            (true, Some(comma), Some(_)) => {
                self.line.extend_from_slice(num.format(stamp).as_bytes());
                self.line.extend_from_slice(&line[comma..]);
            }
            _ => self.line.extend_from_slice(line),
        }
        let line = &self.line;
        // 2. The wire form (into `self.buf`).
        self.buf.clear();
        if self.s.format == Format::Csv {
            self.buf.extend_from_slice(line);
            self.buf.push(b'\n');
            return self.buf.len();
        }
        let mut commas = memchr::memchr_iter(b',', line);
        let (Some(c0), Some(c1)) = (commas.next(), commas.next()) else {
            return 0;
        };
        if commas.count() < 3 || leading_ts(line).is_none() {
            return 0;
        }
        let sym = &line[c0 + 1..c1];
        let seq = match self.seqs.get_mut(sym) {
            Some(s) => {
                *s += 1;
                *s
            }
            None => {
                self.seqs.insert(sym.to_vec(), 1);
                1
            }
        };
        self.payload.clear();
        self.payload.extend_from_slice(line);
        self.payload.push(b',');
        self.payload.extend_from_slice(num.format(seq).as_bytes());
        self.payload.push(b',');
        self.payload
            .extend_from_slice(num.format(wall_ns()).as_bytes());
        self.buf
            .extend_from_slice(if self.s.format == Format::RedisPublish {
                b"*3\r\n$7\r\nPUBLISH\r\n"
            } else {
                b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n"
            });
        for part in [sym, &self.payload[..]] {
            self.buf.push(b'$');
            self.buf
                .extend_from_slice(num.format(part.len()).as_bytes());
            self.buf.extend_from_slice(b"\r\n");
            self.buf.extend_from_slice(part);
            self.buf.extend_from_slice(b"\r\n");
        }
        self.buf.len()
    }

    fn tick_progress(&mut self, now: Instant, force: bool) {
        if self.since_progress == 0 && !force {
            return;
        }
        self.progress.inc(self.since_progress);
        self.since_progress = 0;
        let behind = if self.lag_interval.is_empty() {
            0
        } else {
            self.lag_interval.max()
        };
        if now >= self.next_log {
            self.write_interval(now); // also starts a new interval for `behind`
        }
        if !self.progress.is_hidden() {
            let secs = now.duration_since(self.start).as_secs_f64().max(1e-9);
            self.progress.set_message(format!(
                "{:.0} lines/s · behind {:.1} ms",
                (self.summary.lines + self.summary.skipped) as f64 / secs,
                behind as f64 / 1e6
            ));
        }
    }

    /// Closes the open interval of `replay.hlog` and opens the one holding
    /// `now`. Intervals are `[k s, (k+1) s)` since the sender's start (the
    /// log's start time), whenever this is called; the last one, written by
    /// [`Self::finish`], is partial: its length ends at `now`. An interval
    /// without a sample is not written.
    fn write_interval(&mut self, now: Instant) {
        let from = self.log_from;
        let full = now >= self.next_log;
        let length = if full {
            self.next_log - from
        } else {
            now - from
        };
        if let Some(log) = &mut self.log {
            let since = from.duration_since(self.start);
            let r = log
                .append("send_lag", since, length, &self.lag_interval)
                .and_then(|_| log.flush());
            if let Err(e) = r {
                log::warn!("{e}; replay stops writing its histogram log");
                self.log = None;
            }
        }
        self.lag_interval.reset();
        let k = now.duration_since(self.start).as_secs();
        self.log_from = self.start + Duration::from_secs(k);
        self.next_log = self.log_from + Duration::from_secs(1);
    }

    /// Flushes, waits (≤ 10 s) for the replies of a Redis server, and
    /// returns the summary.
    ///
    /// # Errors
    /// The connection failed.
    pub fn finish(mut self) -> Result<ReplaySummary, Failure> {
        self.out.flush().map_err(send_err)?;
        if let Some(r) = &mut self.record {
            r.flush().map_err(send_err)?;
        }
        let now = Instant::now();
        self.tick_progress(now, true);
        if self.log.is_some() {
            self.write_interval(now);
        }
        self.summary.elapsed = self.start.elapsed();
        self.summary.recorded = self.recorded;
        if let Some((n, h)) = self.replies.take() {
            let end = Instant::now() + Duration::from_secs(10);
            while n.load(Ordering::Relaxed) < self.summary.lines && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.summary.replies = n.load(Ordering::Relaxed);
            if let Ok(s) = self.out.get_ref().try_clone() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            let _ = h.join();
        } else if self.s.format == Format::Csv {
            self.confirm_feed_end()?;
        }
        if !self.lag.is_empty() {
            self.summary.max_behind = Duration::from_nanos(self.lag.max());
            self.summary.p99_behind = Duration::from_nanos(self.lag.value_at_quantile(0.99));
        }
        self.progress.finish_and_clear();
        Ok(self.summary)
    }
}

impl Sender {
    /// Half-closes the feed connection and reads until the engine closes
    /// its side (it does once it has read everything), for at most
    /// [`FEED_END_WAIT`]. The feed port says nothing unless something is
    /// wrong, so an `ERR …` line here (say, a token the engine wanted and
    /// did not get) fails the run instead of passing silently.
    fn confirm_feed_end(&mut self) -> Result<(), Failure> {
        let stream = self.out.get_mut();
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string());
        if stream.shutdown(std::net::Shutdown::Write).is_err() {
            return Ok(()); // already closed: nothing more to learn
        }
        let end = Instant::now() + FEED_END_WAIT;
        let mut said = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if said.len() < 4096 => said.extend_from_slice(&buf[..n]),
                Ok(_) => {}
            }
        }
        let said = String::from_utf8_lossy(&said);
        match said.lines().find(|l| l.starts_with("ERR")) {
            Some(err) => Err(Failure::Runtime(format!(
                "feed port {peer} answered: {err}"
            ))),
            None => Ok(()),
        }
    }
}

/// How long `replay` waits at the end for the feed port to close.
const FEED_END_WAIT: Duration = Duration::from_secs(5);

/// The pace `args` ask for.
///
/// # Errors
/// A negative or non-finite rate or speed.
pub fn pace_of(rate: f64, speed: Option<f64>) -> Result<Pace, Failure> {
    match speed {
        Some(s) if s > 0.0 && s.is_finite() => Ok(Pace::Recorded(s)),
        Some(_) => Err(Failure::Usage("--speed must be positive".into())),
        None if rate == 0.0 => Ok(Pace::Unpaced),
        None if rate > 0.0 && rate.is_finite() => Ok(Pace::Rate(rate)),
        None => Err(Failure::Usage("--rate must be 0 or positive".into())),
    }
}

/// A progress bar on stderr: ticks sent, rate, behind schedule.
pub fn progress_bar(total: Option<u64>, hidden: bool) -> ProgressBar {
    let target = if hidden {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr_with_hz(4)
    };
    let pb = ProgressBar::with_draw_target(total, target);
    let style = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:30}] {human_pos}/{human_len} lines · {msg}",
    )
    .expect("static template")
    .progress_chars("=> ");
    pb.set_style(style);
    pb
}

/// Runs the subcommand.
pub fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let pace = pace_of(args.rate, args.speed)?;
    if args.loops == 0 {
        return Err(Failure::Usage("--loops must be at least 1".into()));
    }
    let token = auth::load(args.token_file.as_deref())?;
    let per_loop = count_lines(&args.file)?;
    let stop = tickfan::sys::signals::stop_flag()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    let pb = progress_bar(Some(per_loop * args.loops), args.no_progress);
    let s = replay_file(
        &args.file,
        args.to,
        args.loops,
        SenderSettings {
            pace,
            stamp: args.stamp,
            format: args.format,
            duration: args.duration,
            log_dir: args.log_dir.clone(),
            stop: Some(stop),
            token,
            record_sent: args.record_sent.clone(),
            // The operator chose the file and the run's length.
            record_sent_max: u64::MAX,
        },
        pb,
    )?;
    eprintln!(
        "replay: sent {} lines ({} bytes) in {:.2} s ({:.0} lines/s); behind schedule p99 {:.2} ms, max {:.2} ms{}{}",
        s.lines,
        s.bytes,
        s.elapsed.as_secs_f64(),
        s.lines as f64 / s.elapsed.as_secs_f64().max(1e-9),
        s.p99_behind.as_secs_f64() * 1e3,
        s.max_behind.as_secs_f64() * 1e3,
        if s.skipped > 0 {
            format!("; {} non-tick lines not sent", s.skipped)
        } else {
            String::new()
        },
        if args.format == Format::RedisPublish {
            format!("; {} replies", s.replies)
        } else {
            String::new()
        },
    );
    Ok(())
}

fn open(file: &Path) -> Result<std::fs::File, Failure> {
    std::fs::File::open(file)
        .map_err(|e| Failure::Usage(format!("cannot open {}: {e}", file.display())))
}

/// Lines in `file` (a last line without a newline counts).
fn count_lines(file: &Path) -> Result<u64, Failure> {
    let mut r = BufReader::with_capacity(256 * 1024, open(file)?);
    let (mut n, mut last) = (0u64, b'\n');
    loop {
        let buf = r
            .fill_buf()
            .map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", file.display())))?;
        if buf.is_empty() {
            break;
        }
        n += memchr::memchr_iter(b'\n', buf).count() as u64;
        last = *buf.last().expect("non-empty");
        let k = buf.len();
        r.consume(k);
    }
    Ok(n + u64::from(last != b'\n'))
}

/// Sends `file` to `to` `loops` times.
///
/// # Errors
/// A missing file (usage), a failed connection or read (runtime).
pub fn replay_file(
    file: &Path,
    to: SocketAddr,
    loops: u64,
    settings: SenderSettings,
    progress: ProgressBar,
) -> Result<ReplaySummary, Failure> {
    open(file)?;
    let mut sender = Sender::connect(to, settings, progress)?;
    let mut line = Vec::with_capacity(512);
    'loops: for _ in 0..loops {
        let mut reader = BufReader::with_capacity(256 * 1024, open(file)?);
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", file.display())))?;
            if n == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            if !sender.send(&line)? {
                break 'loops;
            }
        }
        sender.end_loop();
    }
    sender.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_schedule_is_k_over_rate() {
        let mut s = Schedule::new(Pace::Rate(1_000.0));
        let offs: Vec<_> = (0..4).map(|_| s.next(b"x").unwrap()).collect();
        assert_eq!(offs, [0, 1_000_000, 2_000_000, 3_000_000]);
        assert_eq!(Schedule::new(Pace::Unpaced).next(b"1,a"), None);
    }

    #[test]
    fn recorded_schedule_follows_ts_gaps_over_speed_and_loops() {
        let mut s = Schedule::new(Pace::Recorded(2.0));
        let lines: [&[u8]; 5] = [
            b"ts_ns,symbol",
            b"1000,A",
            b"3000,A",
            b"garbage",
            b"2000,B", // earlier than the line before: due with it
        ];
        let a: Vec<_> = lines.iter().map(|l| s.next(l).unwrap()).collect();
        assert_eq!(a, [0, 0, 1_000, 1_000, 1_000]);
        s.end_loop();
        let b: Vec<_> = lines.iter().map(|l| s.next(l).unwrap()).collect();
        // next loop starts one mean gap (1000 / 2 ticks-1 … = 500) later
        assert_eq!(b, [1_500, 1_500, 2_500, 2_500, 2_500]);
    }

    #[test]
    fn leading_ts_is_an_integer_first_field() {
        assert_eq!(leading_ts(b"123,EURUSD"), Some(123));
        assert_eq!(leading_ts(b"ts_ns,symbol"), None);
        assert_eq!(leading_ts(b"12a,x"), None);
        assert_eq!(leading_ts(b"123"), None);
    }
}
