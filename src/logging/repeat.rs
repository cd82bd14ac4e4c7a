//! The log of repeating warnings: a line that can repeat under load is
//! written at most once per [`INTERVAL`] per kind ([`WarnKind`]), and every
//! occurrence is counted (`tickfan_warnings_total{kind}` in `/metrics`). The
//! log says that something keeps happening and how often, not each time —
//! Agrona's distinct-error log, in STYLE.md's words — instead of, say,
//! `nats: event channel full, dropped` every 1.5 s for 14 minutes (issue 26).
//!
//! Per kind:
//!
//! - an occurrence when no line of the kind went out in the last
//!   [`INTERVAL`] is written at once, as the caller worded it, followed by
//!   ` (+N more <kind> since the previous line)` when N were held back;
//! - the occurrences within [`INTERVAL`] of the kind's last line are counted,
//!   not written;
//! - when occurrences are held and none comes after the interval, the
//!   reporter's next interval writes their count alone ([`flush_due`]:
//!   `999 more auth_refused in the last 10 s …`).
//!
//! So a kind writes at most one line per [`INTERVAL`], and every held
//! occurrence is in a later line's count (or, if the process ends first, in
//! the counter). The gate of each kind is the GCRA limiter of the order
//! gateway, [`RateLimit::one_per`].
//!
//! Process-wide, like the logger it writes to: one table of kinds for every
//! engine in the process. The binary runs one engine; in-process tests that
//! run several share the table, so they can read its counters only as lower
//! bounds. Any thread may call: the totals are atomics, each kind's gate a
//! mutex held for a comparison and an addition, never while a line is
//! formatted or written. Time is this process's monotonic clock at the
//! edge ([`note`], [`flush_due`]); the table itself ([`Repeats`]) takes it
//! as an argument, so its tests run on made-up times.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::model::warning::WarnKind;
use crate::rate_limit::RateLimit;

/// At most one line per kind per this long.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

/// One kind's gate.
#[derive(Debug)]
struct Gate {
    /// One line per interval.
    limit: RateLimit,
    /// Occurrences not written since the kind's last line.
    held: u64,
    /// When the kind's last line was written (0: never).
    last_line_ns: u64,
}

/// Held occurrences of one kind whose interval has passed: the line
/// [`flush_due`] writes for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The kind.
    pub kind: WarnKind,
    /// Occurrences held since its last line.
    pub held: u64,
    /// Since that line.
    pub since: Duration,
}

impl Summary {
    /// The line: `999 more auth_refused in the last 10 s, not written one
    /// by one (tickfan_warnings_total{kind="auth_refused"})`.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} more {} in the last {} s, not written one by one (tickfan_warnings_total{{kind=\"{}\"}})",
            self.held,
            self.kind,
            self.since.as_secs(),
            self.kind
        )
    }
}

/// Every kind's total and gate. Time is passed in.
#[derive(Debug)]
pub(crate) struct Repeats {
    /// Occurrences per kind, by [`WarnKind::index`]; only ever added to.
    totals: [AtomicU64; WarnKind::COUNT],
    gates: [Mutex<Gate>; WarnKind::COUNT],
}

impl Repeats {
    /// A table whose kinds write at most one line per `interval`.
    ///
    /// # Panics
    /// When `interval` is zero.
    pub(crate) fn new(interval: Duration) -> Self {
        let interval_ns = interval.as_nanos() as u64;
        Repeats {
            totals: std::array::from_fn(|_| AtomicU64::new(0)),
            gates: std::array::from_fn(|_| {
                Mutex::new(Gate {
                    limit: RateLimit::one_per(interval_ns),
                    held: 0,
                    last_line_ns: 0,
                })
            }),
        }
    }

    /// Counts one occurrence of `kind` at `now_ns`: `Some(held)` when its
    /// line is to be written now, `held` being how many occurrences were
    /// not written since the kind's previous line; `None` when it is held.
    pub(crate) fn note(&self, kind: WarnKind, now_ns: u64) -> Option<u64> {
        // Relaxed: a statistic; many threads add, readers only display it.
        self.totals[kind.index()].fetch_add(1, Ordering::Relaxed);
        let mut g = self.gates[kind.index()].lock();
        if g.limit.try_take(now_ns) {
            g.last_line_ns = now_ns;
            Some(std::mem::take(&mut g.held))
        } else {
            g.held += 1;
            None
        }
    }

    /// The kinds holding occurrences whose interval has passed at `now_ns`,
    /// with their counts; each such kind's line is then this summary (its
    /// gate is taken and its count reset).
    pub(crate) fn due(&self, now_ns: u64) -> Vec<Summary> {
        let mut out = Vec::new();
        for kind in WarnKind::ALL {
            let mut g = self.gates[kind.index()].lock();
            if g.held > 0 && g.limit.try_take(now_ns) {
                out.push(Summary {
                    kind,
                    held: std::mem::take(&mut g.held),
                    since: Duration::from_nanos(now_ns.saturating_sub(g.last_line_ns)),
                });
                g.last_line_ns = now_ns;
            }
        }
        out
    }

    /// Occurrences of every kind so far, by [`WarnKind::index`].
    pub(crate) fn totals(&self) -> [u64; WarnKind::COUNT] {
        std::array::from_fn(|i| self.totals[i].load(Ordering::Relaxed))
    }
}

/// The process's table.
static REPEATS: LazyLock<Repeats> = LazyLock::new(|| Repeats::new(INTERVAL));
/// The process's time zero for the gates. Gates start open, so an instant
/// later than this is enough.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ns() -> u64 {
    EPOCH.elapsed().as_nanos() as u64
}

/// Counts one occurrence of `kind` now: `Some(held)` when its line is to be
/// written (see [`Repeats::note`]). Use [`warn_repeating!`] /
/// [`error_repeating!`], which write the line too.
pub(crate) fn note(kind: WarnKind) -> Option<u64> {
    REPEATS.note(kind, now_ns())
}

/// Writes one line of `kind` for the macros, at `target` (the caller's
/// module), with the count of those held back since its previous line.
pub(crate) fn write(
    level: log::Level,
    target: &str,
    kind: WarnKind,
    held: u64,
    args: std::fmt::Arguments<'_>,
) {
    if held == 0 {
        log::log!(target: target, level, "{args}");
    } else {
        log::log!(target: target, level, "{args} (+{held} more {kind} since the previous line)");
    }
}

/// Writes the summary of every kind whose held occurrences are due (the
/// reporter calls this every report interval).
pub(crate) fn flush_due() {
    for s in REPEATS.due(now_ns()) {
        log::warn!("{}", s.line());
    }
}

/// Occurrences of every kind in this process, by [`WarnKind::index`].
pub(crate) fn totals() -> [u64; WarnKind::COUNT] {
    REPEATS.totals()
}

/// `log::warn!` for a line that can repeat: at most one per kind per
/// [`INTERVAL`], every occurrence counted. The message is formatted only
/// when written.
///
/// ```ignore
/// warn_repeating!(WarnKind::AuthRefused, "feed {}: authentication refused", peer);
/// ```
macro_rules! warn_repeating {
    ($kind:expr, $($arg:tt)+) => {{
        let kind = $kind;
        if let Some(held) = $crate::logging::repeat::note(kind) {
            $crate::logging::repeat::write(
                ::log::Level::Warn,
                module_path!(),
                kind,
                held,
                format_args!($($arg)+),
            );
        }
    }};
}

/// [`warn_repeating!`] at the error level.
macro_rules! error_repeating {
    ($kind:expr, $($arg:tt)+) => {{
        let kind = $kind;
        if let Some(held) = $crate::logging::repeat::note(kind) {
            $crate::logging::repeat::write(
                ::log::Level::Error,
                module_path!(),
                kind,
                held,
                format_args!($($arg)+),
            );
        }
    }};
}

pub(crate) use {error_repeating, warn_repeating};

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

    fn table() -> Repeats {
        Repeats::new(Duration::from_secs(10))
    }

    #[test]
    fn a_thousand_repeats_in_ten_seconds_write_one_line_then_one_summary_of_the_rest() {
        let r = table();
        let k = WarnKind::NatsEventsDropped;
        let t0 = 100 * SEC;
        // 1,000 in [t0, t0 + 10 s): one every 10 ms.
        let written: Vec<u64> = (0..1000)
            .filter_map(|i| r.note(k, t0 + i * 10 * MS))
            .collect();
        assert_eq!(
            written,
            vec![0],
            "one line, the first, with nothing held before it"
        );
        assert_eq!(r.totals()[k.index()], 1000, "every one counted");
        assert!(
            r.due(t0 + 10 * SEC - 1).is_empty(),
            "not before the interval ends"
        );
        assert_eq!(
            r.due(t0 + 10 * SEC),
            vec![Summary {
                kind: k,
                held: 999,
                since: Duration::from_secs(10)
            }]
        );
        assert!(
            r.due(t0 + 10 * SEC).is_empty(),
            "the summary was the kind's line for its interval"
        );
        assert!(
            r.due(t0 + 60 * SEC).is_empty(),
            "nothing held, nothing to say"
        );
    }

    #[test]
    fn the_next_line_after_the_interval_carries_the_count_held_back() {
        let r = table();
        let k = WarnKind::AuthRefused;
        assert_eq!(r.note(k, SEC), Some(0));
        for s in 2..=6 {
            assert_eq!(r.note(k, s * SEC), None);
        }
        assert_eq!(r.note(k, 11 * SEC), Some(5));
        assert_eq!(r.note(k, 12 * SEC), None);
        assert!(
            r.due(20 * SEC).is_empty(),
            "within the interval of the last line"
        );
        assert_eq!(r.due(21 * SEC)[0].held, 1);
    }

    #[test]
    fn kinds_are_gated_apart() {
        let r = table();
        assert_eq!(r.note(WarnKind::AcceptFailed, SEC), Some(0));
        assert_eq!(r.note(WarnKind::AuthTimeout, SEC), Some(0));
        assert_eq!(r.note(WarnKind::AcceptFailed, SEC + 1), None);
        assert_eq!(r.totals().iter().sum::<u64>(), 3);
    }

    /// A flood of one occurrence per millisecond for a minute: at most one
    /// line per kind per 10 s, and the lines account for every occurrence
    /// (each written one is itself plus the count it carries; a summary,
    /// its count), with the reporter ticking every 100 ms.
    #[test]
    fn a_flood_writes_one_line_per_interval_and_every_occurrence_is_in_a_line() {
        let r = table();
        let k = WarnKind::NatsSendFailed;
        let mut lines: Vec<u64> = Vec::new();
        let mut accounted = 0;
        for ms in 0..60_000u64 {
            let now = 5 * SEC + ms * MS;
            if let Some(held) = r.note(k, now) {
                lines.push(now);
                accounted += 1 + held;
            }
            if ms % 100 == 0 {
                for s in r.due(now) {
                    lines.push(now);
                    accounted += s.held;
                }
            }
        }
        assert!(
            lines.windows(2).all(|w| w[1] - w[0] >= 10 * SEC),
            "{lines:?}"
        );
        assert_eq!(lines.len(), 6);
        let end = 5 * SEC + 70 * SEC;
        accounted += r.due(end).iter().map(|s| s.held).sum::<u64>();
        assert_eq!(accounted, 60_000);
        assert_eq!(r.totals()[k.index()], 60_000);
    }

    #[test]
    fn the_summary_line_names_the_kind_its_count_and_the_metric() {
        let s = Summary {
            kind: WarnKind::AuthRefused,
            held: 999,
            since: Duration::from_millis(10_400),
        };
        assert_eq!(
            s.line(),
            "999 more auth_refused in the last 10 s, not written one by one (tickfan_warnings_total{kind=\"auth_refused\"})"
        );
    }
}
