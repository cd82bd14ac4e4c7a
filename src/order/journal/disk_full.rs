//! A full disk under the journal: how it is recognised, the state the
//! journal is in meanwhile, and the probe that finds room again.
//!
//! A write or sync that fails with `ENOSPC` (or `EDQUOT`) is not a broken
//! disk: the journal cuts the segment back to its last durable record
//! ([`super::files::JournalFile::truncate`]), so nothing of the failed
//! batch can be read back at a restart, and goes on *full*:
//!
//! * the orders whose `Accepted` record was in that batch are refused
//!   (`SYSTEM_BUSY journal_full`), never `ACK`ed; their LSNs are *lost*
//!   ([`super::lost`]);
//! * every append is refused at once while full: new orders get
//!   `SYSTEM_BUSY journal_full`; an attempt goes out unrecorded and a
//!   terminal or fill record is not written, as at `--journal-max-bytes`;
//! * every [`PROBE_EVERY`] on the engine clock the journal thread writes
//!   [`PROBE_BYTES`] of zeros after the last record, syncs them and cuts
//!   them off again ([`probe`]); once that succeeds the disk has room for
//!   a burst of records and appends are taken again, with no restart.
//!
//! A failed sync is safe to recover from *here* because nothing the failed
//! batch wrote is kept: after the cut (itself synced) the file is exactly
//! what earlier successful syncs made durable. Any other error (`EIO`, a
//! cut that fails) stops the journal for good (`journal_error`), as before:
//! after a failed `fsync` the kernel may have dropped dirty pages, so a
//! later success proves nothing about them (see `docs/decisions.md`).

use std::io;
use std::time::Duration;

use super::files::JournalFile;

/// How often a full journal probes for room, on the engine clock.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Bytes a probe writes and syncs (then cuts off): room for a burst of
/// records, not just the next one.
pub const PROBE_BYTES: usize = 1 << 20;

/// How long the journal thread sleeps between looks at the engine clock
/// while full (real time; an append refused after the probe is due wakes
/// it at once, so a simulated clock needs no real wait).
pub(super) const FULL_POLL: Duration = Duration::from_millis(50);

/// Whether `e` says the file system (or the user's quota) is full.
pub fn is_disk_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// The journal while its disk is full.
#[derive(Debug, Clone)]
pub(super) struct DiskFull {
    /// The OS error that started it (for the log).
    pub error: String,
    /// When it started (engine clock).
    pub since_ns: u64,
    /// When the next probe is due (engine clock).
    pub next_probe_ns: u64,
}

impl DiskFull {
    /// A disk found full at `now_ns` by `error`.
    pub(super) fn new(error: &io::Error, now_ns: u64) -> Self {
        DiskFull {
            error: error.to_string(),
            since_ns: now_ns,
            next_probe_ns: now_ns.saturating_add(PROBE_EVERY.as_nanos() as u64),
        }
    }

    /// Whether a probe is due at `now_ns`.
    pub(super) fn probe_due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_probe_ns
    }
}

/// What a probe found.
#[derive(Debug)]
pub(super) enum Probe {
    /// [`PROBE_BYTES`] were written and synced (and cut off again).
    Room,
    /// Still full (the error); the file is cut back, the next probe later.
    Full(io::Error),
    /// Another error, or the cut failed: the journal stops for good.
    Broken(io::Error),
}

/// Writes [`PROBE_BYTES`] of zeros after the `len` bytes of records `file`
/// holds, syncs them, and cuts the file back to `len` whatever happened.
/// Zeros past the records read as the segment's clean end, so even a crash
/// before the cut leaves nothing a restart would replay.
pub(super) fn probe(file: &mut dyn JournalFile, len: u64) -> Probe {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut wrote = Ok(());
    for _ in 0..PROBE_BYTES / ZEROS.len() {
        wrote = file.write_all(&ZEROS);
        if wrote.is_err() {
            break;
        }
    }
    let synced = wrote.and_then(|()| file.sync_data());
    if let Err(e) = file.truncate(len) {
        return Probe::Broken(e);
    }
    match synced {
        Ok(()) => Probe::Room,
        Err(e) if is_disk_full(&e) => Probe::Full(e),
        Err(e) => Probe::Broken(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enospc_and_edquot_are_a_full_disk_eio_is_not() {
        assert!(is_disk_full(&io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(is_disk_full(&io::Error::from_raw_os_error(libc::EDQUOT)));
        assert!(is_disk_full(&io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!is_disk_full(&io::Error::from_raw_os_error(libc::EIO)));
    }

    #[test]
    fn probes_are_due_every_probe_interval_on_the_engine_clock() {
        let f = DiskFull::new(&io::Error::from(io::ErrorKind::StorageFull), 5);
        let every = PROBE_EVERY.as_nanos() as u64;
        assert!(!f.probe_due(5));
        assert!(!f.probe_due(5 + every - 1));
        assert!(f.probe_due(5 + every));
    }
}
