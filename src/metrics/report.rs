//! Reports: per-stage percentile summaries, counters and per-subscriber
//! figures, as a human table (`Display`) and as JSON (`serde`).

use std::fmt;

use hdrhistogram::Histogram;

use super::counters::CountersSnapshot;
use super::stage::Stage;

/// Rounds to 3 significant digits, and to whole nanoseconds (3 decimals of
/// a µs) at most: the precision of the engine's histograms, so a report
/// never shows `5.000999927520752` for 5.00 µs.
pub fn round3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = (2 - x.abs().log10().floor() as i32).clamp(-12, 3);
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// Serialises an `f64` through [`round3`].
pub fn serialize_round3<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round3(*x))
}

/// Percentiles of a histogram of nanosecond values, in microseconds (all
/// zero for an empty histogram). One shape for every report: the engine's
/// stages, the tools' series and the subscribers' latencies. Serialised
/// rounded by [`round3`] (the field names carry the unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Number of values recorded.
    pub count: u64,
    /// Median.
    #[serde(serialize_with = "serialize_round3")]
    pub p50_us: f64,
    /// 90th percentile.
    #[serde(serialize_with = "serialize_round3")]
    pub p90_us: f64,
    /// 99th percentile.
    #[serde(serialize_with = "serialize_round3")]
    pub p99_us: f64,
    /// 99.9th percentile.
    #[serde(serialize_with = "serialize_round3")]
    pub p999_us: f64,
    /// Largest value.
    #[serde(serialize_with = "serialize_round3")]
    pub max_us: f64,
    /// Mean.
    #[serde(serialize_with = "serialize_round3")]
    pub mean_us: f64,
}

impl Percentiles {
    /// Summarises a histogram of nanosecond values.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        Percentiles {
            count: h.len(),
            p50_us: us(0.50),
            p90_us: us(0.90),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: h.max() as f64 / 1_000.0,
            mean_us: h.mean() / 1_000.0,
        }
    }
}

/// Percentiles of one stage (serialised flat: `stage`, `count`, `p50_us`, …).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StageSummary {
    /// Stage name (see [`Stage::as_str`]).
    pub stage: &'static str,
    /// Its percentiles.
    #[serde(flatten)]
    pub pct: Percentiles,
}

impl StageSummary {
    /// Summarises a histogram of nanosecond values.
    pub fn from_histogram(stage: Stage, h: &Histogram<u64>) -> Self {
        StageSummary {
            stage: stage.as_str(),
            pct: Percentiles::of(h),
        }
    }
}

/// One subscriber's figures (written by the publisher, read by reports).
///
/// One field per figure a report or `/metrics` shows for a subscriber:
/// a flat record, so over 15 fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SubscriberStats {
    /// Engine-assigned connection number (1-based, never reused).
    pub id: u64,
    /// Peer address.
    pub peer: String,
    /// Name set with `CLIENT SETNAME` (or `HELLO … SETNAME`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// Still connected?
    pub connected: bool,
    /// Channels + patterns subscribed now.
    pub subscriptions: u64,
    /// Data frames appended to its buffer.
    pub frames: u64,
    /// Bytes written to its socket.
    pub bytes_written: u64,
    /// Updates it was not sent because its buffer was past the high-water
    /// mark (it gets the latest value of those symbols later).
    pub conflations: u64,
    /// Times it crossed the high-water mark.
    pub slow_episodes: u64,
    /// Bytes waiting in its buffer now.
    pub buffered_bytes: u64,
    /// Most bytes ever waiting in its buffer.
    pub max_buffered_bytes: u64,
    /// Symbols waiting to be sent as latest values now.
    pub pending_symbols: u64,
    /// Age (µs) of the oldest pending symbol now: how stale this subscriber is.
    pub staleness_us: u64,
    /// Paced by `--sub-max-lag` now (it was slow; its commit budget applies).
    pub paced: bool,
    /// Times it was spared pacing: its stall was shared with other
    /// subscribers at once (their client away, not it slow).
    pub spared: u64,
    /// Its commit budget now, bytes (engine buffer + kernel send queue).
    pub commit_budget_bytes: u64,
    /// Its measured drain rate, bytes/s (0 until paced).
    pub drain_rate_bytes_per_s: u64,
    /// Most bytes the engine ever committed for it over its budget (at most
    /// one frame: a frame larger than what is left goes out alone).
    pub max_commit_excess_bytes: u64,
    /// Bytes its reader's kernel holds unread, as estimated from the window
    /// it advertises (at the last sample while paced; 0 otherwise or when
    /// the kernel does not tell).
    pub reader_held_bytes: u64,
}

/// Everything the engine prints and writes when it stops.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FinalReport {
    /// Seconds the engine ran.
    pub elapsed_s: f64,
    /// One summary per stage, in [`Stage::ALL`] order.
    pub stages: Vec<StageSummary>,
    /// Every counter.
    pub counters: CountersSnapshot,
    /// Per-subscriber figures (connected ones and the most recent closed ones).
    pub subscribers: Vec<SubscriberStats>,
    /// Samples handed in after their interval had been reported (a thread
    /// stuck past the grace period): in the totals, in no interval.
    pub late_samples: u64,
    /// Samples dropped because a recorder could not hand them off for too
    /// long (its backlog overflowed): in no total and no interval.
    pub lost_samples: u64,
}

impl FinalReport {
    /// The summary of one stage.
    pub fn stage(&self, stage: Stage) -> Option<&StageSummary> {
        self.stages.iter().find(|s| s.stage == stage.as_str())
    }
}

impl fmt::Display for FinalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counters;
        writeln!(f, "tickfan final report ({:.1} s)", self.elapsed_s)?;
        writeln!(
            f,
            "{:<24} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "stage (µs)", "count", "p50", "p90", "p99", "p99.9", "max"
        )?;
        for s in &self.stages {
            if s.pct.count == 0 {
                // No sample: a 0.0 percentile would read as "instant".
                writeln!(f, "{:<24} {:>10} {:>10}", s.stage, 0, "-")?;
                continue;
            }
            writeln!(
                f,
                "{:<24} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                s.stage,
                s.pct.count,
                s.pct.p50_us,
                s.pct.p90_us,
                s.pct.p99_us,
                s.pct.p999_us,
                s.pct.max_us
            )?;
        }
        writeln!(
            f,
            "ticks received {} = valid {} + poison {} + conflated at the feed {}   (skipped lines {}, crossed/locked {})",
            c.ticks_received,
            c.feed.ticks_valid,
            c.poison_total,
            c.feed.ticks_conflated,
            c.feed.lines_skipped,
            c.feed.crossed_quotes
        )?;
        let poison: Vec<String> = c
            .poison
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if !poison.is_empty() {
            writeln!(f, "poison by reason: {}", poison.join(", "))?;
        }
        writeln!(
            f,
            "published {}  conflated {}  frames {}  symbols {}",
            c.publish.published, c.publish.conflated, c.publish.frames, c.feed.symbols
        )?;
        writeln!(
            f,
            "subscribers accepted {} refused {} open {}  conflations {}  slow episodes {}",
            c.publish.subscribers_accepted,
            c.publish.subscribers_refused,
            c.publish.subscribers_open,
            c.publish.subscriber_conflations,
            c.publish.slow_episodes
        )?;
        writeln!(
            f,
            "feeds accepted {} refused {}  dead letters stored {} (hand-off dropped {})",
            c.feed.connections_accepted,
            c.feed.connections_refused,
            c.dlq.stored,
            c.feed.dlq_handoff_dropped
        )?;
        write!(f, "{}", c.orders)?;
        if self.late_samples > 0 || self.lost_samples > 0 {
            writeln!(
                f,
                "histogram samples reported late {} (in the totals, in no interval), lost {}",
                self.late_samples, self.lost_samples
            )?;
        }
        for s in &self.subscribers {
            writeln!(
                f,
                "  subscriber #{} {} {}: frames {} bytes {} conflations {} slow episodes {} max buffered {} B",
                s.id,
                s.peer,
                if s.connected { "open" } else { "closed" },
                s.frames,
                s.bytes_written,
                s.conflations,
                s.slow_episodes,
                s.max_buffered_bytes
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round3_keeps_three_significant_digits_and_no_float_noise() {
        assert_eq!(round3(5.000999927520752), 5.0);
        assert_eq!(round3(123.456), 123.0);
        assert_eq!(round3(1_234_567.8), 1_230_000.0);
        assert_eq!(round3(0.0123456), 0.012);
        assert_eq!(round3(0.0004), 0.0);
        assert_eq!(round3(0.0), 0.0);
        let mut h = crate::metrics::stage::new_histogram();
        h.record(5_001).unwrap();
        let json = serde_json::to_string(&Percentiles::of(&h)).unwrap();
        assert!(json.contains("\"p50_us\":5.0,"), "{json}");
    }

    #[test]
    fn an_empty_stage_prints_a_dash_not_zero_latency() {
        let mut h = crate::metrics::stage::new_histogram();
        h.record(250_000).unwrap();
        let report = FinalReport {
            stages: vec![
                StageSummary::from_histogram(Stage::EngineE2e, &h),
                StageSummary::from_histogram(
                    Stage::OrderQueueWaitSmall,
                    &crate::metrics::stage::new_histogram(),
                ),
            ],
            ..FinalReport::default()
        };
        let text = report.to_string();
        let row = |name: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("no {name} row: {text}"))
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
        };
        let e2e = row("engine_e2e");
        assert_eq!(e2e[0], "1");
        let p50: f64 = e2e[1].parse().expect("a number");
        assert!((249.0..=251.0).contains(&p50), "{text}");
        assert_eq!(row("order_queue_wait_small"), ["0", "-"]);
    }
}
