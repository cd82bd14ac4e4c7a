//! The order path's write-ahead journal: every accepted order is appended
//! here and made durable before its `ACK` is written, so an acknowledged
//! order survives a crash of the process (`kill -9`) and is found again at
//! start.
//!
//! * [`segment`]: segment files (header, frames with length and crc32) and
//!   the scan that stops at a torn tail;
//! * [`files`]: where segments are written ([`files::JournalFiles`], a
//!   trait so tests can inject a failing disk);
//! * [`writer`]: the journal's handle (appends from any thread) and the
//!   state it shares with the journal thread;
//! * `thread`: the journal thread (`tickfan-journal`, single writer), group
//!   commit (one write and one `fdatasync` per batch);
//! * [`disk_full`]: a full disk (`ENOSPC`): the cut back to the last
//!   durable record, refusals while full, the probe that finds room;
//! * [`lost`]: the LSNs lost to a full disk;
//! * [`fault`]: a slow-sync disk for benchmarks (`TICKFAN_FAULT_FSYNC_MS`);
//! * [`recover`]: reading the segments back at start;
//! * [`startup`]: recovery into the order path (re-queued orders, the
//!   dedup store) and the journal thread's start.
//!
//! Invariant: an LSN is reported durable only after the `fdatasync` that
//! covers its bytes returned success, and never once it was reported lost.

pub mod disk_full;
pub mod fault;
pub mod files;
pub mod lost;
pub mod recover;
pub mod segment;
pub(crate) mod startup;
mod thread;
pub mod writer;

#[cfg(test)]
pub(crate) mod tests;

use std::path::Path;
use std::thread::JoinHandle;

/// A journal in `dir` (a directory of its own, empty) with the engine's
/// segment size, no size limit and nothing retired: what benchmarks and
/// the journal generator write.
///
/// # Errors
/// The first segment cannot be created, or the thread cannot start.
pub fn start_unbounded(dir: &Path) -> std::io::Result<(writer::Journal, JoinHandle<()>)> {
    let segment_bytes = startup::SEGMENT_BYTES;
    writer::Journal::start(
        Box::new(files::DirFiles {
            dir: dir.to_path_buf(),
            reserve: segment_bytes,
        }),
        writer::JournalLimits {
            max_bytes: u64::MAX,
            segment_bytes,
            retain_ns: u64::MAX,
        },
        1,
        Vec::new(),
        Box::new(|| {}),
    )
}
