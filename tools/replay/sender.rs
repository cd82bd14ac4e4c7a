//! The open-loop sender: schedules, stamps, encodes and writes tick lines
//! to one connection, whatever file format they came from.
//!
//! - **Every line it is given, in order.** A line goes out exactly as given
//!   (a malformed tickfan CSV line is sent as is: the engine dead-letters
//!   it), ending with `\n`.
//! - **Pacing is open-loop**: see [`super::schedule`].
//! - **`--stamp`** rewrites `ts_ns` to the line's intended send time (wall
//!   clock, ns), so subscribers measure end to end from when the tick was
//!   meant to leave. A line whose first field is not a number is not stamped.
//! - **What it is sent as** (`--send-as`): `csv` (the feed), `redis-publish`
//!   (`PUBLISH symbol payload` as RESP, pipelined; replies are drained by a
//!   second thread), `pmessage` (ready-made `pmessage` frames for the raw
//!   forwarder). In the two RESP forms the payload is the line plus
//!   `,seq,send_ns` (seq = that symbol's count so far), the same shape as
//!   tickfan's payload, and lines that are not ticks (header, comments,
//!   fewer than six fields) are skipped.
//! - **`--record-sent FILE`** (with `--stamp`): one line per tick sent,
//!   `intended_ns,symbol`, for `subscribe --sent` to compute freshness
//!   ([`super::super::freshness`]); bounded by the run (~25 bytes a tick).
//! - **`--token-file`** (a secured engine): the connection opens with
//!   `AUTH <token>` and waits for `OK` before the first line (`csv`), or with
//!   RESP `AUTH <token>` and waits for `+OK` (`redis-publish`, a Redis with
//!   `requirepass`). A refusal ends the run (exit 1) with the server's line.
//!   `pmessage` goes to the raw forwarder, which has no authentication: the
//!   flag is refused there.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::ValueEnum;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rustc_hash::FxHashMap;

use tickfan::auth::Token;
use tickfan::error::Failure;
use tickfan::metrics::hlog::HistogramLog;
use tickfan::sys::clock::wall_ns;

use super::super::auth;
use super::schedule::{leading_ts, Pace, Schedule};

/// What each line is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SendAs {
    /// The line itself (tickfan's feed).
    Csv,
    /// `PUBLISH symbol payload` as a RESP command, pipelined (a Redis server).
    RedisPublish,
    /// A ready-made `pmessage` frame for pattern `*` (the raw forwarder).
    Pmessage,
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
    pub send_as: SendAs,
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
        if s.token.is_some() && s.send_as == SendAs::Pmessage {
            return Err(Failure::Usage(
                "--token-file does not apply to --send-as pmessage (the raw forwarder has no authentication)"
                    .into(),
            ));
        }
        let stream = TcpStream::connect(to)
            .map_err(|e| Failure::Runtime(format!("cannot connect to {to}: {e}")))?;
        let _ = stream.set_nodelay(true);
        // Before the reply-draining thread starts, so the answer is ours.
        match (&s.token, s.send_as) {
            (Some(t), SendAs::Csv) => auth::line_handshake(&stream, t, "feed port")?,
            (Some(t), SendAs::RedisPublish) => auth::resp_handshake(&stream, t, "server")?,
            _ => {}
        }
        let replies = if s.send_as == SendAs::RedisPublish {
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
        if self.s.send_as == SendAs::Csv {
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
            .extend_from_slice(if self.s.send_as == SendAs::RedisPublish {
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
        } else if self.s.send_as == SendAs::Csv {
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
