//! The journal end to end on a real directory: append, group commit,
//! recovery, the size limit and an injected failing disk.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::files::{DirFiles, JournalFile, JournalFiles};
use super::recover::recover;
use super::writer::{Journal, JournalLimits};
use crate::order::msg::journal::AppendError;
use crate::order::msg::record::tests::samples;
use crate::order::msg::record::Record;

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
    // The first record's sync is held at a gate while 19,999 more are
    // appended: they all wait in one batch, made durable by one sync.
    let gate = Arc::new(Gate::default());
    let limits = JournalLimits {
        segment_bytes: 1 << 30,
        ..LIMITS
    };
    let files = GatedFiles(Arc::clone(&gate));
    let (j, h) = Journal::start(Box::new(files), limits, 1, Vec::new(), Box::new(|| {})).unwrap();
    let rec = samples().remove(0);
    let n = 20_000;
    j.append(&rec).unwrap();
    gate.wait_for_syncs(2);
    let mut last = 0;
    for _ in 1..n {
        last = j.append(&rec).unwrap();
    }
    assert!(j.durable_lsn() < 2, "nothing past the held sync is durable");
    gate.open();
    assert!(j.wait_durable(last));
    j.stop();
    h.join().unwrap();
    assert_eq!(
        gate.syncs(),
        3,
        "the header's sync, the first record's, one for the other {}",
        n - 1
    );
}

#[test]
fn a_lazy_record_is_committed_without_an_urgent_one_and_at_once_when_waited_for() {
    // Lazy records alone start no commit of their own at once, but one
    // within LAZY_WITHIN: they become durable with nothing else appended.
    let dir = tempfile::tempdir().unwrap();
    let (j, h) = start(dir.path(), LIMITS);
    let rec = samples().remove(0);
    let a = j.append_lazy(&rec).unwrap();
    let b = j.append_lazy(&rec).unwrap();
    assert_eq!(b, a + 1, "lazy records take LSNs in append order");
    eventually("the lazy records durable", || {
        j.outcome(b) == crate::order::msg::journal::Durability::Durable
    });
    // Waited for, a lazy record is committed now (here LAZY_WITHIN is 5 ms;
    // the wait returns true either way, and must not hang).
    let c = j.append_lazy(&rec).unwrap();
    assert!(j.wait_durable(c));
    // An urgent append after lazy ones commits them with it.
    let d = j.append_lazy(&rec).unwrap();
    let e = j.append(&rec).unwrap();
    assert!(j.wait_durable(e));
    assert_eq!(
        j.outcome(d),
        crate::order::msg::journal::Durability::Durable
    );
    j.stop();
    h.join().unwrap();
    let mut n = 0;
    recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!(n, 5, "every record, lazy or not, on disk in order");
}

#[test]
fn a_batch_taken_cut_or_dropped_leaves_nothing_urgent_so_the_next_append_wakes_the_thread() {
    // An append wakes the journal thread only when nothing pending is
    // already urgent or waiting; a mark left behind by records a full disk
    // cut off would let the next append sleep until the idle tick.
    let state = || super::writer::State {
        pending: vec![1, 2, 3],
        last_lsn: 3,
        disk_bytes: 0,
        segments: Vec::new(),
        failed: None,
        full: None,
        lost: super::lost::LostRanges::default(),
        stop: false,
        urgent: true,
        pending_since: Some(std::time::Instant::now()),
        urgent_since: Some(std::time::Instant::now()),
    };
    let mut dropped = state();
    dropped.drop_pending();
    assert!(dropped.pending.is_empty());
    assert!(!dropped.urgent && dropped.pending_since.is_none() && dropped.urgent_since.is_none());
    let mut taken = state();
    let mut batch = Vec::new();
    taken.take_batch(&mut batch);
    assert_eq!(batch, [1, 2, 3]);
    assert!(taken.pending.is_empty());
    assert!(!taken.urgent && taken.pending_since.is_none());
}

/// Syncs counted, the second and later held until [`Gate::open`].
#[derive(Default)]
struct Gate {
    /// Syncs begun, and whether the gate is open.
    state: std::sync::Mutex<(usize, bool)>,
    changed: std::sync::Condvar,
}

impl Gate {
    fn syncs(&self) -> usize {
        self.state.lock().unwrap().0
    }

    /// Waits (at most a minute) until `k` syncs have begun.
    fn wait_for_syncs(&self, k: usize) {
        let st = self.state.lock().unwrap();
        let (st, timeout) = self
            .changed
            .wait_timeout_while(st, std::time::Duration::from_secs(60), |s| s.0 < k)
            .unwrap();
        assert!(!timeout.timed_out(), "{} syncs, waited for {k}", st.0);
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

struct GatedFiles(Arc<Gate>);

struct GatedFile(Arc<Gate>);

impl JournalFiles for GatedFiles {
    fn create(&mut self, _segment: u64) -> io::Result<Box<dyn JournalFile>> {
        Ok(Box::new(GatedFile(Arc::clone(&self.0))))
    }

    fn remove(&mut self, _segment: u64) -> io::Result<()> {
        Ok(())
    }
}

impl JournalFile for GatedFile {
    fn write_all(&mut self, _buf: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let mut st = self.0.state.lock().unwrap();
        st.0 += 1;
        self.0.changed.notify_all();
        if st.0 >= 2 {
            let _open = self.0.changed.wait_while(st, |s| !s.1).unwrap();
        }
        Ok(())
    }

    fn truncate(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
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
fn a_failing_or_full_disk_never_reports_durable_and_refuses_new_appends() {
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
        if kind == io::ErrorKind::StorageFull {
            // Cut back and full, not failed: refused until a probe finds room.
            assert_eq!(j.lost_from(), None);
            assert!(j.is_disk_full());
            assert_eq!(j.append(&rec), Err(AppendError::DiskFull));
        } else {
            assert_eq!(j.lost_from(), Some(good));
            assert!(matches!(j.append(&rec), Err(AppendError::Failed(_))));
        }
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

    fn truncate(&mut self, _len: u64) -> io::Result<()> {
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

    fn truncate(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_journal_thread_that_panics_is_named_dead_and_nobody_waits_on_it_for_ever() {
    let panic = Arc::new(AtomicBool::new(false));
    let watch = Arc::new(crate::sys::watch::Watch::default());
    let (j, h) = Journal::start_in(
        Box::new(Panicking {
            panic: Arc::clone(&panic),
        }),
        LIMITS,
        1,
        Vec::new(),
        super::writer::JournalEnv {
            notify: Box::new(|| {}),
            watch: Some(Arc::clone(&watch)),
            clock: Arc::new(crate::retry::SimClock::new()),
            timing: None,
        },
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

/// How a [`FullDisk`] fails its next writes and syncs.
const ROOM: u8 = 0;
/// A write puts half its bytes in the file, then fails `ENOSPC`.
const PARTIAL_WRITE: u8 = 1;
/// Writes go through, the sync fails `ENOSPC`.
const SYNC_FAILS: u8 = 2;

/// Real segments in a directory whose disk fills on demand ([`ROOM`],
/// [`PARTIAL_WRITE`], [`SYNC_FAILS`]).
struct FullDisk {
    inner: DirFiles,
    mode: Arc<std::sync::atomic::AtomicU8>,
    /// Writes and syncs failed so far.
    failures: Arc<AtomicUsize>,
}

struct FullDiskFile {
    inner: Box<dyn JournalFile>,
    mode: Arc<std::sync::atomic::AtomicU8>,
    failures: Arc<AtomicUsize>,
}

impl FullDisk {
    fn new(
        dir: &std::path::Path,
    ) -> (FullDisk, Arc<std::sync::atomic::AtomicU8>, Arc<AtomicUsize>) {
        let mode = Arc::new(std::sync::atomic::AtomicU8::new(ROOM));
        let failures = Arc::new(AtomicUsize::new(0));
        let disk = FullDisk {
            inner: DirFiles {
                dir: dir.to_path_buf(),
                reserve: LIMITS.segment_bytes,
            },
            mode: Arc::clone(&mode),
            failures: Arc::clone(&failures),
        };
        (disk, mode, failures)
    }
}

impl JournalFiles for FullDisk {
    fn create(&mut self, segment: u64) -> io::Result<Box<dyn JournalFile>> {
        Ok(Box::new(FullDiskFile {
            inner: self.inner.create(segment)?,
            mode: Arc::clone(&self.mode),
            failures: Arc::clone(&self.failures),
        }))
    }

    fn remove(&mut self, segment: u64) -> io::Result<()> {
        self.inner.remove(segment)
    }
}

impl JournalFile for FullDiskFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.mode.load(Ordering::SeqCst) == PARTIAL_WRITE {
            self.inner.write_all(&buf[..buf.len() / 2])?;
            self.failures.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.inner.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        if self.mode.load(Ordering::SeqCst) == SYNC_FAILS {
            self.failures.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.inner.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

/// Polls `cond` (the journal thread acts on its own) for up to a minute.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(std::time::Instant::now() < end, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A journal on `disk` probing on `clock`; the count of its notifications
/// (after each commit, failure and probe, its state updated).
fn start_on(
    disk: FullDisk,
    clock: &crate::retry::SimClock,
) -> (Journal, std::thread::JoinHandle<()>, Arc<AtomicUsize>) {
    let notes = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&notes);
    let (j, h) = Journal::start_in(
        Box::new(disk),
        LIMITS,
        1,
        Vec::new(),
        super::writer::JournalEnv {
            notify: Box::new(move || {
                n.fetch_add(1, Ordering::SeqCst);
            }),
            watch: None,
            clock: Arc::new(clock.clone()),
            timing: None,
        },
    )
    .unwrap();
    (j, h, notes)
}

#[test]
fn a_full_disk_cuts_the_failed_batch_refuses_until_a_probe_finds_room_then_takes_appends_again() {
    use super::disk_full::PROBE_EVERY;
    use crate::order::msg::journal::{Durability, Loss};
    for how in [PARTIAL_WRITE, SYNC_FAILS] {
        let dir = tempfile::tempdir().unwrap();
        let clock = crate::retry::SimClock::new();
        let (disk, mode, failures) = FullDisk::new(dir.path());
        let (j, h, notes) = start_on(disk, &clock);
        let rec = samples().remove(0);
        let mut good = 0;
        for _ in 0..3 {
            good = j.append(&rec).unwrap();
        }
        assert!(j.wait_durable(good));

        // The disk fills under a batch: it is cut off, its LSN lost.
        mode.store(how, Ordering::SeqCst);
        let lost = j.append(&rec).unwrap();
        assert!(!j.wait_durable(lost), "mode {how}");
        assert_eq!(j.outcome(lost), Durability::Lost(Loss::DiskFull));
        assert_eq!(j.outcome(good), Durability::Durable);
        assert!(j.is_disk_full() && !j.is_failed());
        assert_eq!(j.disk_full_episodes(), 1);
        assert_eq!(j.append(&rec), Err(AppendError::DiskFull));

        // A probe while still full finds none: still full, one episode.
        let (before, told) = (
            failures.load(Ordering::SeqCst),
            notes.load(Ordering::SeqCst),
        );
        clock.advance(PROBE_EVERY.as_nanos() as u64);
        assert_eq!(j.append(&rec), Err(AppendError::DiskFull));
        eventually("a probe met the full disk", || {
            failures.load(Ordering::SeqCst) > before && notes.load(Ordering::SeqCst) > told
        });
        assert!(j.is_disk_full());
        assert_eq!(j.disk_full_episodes(), 1);
        assert_eq!(j.append(&rec), Err(AppendError::DiskFull));

        // Room again: refused until the next probe is due, on the engine clock.
        mode.store(ROOM, Ordering::SeqCst);
        assert_eq!(j.append(&rec), Err(AppendError::DiskFull));
        clock.advance(PROBE_EVERY.as_nanos() as u64);
        let _ = j.append(&rec);
        eventually("a probe found room", || !j.is_disk_full());
        let after = j.append(&rec).unwrap();
        assert!(j.wait_durable(after));
        assert!(after > lost);
        // Later LSNs durable, the lost one stays lost.
        assert_eq!(j.outcome(lost), Durability::Lost(Loss::DiskFull));
        // Until no one can ask about it any more.
        j.set_oldest_live(lost);
        assert_eq!(j.outcome(lost), Durability::Lost(Loss::DiskFull));
        j.stop();
        h.join().unwrap();

        // On disk: the three records before and the one after, no more,
        // nothing torn (the cut, not the recovery, removed the batch).
        let mut n = 0;
        let r = recover(dir.path(), |_| n += 1).unwrap();
        assert_eq!((n, r.torn_bytes), (4, 0), "mode {how}");
    }
}

#[test]
fn a_segment_the_full_disk_would_not_take_is_removed_and_the_journal_rolls_once_it_has_room() {
    use super::disk_full::PROBE_EVERY;
    let dir = tempfile::tempdir().unwrap();
    let clock = crate::retry::SimClock::new();
    let (disk, mode, _) = FullDisk::new(dir.path());
    let (j, h, _) = start_on(disk, &clock);
    let rec = samples().remove(0);
    // Fill segment 1 near its 4 KiB.
    let mut last = 0;
    while j.used_bytes() < LIMITS.segment_bytes - 200 {
        last = j.append(&rec).unwrap();
        assert!(j.wait_durable(last));
    }
    // The next batch needs segment 2, whose header the full disk cuts.
    mode.store(PARTIAL_WRITE, Ordering::SeqCst);
    let mut lost = 0;
    for _ in 0..10 {
        lost = j.append(&rec).unwrap();
    }
    assert!(!j.wait_durable(lost));
    let seg2 = dir.path().join(super::segment::file_name(2));
    assert!(!seg2.exists(), "the half-made segment is removed");
    mode.store(ROOM, Ordering::SeqCst);
    clock.advance(PROBE_EVERY.as_nanos() as u64);
    let _ = j.append(&rec);
    eventually("room again", || !j.is_disk_full());
    let mut after = 0;
    for _ in 0..10 {
        after = j.append(&rec).unwrap();
    }
    assert!(j.wait_durable(after));
    assert!(seg2.exists(), "rolled once there was room");
    j.stop();
    h.join().unwrap();
    let mut n = 0u64;
    let r = recover(dir.path(), |_| n += 1).unwrap();
    assert_eq!((n, r.torn_bytes), (last + 10, 0));
}

#[test]
fn recovery_removes_a_last_segment_whose_header_never_reached_the_disk() {
    let rec = samples().remove(0);
    for stub in [Vec::new(), b"TFJOUR".to_vec(), vec![0u8; 4096]] {
        let dir = tempfile::tempdir().unwrap();
        let (j, h) = start(dir.path(), LIMITS);
        assert!(j.wait_durable(j.append(&rec).unwrap()));
        j.stop();
        h.join().unwrap();
        let seg2 = dir.path().join(super::segment::file_name(2));
        std::fs::write(&seg2, &stub).unwrap();
        let mut n = 0;
        let r = recover(dir.path(), |_| n += 1).unwrap();
        assert_eq!(n, 1);
        assert!(!seg2.exists(), "{stub:?}");
        assert_eq!(r.next_segment(), 2);
    }
    // A whole header of another segment is not a stub, nor a lost header
    // with data after it: errors, as before.
    let mut zeros_then_data = vec![0u8; 64];
    zeros_then_data.push(1);
    for bad in [super::segment::header(7).to_vec(), zeros_then_data] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(super::segment::file_name(2)), &bad).unwrap();
        assert!(recover(dir.path(), |_| {}).is_err(), "{bad:?}");
    }
}
