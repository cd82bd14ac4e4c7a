//! When each line is meant to leave: the open-loop [`Schedule`].
//!
//! Each line has an intended send time fixed in advance (fixed rate, or the
//! line's recorded `ts_ns` gap from the file's first tick divided by a speed
//! factor). The sender never sends a line before its time; when it falls
//! behind it sends at once and does *not* move the schedule, so the lag shows
//! up as latency (no coordinated omission). Every input format reaches the
//! schedule as a tickfan CSV line whose first field is the chosen source
//! timestamp (`ts_event`/`ts_recv` of a DBN record, `timestamp`/
//! `local_timestamp` of a Tardis row), so pacing is the same for all.

use tickfan::error::Failure;

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
