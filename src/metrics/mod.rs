//! Telemetry: a fixed registry of counters and gauges, per-thread latency
//! histograms merged by one reporter, and the reports built from them.
//!
//! Each hot thread records into histograms it owns (no shared lock) and hands
//! them to the reporter at interval boundaries; counters are atomics with a
//! single writer each.

pub mod alerts;
pub mod counters;
pub mod hlog;
pub mod intervals;
pub mod order_counters;
pub mod recorder;
pub mod report;
pub mod reporter;
pub mod stage;

pub use counters::{Counters, CountersSnapshot};
pub use recorder::StageRecorder;
pub use report::{FinalReport, StageSummary};
pub use stage::Stage;
