//! Settings of the order path, validated: part of [`crate::config::Config`],
//! built from the flags in `crate::cli::order_args`.

use std::time::Duration;

use crate::bridge::spec::SimSpec;
use crate::error::ConfigError;
use crate::model::lane::Lane;
use crate::model::units::Lots;
use crate::retry::Backoff;

/// Everything the order path needs.
///
/// Over 15 fields because it is flat on purpose: one field per order flag,
/// validated once where the flags are parsed, so a flag's name finds its
/// field and the `/config` dump lists each flag once.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OrderConfig {
    /// Orders waiting for a worker, at most; more get `SYSTEM_BUSY`.
    pub queue_capacity: usize,
    /// Small-lane worker threads (each runs one bridge attempt at a time);
    /// the lane's minimum when `workers_max` is set.
    pub workers: usize,
    /// Most small-lane workers (`--order-workers-max`); `None`: exactly `workers`.
    pub workers_max: Option<usize>,
    /// The retry policy.
    pub retry: Backoff,
    /// Orders waiting for a retry, at most; a transient failure past it is
    /// dead-lettered (`retry_queue_full`).
    pub retry_queue_capacity: usize,
    /// How long a client order id is remembered after acceptance.
    pub dedup_retention: Duration,
    /// Most ids remembered; past it new orders get `SYSTEM_BUSY`.
    pub dedup_capacity: usize,
    /// Longest order line, bytes.
    pub max_line_len: usize,
    /// The simulated venues, side by side.
    pub bridges: Vec<SimSpec>,
    /// Lanes: routing threshold, chunking (see `order::lanes::routing`).
    pub lanes: LaneConfig,
    /// Large-lane worker threads (`workers` is the small lane's; in shared
    /// mode one lane has both); the lane's minimum when `large_workers_max` is set.
    pub large_workers: usize,
    /// Most large-lane workers (`--large-workers-max`); `None`: exactly `large_workers`.
    pub large_workers_max: Option<usize>,
    /// A lane's workers idle this long beyond its minimum are retired (`--order-worker-idle`).
    pub worker_idle: Duration,
    /// Completion-time target of an order (`--order-slo`): the capacity
    /// view's drain time is held against it (`order_drain_over_slo`), and a
    /// queued order older than a quarter of it adds a worker.
    pub slo: Duration,
    /// Large orders waiting for a large-lane worker, at most.
    pub large_queue_capacity: usize,
    /// A fill gap open this long is skipped.
    pub gap_timeout: Duration,
    /// Period of the gap timer.
    pub gap_tick: Duration,
    /// Early fills held per order (per chunk of a large order), at most.
    pub hold_per_order: usize,
    /// Early fills held in all, at most.
    pub hold_total: usize,
    /// Orders (`NEW`, `REPLAY`) per second per connection, with a burst of
    /// as many (0 = no limit); over it `SYSTEM_BUSY rate_limited`.
    pub max_order_rate: u32,
    /// At shutdown, how long accepted orders get to end normally before the
    /// ones not yet at a bridge are dead-lettered (`shutdown`).
    pub shutdown_deadline: Duration,
    /// How long one bridge call may go unanswered before it is abandoned
    /// and the order retried on the next bridge (`order::venue`, its lease).
    pub bridge_lease: Duration,
    /// Directory for the order journal and the dead-letter file (created
    /// when missing).
    pub data_dir: std::path::PathBuf,
    /// Write every accepted order to the journal before its `ACK`
    /// (`--no-journal` turns it off: orders are lost on a crash).
    pub journal: bool,
    /// Most bytes of journal segments on disk (`--journal-max-bytes`).
    pub journal_max_bytes: u64,
    /// Share of a lane's workers due retries may hold while new orders
    /// wait (`--retry-share`, 0 < share ≤ 1; 1: no quota).
    pub retry_share: f64,
    /// Start with the order kill switch on (`--start-halted`).
    pub start_halted: bool,
    /// Most (account, symbol) keys with an order not ended (`--acct-keys`;
    /// past it a `NEW` of a new key gets `SYSTEM_BUSY acct_keys_full`).
    pub acct_keys: usize,
}

impl Default for OrderConfig {
    fn default() -> Self {
        OrderConfig {
            queue_capacity: 10_000,
            workers: 4,
            workers_max: None,
            retry: Backoff::default(),
            retry_queue_capacity: 10_000,
            dedup_retention: Duration::from_secs(300),
            dedup_capacity: 1_000_000,
            max_line_len: 256,
            bridges: vec![SimSpec::named("sim1"), SimSpec::named("sim2")],
            lanes: LaneConfig::default(),
            large_workers: 2,
            large_workers_max: None,
            worker_idle: Duration::from_secs(3),
            slo: Duration::from_secs(1),
            large_queue_capacity: 1_000,
            gap_timeout: Duration::from_millis(200),
            gap_tick: Duration::from_millis(50),
            hold_per_order: 64,
            hold_total: 65_536,
            max_order_rate: 0,
            shutdown_deadline: Duration::from_secs(5),
            bridge_lease: Duration::from_secs(10),
            data_dir: std::path::PathBuf::from("tickfan-data"),
            journal: true,
            journal_max_bytes: 1 << 30,
            retry_share: 0.5,
            start_halted: false,
            acct_keys: 65_536,
        }
    }
}

impl OrderConfig {
    /// Worker threads per lane (small, large) as `(min, max)`, by the lane
    /// mode (shared: one lane has both lanes' workers).
    pub fn lane_workers(&self) -> [(usize, usize); 2] {
        let small = (self.workers, self.workers_max.unwrap_or(self.workers));
        let large = (
            self.large_workers,
            self.large_workers_max.unwrap_or(self.large_workers),
        );
        match self.lanes.mode {
            LaneMode::Split => [small, large],
            LaneMode::Shared => [(small.0 + large.0, small.1 + large.1), (0, 0)],
        }
    }

    /// The fill sequencer's settings.
    pub fn sequencer(&self) -> SequencerConfig {
        SequencerConfig {
            max_held_per_order: self.hold_per_order,
            max_held_total: self.hold_total,
            gap_timeout_ns: self.gap_timeout.as_nanos() as u64,
        }
    }

    /// Checks every value.
    ///
    /// # Errors
    /// The first invalid value, naming its flag.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = ConfigError::check_range;
        range(
            "--order-queue-capacity",
            self.queue_capacity as u64,
            1,
            10_000_000,
        )?;
        range("--order-workers", self.workers as u64, 1, 256)?;
        range(
            "--retry-queue-capacity",
            self.retry_queue_capacity as u64,
            1,
            10_000_000,
        )?;
        range(
            "--dedup-capacity",
            self.dedup_capacity as u64,
            1,
            10_000_000,
        )?;
        range("--order-max-line-len", self.max_line_len as u64, 64, 65_536)?;
        range("--retry-attempts", u64::from(self.retry.retries), 0, 100)?;
        range("--large-workers", self.large_workers as u64, 1, 256)?;
        for (flag, min, max) in [
            ("--order-workers-max", self.workers, self.workers_max),
            (
                "--large-workers-max",
                self.large_workers,
                self.large_workers_max,
            ),
        ] {
            let Some(max) = max else { continue };
            range(flag, max as u64, 1, 256)?;
            if min > max {
                return Err(ConfigError::Invalid {
                    flag,
                    why: format!(
                        "{max} is below the lane's minimum {min} (min must not exceed max)"
                    ),
                });
            }
        }
        if !(self.retry_share > 0.0 && self.retry_share <= 1.0) {
            return Err(ConfigError::Invalid {
                flag: "--retry-share",
                why: format!("{} is not a share in (0, 1]", self.retry_share),
            });
        }
        range(
            "--large-queue-capacity",
            self.large_queue_capacity as u64,
            1,
            10_000_000,
        )?;
        range("--max-chunks", u64::from(self.lanes.max_chunks), 1, 1_000)?;
        range("--acct-keys", self.acct_keys as u64, 1, 10_000_000)?;
        range(
            "--fill-hold-per-order",
            self.hold_per_order as u64,
            1,
            100_000,
        )?;
        range("--fill-hold-total", self.hold_total as u64, 1, 100_000_000)?;
        range(
            "--journal-max-bytes",
            self.journal_max_bytes,
            1 << 16,
            1 << 50,
        )?;
        range(
            "--max-order-rate",
            u64::from(self.max_order_rate),
            0,
            1_000_000,
        )?;
        let invalid = |flag, why: &str| {
            Err(ConfigError::Invalid {
                flag,
                why: why.into(),
            })
        };
        if self.retry.base.is_zero() {
            return invalid("--retry-base", "must be positive");
        }
        if self.retry.cap < self.retry.base {
            return invalid("--retry-cap", "must be at least --retry-base");
        }
        if self.retry.cap > Duration::from_secs(3600) {
            return invalid("--retry-cap", "must be at most 1h");
        }
        if self.shutdown_deadline > Duration::from_secs(3600) {
            return invalid("--shutdown-deadline", "must be at most 1h");
        }
        if self.bridge_lease < Duration::from_millis(1)
            || self.bridge_lease > Duration::from_secs(3600)
        {
            return invalid("--bridge-lease", "must be between 1ms and 1h");
        }
        if self.worker_idle < Duration::from_millis(10)
            || self.worker_idle > Duration::from_secs(3600)
        {
            return invalid("--order-worker-idle", "must be between 10ms and 1h");
        }
        if self.slo < Duration::from_millis(1) || self.slo > Duration::from_secs(3600) {
            return invalid("--order-slo", "must be between 1ms and 1h");
        }
        if self.data_dir.as_os_str().is_empty() {
            return invalid("--data-dir", "must not be empty");
        }
        if self.dedup_retention.is_zero() {
            return invalid("--dedup-retention", "must be positive");
        }
        if self.lanes.threshold.0 == 0 {
            return invalid("--large-threshold", "must be positive");
        }
        if self.lanes.chunk.0 == 0 {
            return invalid("--chunk-lots", "must be positive");
        }
        if self.gap_timeout.is_zero() {
            return invalid("--gap-timeout", "must be positive");
        }
        if self.gap_tick.is_zero() || self.gap_tick > Duration::from_secs(10) {
            return invalid("--gap-tick", "must be positive and at most 10s");
        }
        if self.bridges.is_empty() {
            return invalid("--bridge", "at least one bridge is needed");
        }
        let mut names: Vec<&str> = self.bridges.iter().map(|b| b.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return invalid("--bridge", "bridge names must differ");
        }
        let mut logs: Vec<_> = self
            .bridges
            .iter()
            .filter_map(|b| b.exec_log.as_ref())
            .collect();
        logs.sort_unstable();
        if logs.windows(2).any(|w| w[0] == w[1]) {
            return invalid(
                "--bridge",
                "exec_log files must differ (one record per venue)",
            );
        }
        Ok(())
    }
}

/// One lane or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LaneMode {
    /// Small and large orders in separate lanes; large ones chunked.
    Split,
    /// One lane for every order, executed whole (the baseline).
    Shared,
}

/// How orders are routed and split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LaneConfig {
    /// Split or shared.
    pub mode: LaneMode,
    /// Orders above this go to the large lane.
    pub threshold: Lots,
    /// Target size of a chunk.
    pub chunk: Lots,
    /// Most chunks per order (a bigger order gets bigger chunks).
    pub max_chunks: u32,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            mode: LaneMode::Split,
            threshold: Lots(100 * 100),
            chunk: Lots(100 * 100),
            max_chunks: 16,
        }
    }
}

impl LaneConfig {
    /// The lane of an order of `qty`.
    pub fn lane_of(&self, qty: Lots) -> Lane {
        match self.mode {
            LaneMode::Split if qty > self.threshold => Lane::Large,
            _ => Lane::Small,
        }
    }
}

/// The fill sequencer's bounds and timing (`order/fills/sequencer.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequencerConfig {
    /// Most early fills held for one order.
    pub max_held_per_order: usize,
    /// Most early fills held over all orders.
    pub max_held_total: usize,
    /// A gap open this long is skipped at the next tick.
    pub gap_timeout_ns: u64,
}

impl Default for SequencerConfig {
    fn default() -> Self {
        SequencerConfig {
            max_held_per_order: 64,
            max_held_total: 65_536,
            gap_timeout_ns: 200_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Jitter;

    #[test]
    fn defaults_are_valid() {
        OrderConfig::default().validate().unwrap();
        let b = OrderConfig::default().retry;
        assert_eq!(
            (b.base, b.retries, b.jitter),
            (Duration::from_millis(100), 4, Jitter::Full)
        );
    }

    #[test]
    fn bad_values_name_their_flag() {
        let mut c = OrderConfig {
            queue_capacity: 0,
            ..OrderConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--order-queue-capacity"));
        c.queue_capacity = 5;
        c.retry.cap = Duration::from_millis(1);
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--retry-cap"));
        c.retry.cap = Duration::from_secs(1);
        c.bridges = vec![SimSpec::named("a"), SimSpec::named("a")];
        assert!(c.validate().unwrap_err().to_string().contains("--bridge"));
        c.bridges = vec![SimSpec::named("a")];
        c.max_order_rate = 2_000_000;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--max-order-rate"));
        c.max_order_rate = 100;
        c.shutdown_deadline = Duration::from_secs(7200);
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--shutdown-deadline"));
        c.shutdown_deadline = Duration::from_secs(5);
        c.bridge_lease = Duration::ZERO;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--bridge-lease"));
        c.bridge_lease = Duration::from_secs(10);
        let logged = |name: &str| SimSpec {
            exec_log: Some("venue.log".into()),
            ..SimSpec::named(name)
        };
        c.bridges = vec![logged("a"), logged("b")];
        assert!(c.validate().unwrap_err().to_string().contains("exec_log"));
        c.bridges = vec![SimSpec::named("a")];
        c.workers = 8;
        c.workers_max = Some(4);
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("--order-workers-max") && e.contains("min"),
            "{e}"
        );
        c.workers_max = Some(16);
        c.validate().unwrap();
        assert_eq!(c.lane_workers(), [(8, 16), (2, 2)]);
        c.slo = Duration::ZERO;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--order-slo"));
    }
}
