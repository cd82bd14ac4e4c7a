//! The next segment, written full of zeros ahead of need, off the commit
//! path.
//!
//! Why: an `fdatasync` after writes into blocks that were never written
//! (a growing file, or `fallocate`'s *unwritten* extents) commits metadata
//! too; one into blocks already written flushes data only (this project's
//! VM disk: p99 0.2 ms against 1 ms and more). Writing the zeros in the
//! commit path costs a batch about 4 ms per MiB of zeros, which is what
//! pushed the ACK p99 past 1 ms at 10k orders/s. So a helper thread
//! (`tickfan-journal-spare`, one per segment, not per order) writes the
//! next segment's zeros into a spare file and syncs them, paced so its
//! writes do not crowd the journal's own syncs; the journal thread takes
//! the spare when it rolls (a rename and a directory sync).
//!
//! Invariants: a spare is only used once it is completely written and
//! synced; a spare that failed (`ENOSPC`, …) is logged and the roll falls
//! back to a segment zeroed as it is written. A spare left by a crash has a
//! name the recovery scan ignores, and is overwritten by the next one. Disk:
//! one spare segment beside the journal's segments.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sys::fs::write_all_at;

/// The spare's file name (never a segment name: the scan ignores it).
pub(crate) const SPARE_NAME: &str = "segment-next.tmp";

/// Zeros written per `write` and made durable per `fdatasync`.
const STEP: u64 = 1 << 20;

/// Time budget per [`STEP`]: at most 64 MiB/s of zeros, so a 64 MiB spare
/// takes about a second and a journal sync waits behind at most one step.
const STEP_TIME: Duration = Duration::from_millis(16);

/// Writes `len` bytes of zeros into `file` from offset 0 and syncs them,
/// `pace` between steps (zero for a segment needed now).
pub(crate) fn zero_fill(file: &File, len: u64, pace: Duration) -> io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut at = 0;
    while at < len {
        let started = Instant::now();
        let end = (at + STEP).min(len);
        while at < end {
            let n = (end - at).min(ZEROS.len() as u64) as usize;
            write_all_at(file, &ZEROS[..n], at)?;
            at += n as u64;
        }
        file.sync_data()?;
        // Pacing, not synchronisation: the spare is only a head start.
        if let Some(rest) = pace.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    Ok(())
}

/// Prepares one spare at a time in the background.
#[derive(Debug)]
pub(crate) struct SpareMaker {
    dir: PathBuf,
    len: u64,
    job: Option<JoinHandle<io::Result<File>>>,
    /// A spare was asked for at least once.
    started: bool,
}

impl SpareMaker {
    pub(crate) fn new(dir: &Path, len: u64) -> Self {
        SpareMaker {
            dir: dir.to_path_buf(),
            len,
            job: None,
            started: false,
        }
    }

    /// The spare's path.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(SPARE_NAME)
    }

    /// Starts preparing a spare unless one is being prepared or ready.
    pub(crate) fn start(&mut self) {
        if self.job.is_some() {
            return;
        }
        self.started = true;
        let (path, len) = (self.path(), self.len);
        match std::thread::Builder::new()
            .name("tickfan-journal-spare".into())
            .spawn(move || prepare(&path, len))
        {
            Ok(h) => self.job = Some(h),
            Err(e) => log::warn!("journal: cannot start preparing a spare segment: {e}"),
        }
    }

    /// True until a spare is first asked for (the first segment).
    pub(crate) fn never_started(&self) -> bool {
        !self.started
    }

    /// True once the spare being prepared is written (or failed).
    #[cfg(test)]
    pub(crate) fn is_finished(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.is_finished())
    }

    /// The spare, when it is completely written and synced; `None` while
    /// it is still being written (it keeps going) or when it failed.
    pub(crate) fn take_ready(&mut self) -> Option<File> {
        if !self.job.as_ref()?.is_finished() {
            return None;
        }
        match self.job.take()?.join() {
            Ok(Ok(f)) => Some(f),
            Ok(Err(e)) => {
                log::warn!("journal: spare segment failed ({e}); segments are zeroed as written");
                None
            }
            Err(_) => {
                log::warn!("journal: the spare segment's thread panicked");
                None
            }
        }
    }
}

fn prepare(path: &Path, len: u64) -> io::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    zero_fill(&f, len, STEP_TIME)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spare_is_all_zeros_of_its_length_once_taken() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = SpareMaker::new(dir.path(), 3 * STEP + 5);
        assert!(m.never_started());
        m.start();
        assert!(!m.never_started());
        let deadline = Instant::now() + Duration::from_secs(30);
        let f = loop {
            if let Some(f) = m.take_ready() {
                break f;
            }
            assert!(Instant::now() < deadline, "spare never finished");
            std::thread::yield_now();
        };
        drop(f);
        let bytes = std::fs::read(m.path()).unwrap();
        assert_eq!(bytes.len() as u64, 3 * STEP + 5);
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(super::super::segment::parse_file_name(SPARE_NAME), None);
    }

    #[test]
    fn a_spare_that_cannot_be_written_is_reported_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        // Its directory does not exist: the open fails.
        let mut m = SpareMaker::new(&dir.path().join("missing"), STEP);
        m.start();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !m.job.as_ref().unwrap().is_finished() {
            assert!(Instant::now() < deadline, "spare never finished");
            std::thread::yield_now();
        }
        assert!(m.take_ready().is_none());
        assert!(m.job.is_none(), "a failed spare can be asked for again");
        assert!(
            !m.never_started(),
            "a failed spare is not the first segment"
        );
    }
}
