//! Telemetry: a fixed registry of counters and gauges, per-thread latency
//! histograms merged by one reporter, and the reports built from them.
//!
//! Each hot thread records into histograms it owns (no shared lock) and hands
//! them to the reporter at interval boundaries; counters are atomics with a
//! single writer each, declared once per group in a counter table
//! ([`table`]: how to add one).

pub mod alerts;
pub(crate) mod capacity_counters;

pub mod cluster_counters;
pub(crate) mod counters;
pub mod hlog;
pub(crate) mod intervals;
pub(crate) mod order_counters;
pub(crate) mod recorder;
pub mod report;
pub(crate) mod reporter;
pub(crate) mod stage;
pub mod table;
pub mod tls_counters;

pub(crate) use counters::Counters;
pub use counters::CountersSnapshot;
pub(crate) use recorder::StageRecorder;
pub(crate) use report::FinalReport;
pub use stage::Stage;
