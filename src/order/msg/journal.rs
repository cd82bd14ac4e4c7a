//! The journal as its appenders see it. The gateway appends `Accepted`,
//! `Terminal`, `Replay` and `FillApplied` records and holds an order's
//! `ACK` until its record is durable; the lane workers append
//! `AttemptSent` and may wait for it. The floor owns the trait; the
//! journal's handle (`order/journal/writer.rs`) implements it, and the
//! wiring hands it to both as a [`JournalHandle`].
//!
//! Thread safety: every method may be called from any thread at once; the
//! journal thread is the single writer of what they read.

use std::fmt::Debug;
use std::sync::Arc;

use crate::metrics::order_counters::OrderCounters;

use super::record::Record;

/// Why an append was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The journal is at `--journal-max-bytes` (`SYSTEM_BUSY journal_full`).
    #[error("journal full")]
    Full,
    /// The journal's disk is full (`SYSTEM_BUSY journal_full`); appends are
    /// taken again once a probe finds room (`order/journal/disk_full.rs`).
    #[error("journal disk full")]
    DiskFull,
    /// A write or sync failed earlier (`SYSTEM_BUSY journal_error`).
    #[error("journal failed: {0}")]
    Failed(String),
    /// The journal is stopping.
    #[error("journal stopped")]
    Stopped,
}

/// What became of an appended record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Synced: it survives a crash.
    Durable,
    /// Not synced yet.
    Pending,
    /// It will never be durable (and was never read back): why.
    Lost(Loss),
}

/// Why a record will never be durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Its batch met a full disk and was cut off (`journal_full`).
    DiskFull,
    /// A write or sync failed for good (`journal_error`).
    Failed,
}

/// The journal's appending side (see the module docs).
pub(crate) trait JournalLink: Debug + Send + Sync {
    /// Appends `rec`; its LSN, durable later (see [`outcome`](Self::outcome)).
    ///
    /// # Errors
    /// [`AppendError::Full`] at `--journal-max-bytes`,
    /// [`AppendError::DiskFull`] while the disk is full,
    /// [`AppendError::Failed`] after a disk error, [`AppendError::Stopped`]
    /// once the journal stops.
    fn append(&self, rec: &Record) -> Result<u64, AppendError>;
    /// Appends `rec` without a commit of its own: it rides with the next
    /// [`append`](Self::append)'s commit, or is committed once it has
    /// waited [`LAZY_WITHIN`] (a `wait_durable` on it commits it at once).
    /// For records nobody waits for (fills applied, ends, a first attempt),
    /// so an `ACK` does not wait behind a sync started for them.
    ///
    /// # Errors
    /// As [`append`](Self::append).
    fn append_lazy(&self, rec: &Record) -> Result<u64, AppendError> {
        self.append(rec)
    }

    /// What became of the record appended as `lsn`.
    fn outcome(&self, lsn: u64) -> Durability;

    /// Blocks until `lsn` is durable (`true`) or never will be (`false`).
    fn wait_durable(&self, lsn: u64) -> bool;

    /// The LSN of the oldest order not ended (`u64::MAX`: none), for
    /// retirement (the gateway's, once per turn, after its own appends).
    fn set_oldest_live(&self, lsn: u64);

    /// True while the disk is full: appends are refused until a probe
    /// finds room.
    fn is_disk_full(&self) -> bool;

    /// When the last commit ended, on the engine's measurement clock (0:
    /// commits are not measured): the start of stage `ack_release`.
    fn durable_at_ns(&self) -> u64 {
        0
    }

    /// Writes the journal's gauges (`journal_bytes`, `journal_max_bytes`,
    /// `journal_disk_full`, `journal_failed`,
    /// `journal_disk_full_episodes`). Single writer of those gauges: the
    /// gateway thread.
    fn publish_gauges(&self, o: &OrderCounters);
}

/// The longest a record appended with [`JournalLink::append_lazy`] waits
/// for a commit to ride with. Bounds what a crash can take of those
/// records besides the commit in progress (each such loss is replayed
/// idempotently at recovery, see docs/src/decisions.md).
pub const LAZY_WITHIN: std::time::Duration = std::time::Duration::from_millis(5);

/// The journal as the gateway and the workers hold it (cloned per worker).
pub(crate) type JournalHandle = Arc<dyn JournalLink>;
