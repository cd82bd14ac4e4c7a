//! The journal end to end on a real directory: append, group commit,
//! recovery, the size limit and an injected failing disk.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::files::{DirFiles, JournalFile, JournalFiles};
use super::record::tests::samples;
use super::record::Record;
use super::recover::recover;
use super::writer::{AppendError, Journal, JournalLimits};

const LIMITS: JournalLimits = JournalLimits {
    max_bytes: 1 << 30,
    segment_bytes: 4096,
    retain_ns: u64::MAX,
};

fn start(dir: &std::path::Path, limits: JournalLimits) -> (Journal, std::thread::JoinHandle<()>) {
    let mut seen = Vec::new();
    let r = recover(dir, |rec| seen.push(rec)).unwrap();
    Journal::start(
        Box::new(DirFiles {
            dir: dir.to_path_buf(),
            reserve: limits.segment_bytes,
        }),
        limits,
        r.next_segment(),
        r.segments,
        Box::new(|| {}),
    )
    .unwrap()
}

#[test]
fn appended_records_are_durable_then_recovered_in_order_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Record> = samples().into_iter().cycle().take(500).collect();
    let (j, h) = start(dir.path(), LIMITS);
    let mut last = 0;
    for chunk in records.chunks(50) {
        // Waiting for each chunk makes several batches (a batch is never
        // split across segments).
        for r in chunk {
            last = j.append(r).unwrap();
        }
        assert!(j.wait_durable(last));
    }
    assert_eq!(last, 500);
    assert!(j.durable_lsn() >= last);
    j.stop();
    h.join().unwrap();
    let mut got = Vec::new();
    let r = recover(dir.path(), |rec| got.push(rec)).unwrap();
    assert_eq!(got, records);
    assert!(
        r.segments.len() > 2,
        "small segments roll: {:?}",
        r.segments
    );
    // A second run appends after the first and both are read back.
    let (j, h) = start(dir.path(), LIMITS);
    let lsn = j.append(&records[0]).unwrap();
    assert!(j.wait_durable(lsn));
    j.stop();
    h.join().unwrap();
    let mut n = 0;
    recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!(n, 501);
}

#[test]
fn segments_are_retired_once_their_orders_ended_and_the_retention_passed() {
    let dir = tempfile::tempdir().unwrap();
    let files = |d: &std::path::Path| std::fs::read_dir(d).unwrap().count();
    for (retain_ns, oldest_live, kept_all) in [
        (0, 0, true),
        (u64::MAX, u64::MAX, true),
        (0, u64::MAX, false),
    ] {
        let sub = dir.path().join(format!("{retain_ns}-{oldest_live}"));
        let (j, h) = start(
            &sub,
            JournalLimits {
                retain_ns,
                ..LIMITS
            },
        );
        j.set_oldest_live(oldest_live);
        let rec = samples().remove(0);
        for _ in 0..10 {
            let mut last = 0;
            for _ in 0..50 {
                last = j.append(&rec).unwrap();
            }
            assert!(j.wait_durable(last));
        }
        j.stop();
        h.join().unwrap();
        if kept_all {
            assert!(files(&sub) > 3, "every segment kept");
            assert_eq!(j.segment_count(), files(&sub));
        } else {
            // Only the segment being written is left; the bytes count its
            // records, and its file is that long or, reserved ahead of the
            // writes, the segment size.
            assert_eq!((files(&sub), j.segment_count()), (1, 1));
            let file = std::fs::read_dir(&sub).unwrap().next().unwrap().unwrap();
            let len = file.metadata().unwrap().len();
            assert!(
                len == j.used_bytes() || (len == LIMITS.segment_bytes && j.used_bytes() <= len),
                "file {len} bytes, counted {}",
                j.used_bytes()
            );

            // 500 records were written; at most the last commit (a batch
            // of at most 50) is left.
            let mut n = 0;
            recover(&sub, |_| n += 1).unwrap();
            assert!(n > 0 && n <= 50, "{n} records left");
        }
    }
}

#[test]
fn a_torn_tail_on_disk_is_cut_and_the_journal_continues() {
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = start(dir.path(), LIMITS);
    let rec = samples().remove(0);
    let mut lsn = 0;
    for _ in 0..3 {
        lsn = j.append(&rec).unwrap();
    }
    assert!(j.wait_durable(lsn));
    j.stop();
    h.join().unwrap();
    let seg = dir.path().join(super::segment::file_name(1));
    // The last record loses its last 3 bytes (the segment's file may be
    // longer than its records: reserved space reads as zeros after them).
    let bytes = std::fs::read(&seg).unwrap();
    let frames_end = super::segment::scan(&bytes, 1, |_| {}).unwrap().valid_len;
    assert!(bytes[frames_end..].iter().all(|&b| b == 0));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(frames_end as u64 - 3)
        .unwrap();
    let mut n = 0;
    let r = recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!((n, r.torn_bytes > 0), (2, true));
    // Cut for good: the next recovery (with a newer segment after it) is clean.
    let (j, h) = start(dir.path(), LIMITS);
    assert!(j.wait_durable(j.append(&rec).unwrap()));
    j.stop();
    h.join().unwrap();
    let mut n = 0;
    let r = recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!((n, r.torn_bytes), (3, 0));
}

#[test]
fn group_commit_syncs_once_per_batch() {
    let syncs = Arc::new(AtomicUsize::new(0));
    let files = Injected {
        fail: Arc::new(AtomicBool::new(false)),
        syncs: Arc::clone(&syncs),
        kind: io::ErrorKind::Other,
    };
    let (j, h) = Journal::start(Box::new(files), LIMITS, 1, Vec::new(), Box::new(|| {})).unwrap();
    let rec = samples().remove(0);
    let n = 20_000;
    let mut last = 0;
    for _ in 0..n {
        last = j.append(&rec).unwrap();
    }
    assert!(j.wait_durable(last));
    j.stop();
    h.join().unwrap();
    let s = syncs.load(Ordering::Relaxed);
    // One sync for the header, then at most one per batch; appends far
    // outrun syncs, so batches hold many records each.
    assert!(s >= 2 && s < n / 2, "{s} syncs for {n} records");
}

#[test]
fn the_size_limit_refuses_appends_with_full() {
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = start(
        dir.path(),
        JournalLimits {
            max_bytes: 1_000,
            segment_bytes: 4096,
            retain_ns: u64::MAX,
        },
    );
    let rec = samples().remove(0);
    let mut accepted = 0;
    let err = loop {
        match j.append(&rec) {
            Ok(lsn) => {
                accepted = lsn;
                assert!(j.used_bytes() <= 1_000);
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err, AppendError::Full);
    assert!(accepted > 0);
    assert!(j.wait_durable(accepted));
    j.stop();
    h.join().unwrap();
    let mut n = 0;
    recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!(n, accepted);
}

#[test]
fn a_failing_disk_never_reports_durable_and_refuses_new_appends() {
    for kind in [io::ErrorKind::StorageFull, io::ErrorKind::Other] {
        let fail = Arc::new(AtomicBool::new(false));
        let wakes = Arc::new(AtomicUsize::new(0));
        let files = Injected {
            fail: Arc::clone(&fail),
            syncs: Arc::new(AtomicUsize::new(0)),
            kind,
        };
        let w = Arc::clone(&wakes);
        let (j, h) = Journal::start(
            Box::new(files),
            LIMITS,
            1,
            Vec::new(),
            Box::new(move || {
                w.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
        let rec = samples().remove(0);
        let good = j.append(&rec).unwrap();
        assert!(j.wait_durable(good));
        fail.store(true, Ordering::Relaxed);
        let bad = j.append(&rec).unwrap();
        assert!(!j.wait_durable(bad), "{kind:?}");
        assert_eq!(j.durable_lsn(), good);
        assert_eq!(j.lost_from(), Some(good));
        assert!(matches!(j.append(&rec), Err(AppendError::Failed(_))));
        assert!(wakes.load(Ordering::Relaxed) >= 2, "the owner is woken");
        j.stop();
        h.join().unwrap();
    }
}

/// Segments in memory whose writes fail on demand (`ENOSPC`, `EIO`).
pub(crate) struct Injected {
    pub(crate) fail: Arc<AtomicBool>,
    pub(crate) syncs: Arc<AtomicUsize>,
    pub(crate) kind: io::ErrorKind,
}

struct InjectedFile {
    fail: Arc<AtomicBool>,
    syncs: Arc<AtomicUsize>,
    kind: io::ErrorKind,
}

impl JournalFiles for Injected {
    fn create(&mut self, _segment: u64) -> io::Result<Box<dyn JournalFile>> {
        Ok(Box::new(InjectedFile {
            fail: Arc::clone(&self.fail),
            syncs: Arc::clone(&self.syncs),
            kind: self.kind,
        }))
    }

    fn remove(&mut self, _segment: u64) -> io::Result<()> {
        Ok(())
    }
}

impl JournalFile for InjectedFile {
    fn write_all(&mut self, _buf: &[u8]) -> io::Result<()> {
        if self.fail.load(Ordering::Relaxed) {
            return Err(io::Error::from(self.kind));
        }
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn segments_are_written_into_reserved_space_and_recovery_trims_what_was_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = start(dir.path(), LIMITS);
    let rec = samples().remove(0);
    let mut lsn = 0;
    for _ in 0..3 {
        lsn = j.append(&rec).unwrap();
    }
    assert!(j.wait_durable(lsn));
    let seg = dir.path().join(super::segment::file_name(1));
    let bytes = std::fs::read(&seg).unwrap();
    let scan = super::segment::scan(&bytes, 1, |_| {}).unwrap();
    if bytes.len() as u64 == LIMITS.segment_bytes {
        // Reserved (fallocate): the records at the front, zeros after, a
        // clean end for the scan.
        assert!(scan.valid_len < bytes.len());
        assert_eq!(scan.torn, None);
        assert!(bytes[scan.valid_len..].iter().all(|&b| b == 0));
    } else {
        // A file system that cannot reserve: the segment grew as written.
        assert_eq!(scan.valid_len, bytes.len());
    }
    j.stop();
    h.join().unwrap();
    // Recovery reads all three and leaves the file holding only its frames
    // (the next records go to a new segment).
    let mut n = 0;
    let r = recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!((n, r.torn_bytes), (3, 0));
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        scan.valid_len as u64
    );
    assert_eq!(r.segments, vec![(1, scan.valid_len as u64)]);
}

/// Segments in memory whose writes panic on demand (a bug in the thread).
struct Panicking {
    panic: Arc<AtomicBool>,
}

struct PanickingFile {
    panic: Arc<AtomicBool>,
}

impl JournalFiles for Panicking {
    fn create(&mut self, _segment: u64) -> io::Result<Box<dyn JournalFile>> {
        Ok(Box::new(PanickingFile {
            panic: Arc::clone(&self.panic),
        }))
    }

    fn remove(&mut self, _segment: u64) -> io::Result<()> {
        Ok(())
    }
}

impl JournalFile for PanickingFile {
    fn write_all(&mut self, _buf: &[u8]) -> io::Result<()> {
        assert!(
            !self.panic.load(Ordering::Relaxed),
            "injected: the journal thread panics"
        );
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_journal_thread_that_panics_is_named_dead_and_nobody_waits_on_it_for_ever() {
    let panic = Arc::new(AtomicBool::new(false));
    let watch = Arc::new(crate::sys::watch::Watch::default());
    let (j, h) = Journal::start_watched(
        Box::new(Panicking {
            panic: Arc::clone(&panic),
        }),
        LIMITS,
        1,
        Vec::new(),
        Box::new(|| {}),
        Some(Arc::clone(&watch)),
    )
    .unwrap();
    let rec = samples().remove(0);
    let good = j.append(&rec).unwrap();
    assert!(j.wait_durable(good));
    assert_eq!(watch.fatal(), None);
    panic.store(true, Ordering::Relaxed);
    let lost = j.append(&rec).unwrap();
    // The waiter learns the record is lost (it does not hang), the thread
    // is named dead, new appends are refused, the fatal path's sync gives up.
    assert!(!j.wait_durable(lost));
    assert!(h.join().is_err(), "the thread panicked");
    let fatal = watch.fatal().expect("a dead thread");
    assert!(fatal.contains("tickfan-journal"), "{fatal}");
    assert!(matches!(j.append(&rec), Err(AppendError::Failed(_))));
    assert!(!j.sync_pending(std::time::Duration::from_secs(5)));
}

#[test]
fn sync_pending_returns_once_everything_appended_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = start(dir.path(), LIMITS);
    let rec = samples().remove(0);
    let mut last = 0;
    for _ in 0..200 {
        last = j.append(&rec).unwrap();
    }
    assert!(j.sync_pending(std::time::Duration::from_secs(60)));
    assert!(j.durable_lsn() >= last);
    j.stop();
    h.join().unwrap();
    let mut n = 0;
    recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!(n, 200);
}
