//! Freshness from a sent schedule: for every tick sent, the time from its
//! intended send time until a subscriber connection first *held* that
//! symbol's value at that tick or newer.
//!
//! - `replay --stamp --record-sent FILE` writes one line per tick sent,
//!   `intended_ns,symbol` (the stamp it put in the tick's `ts_ns`).
//! - `subscribe --sent FILE` records, per connection and symbol, each
//!   message's `ts_ns` (a stamp) and receive time, and at the end computes
//!   freshness per sent tick of each symbol the connection follows: the
//!   first receive time at which the largest stamp received so far is at
//!   least the tick's stamp, minus the stamp. A tick never superseded or
//!   delivered by the end of the run counts with the end of the run as its
//!   receive time (and is counted as `unserved`).
//!
//! It equals latency for a server that delivers everything; it does not
//! hide superseded ticks (latency over delivered messages does) nor punish
//! them. The sent file is bounded by the run (one short line per tick) or
//! by the sender's cap (`demo` records its first [`DEMO_SENT_MAX`] ticks);
//! the receive record by [`MAX_HELD`] entries per connection (or the
//! caller's smaller bound). Past its bound a connection stops recording;
//! its ticks the record covers are still exact, the ones it does not are
//! left out (counted), never counted as unserved.
//!
//! [`write_log`] puts the result in an interval log (`freshness.hlog`):
//! one histogram per class per second of *intended send time*, so a
//! stalled second shows where the ticks were sent, whenever they were
//! served; `tickfan report` reads it like any other log.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;

use tickfan::error::Failure;
use tickfan::feed::parse::ascii_u64;
use tickfan::metrics::hlog::HistogramLog;

/// Most (stamp, receive time) entries kept per connection (16 bytes each);
/// past it the connection stops recording (see the module docs).
pub const MAX_HELD: usize = 16 << 20;

/// Ticks `demo` records as sent, and receive entries each of its
/// connections keeps: the default run (50,000/s for 10 s = 500,000 ticks)
/// whole, with room. A longer demo measures freshness over its first
/// 600,000 ticks (it says so); memory stays under 10 MB per connection and
/// the record file (≈ 30 bytes a tick, deleted after the run) under 20 MB.
pub const DEMO_SENT_MAX: u64 = 600_000;

/// The interval log of freshness per class, beside `subscribers.hlog`.
pub const LOG_NAME: &str = "freshness.hlog";

/// Tag prefix of the freshness series (`freshness_normal`, `freshness_slow`).
pub const TAG_PREFIX: &str = "freshness_";

/// Intended send times per symbol, ascending.
#[derive(Debug)]
pub struct SentSchedule {
    /// Symbol → stamps of its ticks, in send order.
    pub by_symbol: FxHashMap<Vec<u8>, Vec<u64>>,
    /// Ticks in the file.
    pub ticks: u64,
    /// The earliest stamp (`u64::MAX` when empty).
    pub first_ns: u64,
    /// The latest stamp (0 when empty).
    pub last_ns: u64,
}

impl SentSchedule {
    /// Reads a `--record-sent` file.
    ///
    /// # Errors
    /// The file cannot be read, or a line is not `ns,symbol`.
    pub fn load(path: &Path) -> Result<Self, Failure> {
        let f = std::fs::File::open(path)
            .map_err(|e| Failure::Runtime(format!("cannot open {}: {e}", path.display())))?;
        let mut s = SentSchedule::new();
        for (n, line) in BufReader::new(f).split(b'\n').enumerate() {
            let line =
                line.map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", path.display())))?;
            if line.is_empty() {
                continue;
            }
            let bad = || {
                Failure::Runtime(format!(
                    "{} line {}: not `intended_ns,symbol`",
                    path.display(),
                    n + 1
                ))
            };
            let comma = memchr::memchr(b',', &line).ok_or_else(bad)?;
            let ns = ascii_u64(&line[..comma]).ok_or_else(bad)?;
            s.push(&line[comma + 1..], ns);
        }
        Ok(s)
    }

    /// Empty.
    pub fn new() -> Self {
        SentSchedule {
            by_symbol: FxHashMap::default(),
            ticks: 0,
            first_ns: u64::MAX,
            last_ns: 0,
        }
    }

    /// Adds one sent tick.
    pub fn push(&mut self, symbol: &[u8], ns: u64) {
        match self.by_symbol.get_mut(symbol) {
            Some(v) => v.push(ns),
            None => {
                self.by_symbol.insert(symbol.to_vec(), vec![ns]);
            }
        }
        self.ticks += 1;
        self.first_ns = self.first_ns.min(ns);
        self.last_ns = self.last_ns.max(ns);
    }
}

/// What one connection's freshness computation found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Sent ticks measured.
    pub ticks: u64,
    /// Of those, never held by the end (counted at the end).
    pub unserved: u64,
    /// Not measured: the connection's record stopped at its bound before
    /// it held them.
    pub left_out: u64,
}

/// Calls `rec(stamp, freshness ns)` for each tick in `sent` (stamps,
/// ascending) of a connection that received `held` (stamp, receive ns) of
/// that symbol, in receive order; `end_ns` ends the run. `complete` says
/// the record is whole: a tick it does not cover was then never served
/// (counted at the end); in a record cut at its bound it is left out.
pub fn record_symbol(
    sent: &[u64],
    held: &[(u64, u64)],
    end_ns: u64,
    complete: bool,
    mut rec: impl FnMut(u64, u64),
) -> Counted {
    let mut c = Counted::default();
    let mut j = 0;
    let mut newest = 0u64;
    for &(stamp, recv) in held {
        newest = newest.max(stamp);
        while j < sent.len() && sent[j] <= newest {
            rec(sent[j], recv.saturating_sub(sent[j]).max(1));
            c.ticks += 1;
            j += 1;
        }
    }
    for &t in &sent[j..] {
        if t > end_ns {
            break;
        }
        if !complete {
            c.left_out += 1;
            continue;
        }
        rec(t, end_ns.saturating_sub(t).max(1));
        c.ticks += 1;
        c.unserved += 1;
    }
    c
}

/// One class's freshness per second of intended send time (index =
/// second since `first_ns`), as [`write_log`] takes it.
#[derive(Debug)]
pub struct ClassSeconds<'a> {
    /// `normal` or `slow`: the tag is [`TAG_PREFIX`] + class.
    pub class: &'a str,
    /// Per second; an empty one is not written.
    pub seconds: &'a [Histogram<u64>],
}

/// Writes `dir/freshness.hlog`: `StartTime` = `BaseTime` = `first_ns` (the
/// first tick's intended send time), then per second *k* of send time, per
/// class, the histogram of the freshness of the ticks meant to leave in
/// `[k, k+1)` s, tagged `freshness_<class>`. The last second ends at the
/// last tick sent (`last_ns`), so it is marked partial like any log's last
/// interval.
///
/// # Errors
/// The log cannot be created or written.
pub fn write_log(
    dir: &Path,
    first_ns: u64,
    last_ns: u64,
    classes: &[ClassSeconds<'_>],
) -> Result<PathBuf, Failure> {
    let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(first_ns);
    let mut log = HistogramLog::create(
        dir,
        LOG_NAME,
        start,
        "tickfan subscribe: freshness per class (first time a reader holds the symbol at the sent tick or newer - intended send time), by second of intended send time",
    )
    .map_err(|e| Failure::Runtime(e.to_string()))?;
    let span = Duration::from_nanos(last_ns.saturating_sub(first_ns) + 1);
    let seconds = classes.iter().map(|c| c.seconds.len()).max().unwrap_or(0);
    for k in 0..seconds {
        let from = Duration::from_secs(k as u64);
        let length = span.saturating_sub(from).min(Duration::from_secs(1));
        for c in classes {
            if let Some(h) = c.seconds.get(k) {
                log.append(&format!("{TAG_PREFIX}{}", c.class), from, length, h)
                    .map_err(|e| Failure::Runtime(e.to_string()))?;
            }
        }
    }
    log.flush().map_err(|e| Failure::Runtime(e.to_string()))?;
    Ok(log.path().to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap()
    }

    #[test]
    fn a_hand_built_schedule() {
        // Ticks of one symbol sent at 100, 200, 300, 400, 500 (ns).
        let sent = [100, 200, 300, 400, 500];
        // The subscriber got tick 100 at 150; then, conflated, tick 300 at
        // 900 (so 200 and 300 became held at 900); 500 never came.
        let held = [(100, 150), (300, 900)];
        let mut h = hist();
        let c = record_symbol(&sent, &held, 1000, true, |_, f| h.record(f).unwrap());
        assert_eq!(
            c,
            Counted {
                ticks: 5,
                unserved: 2,
                left_out: 0,
            }
        );
        // 50, 700, 600, then 400 and 500 counted at the end: 600, 500.
        assert_eq!(h.len(), 5);
        for (v, n) in [(50, 1), (500, 1), (600, 2), (700, 1)] {
            assert_eq!(h.count_at(v), n, "freshness {v}");
        }
    }

    #[test]
    fn an_older_value_after_a_newer_does_not_count_and_late_ticks_are_left_out() {
        let sent = [10, 20, 30, 2_000];
        // A server that sent 30, then (wrongly) 10: holding 30 already
        // covered 10 and 20.
        let held = [(30, 35), (10, 40)];
        let mut h = hist();
        let mut stamps = Vec::new();
        let c = record_symbol(&sent, &held, 1_000, true, |t, f| {
            stamps.push(t);
            h.record(f).unwrap();
        });
        assert_eq!(stamps, [10, 20, 30], "each tick once, by its own stamp");
        assert_eq!(
            c,
            Counted {
                ticks: 3,
                unserved: 0,
                left_out: 0,
            }
        );
        assert_eq!((h.min(), h.max()), (5, 25));
    }

    #[test]
    fn a_record_cut_at_its_bound_leaves_out_what_it_does_not_cover() {
        let sent = [100, 200, 300, 400];
        // The record stopped after (200, 250): 300 and 400 may have been
        // held later; they are neither measured nor called unserved.
        let held = [(100, 120), (200, 250)];
        let mut got = Vec::new();
        let c = record_symbol(&sent, &held, 10_000, false, |t, f| got.push((t, f)));
        assert_eq!(got, [(100, 20), (200, 50)]);
        assert_eq!(
            c,
            Counted {
                ticks: 2,
                unserved: 0,
                left_out: 2,
            }
        );
    }

    #[test]
    fn the_log_files_each_second_of_send_time_under_its_class() {
        let dir = tempfile::tempdir().unwrap();
        let first = 1_700_000_000_000_000_000u64;
        let (mut normal, mut slow) = (vec![hist(), hist()], vec![hist()]);
        normal[0].record(2_000).unwrap();
        normal[1].record(900_000_000).unwrap();
        normal[1].record(800_000_000).unwrap();
        slow[0].record(3_000_000).unwrap();
        let last = first + 1_250_000_000; // the last tick: 1.25 s in
        let path = write_log(
            dir.path(),
            first,
            last,
            &[
                ClassSeconds {
                    class: "normal",
                    seconds: &normal,
                },
                ClassSeconds {
                    class: "slow",
                    seconds: &slow,
                },
            ],
        )
        .unwrap();
        assert_eq!(path, dir.path().join(LOG_NAME));
        use base64::Engine as _;
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        let bytes = std::fs::read(&path).unwrap();
        let mut lines = Vec::new();
        for e in IntervalLogIterator::new(&bytes) {
            match e.unwrap() {
                LogEntry::BaseTime(t) => assert_eq!(t, Duration::from_nanos(first)),
                LogEntry::StartTime(_) => {}
                LogEntry::Interval(i) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(i.encoded_histogram())
                        .unwrap();
                    let h: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
                        .deserialize(&mut raw.as_slice())
                        .unwrap();
                    lines.push((
                        i.tag().unwrap().as_str().to_string(),
                        i.start_timestamp().as_millis(),
                        i.duration().as_millis(),
                        h.len(),
                    ));
                }
            }
        }
        assert_eq!(
            lines,
            [
                ("freshness_normal".into(), 0, 1000, 1),
                ("freshness_slow".into(), 0, 1000, 1),
                ("freshness_normal".into(), 1000, 250, 2),
            ]
        );
    }

    #[test]
    fn the_sent_file_parses_and_refuses_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("tickfan-fresh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("sent.csv");
        std::fs::write(&p, "5,EURUSD\n7,USDJPY\n9,EURUSD\n").unwrap();
        let s = SentSchedule::load(&p).unwrap();
        assert_eq!((s.ticks, s.first_ns), (3, 5));
        assert_eq!(s.by_symbol[&b"EURUSD"[..]], vec![5, 9]);
        std::fs::write(&p, "5,EURUSD\nx,Y\n").unwrap();
        let e = SentSchedule::load(&p).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
