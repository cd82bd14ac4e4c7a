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
//! them. The sent file is bounded by the run (one short line per tick);
//! the receive record by [`MAX_HELD`] entries per connection.

use std::io::{BufRead, BufReader};
use std::path::Path;

use rustc_hash::FxHashMap;

use tickfan::error::Failure;
use tickfan::feed::parse::ascii_u64;

/// Most (stamp, receive time) entries kept per connection (16 bytes each);
/// past it the connection's freshness is not computed (reported).
pub const MAX_HELD: usize = 16 << 20;

/// Intended send times per symbol, ascending.
#[derive(Debug)]
pub struct SentSchedule {
    /// Symbol → stamps of its ticks, in send order.
    pub by_symbol: FxHashMap<Vec<u8>, Vec<u64>>,
    /// Ticks in the file.
    pub ticks: u64,
    /// The earliest stamp (`u64::MAX` when empty).
    pub first_ns: u64,
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
    }
}

/// What one connection's freshness computation found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Sent ticks measured.
    pub ticks: u64,
    /// Of those, never held by the end (counted at the end).
    pub unserved: u64,
}

/// Calls `rec(stamp, freshness ns)` for each tick in `sent` (stamps,
/// ascending) of a connection that received `held` (stamp, receive ns) of
/// that symbol, in receive order; `end_ns` ends the run.
pub fn record_symbol(
    sent: &[u64],
    held: &[(u64, u64)],
    end_ns: u64,
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
        rec(t, end_ns.saturating_sub(t).max(1));
        c.ticks += 1;
        c.unserved += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;

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
        let c = record_symbol(&sent, &held, 1000, |_, f| h.record(f).unwrap());
        assert_eq!(
            c,
            Counted {
                ticks: 5,
                unserved: 2
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
        let c = record_symbol(&sent, &held, 1_000, |t, f| {
            stamps.push(t);
            h.record(f).unwrap();
        });
        assert_eq!(stamps, [10, 20, 30], "each tick once, by its own stamp");
        assert_eq!(
            c,
            Counted {
                ticks: 3,
                unserved: 0
            }
        );
        assert_eq!((h.min(), h.max()), (5, 25));
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
