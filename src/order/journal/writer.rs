//! The journal thread and its handle: appends from any thread, one writer,
//! group commit.
//!
//! Appenders encode their record into the shared pending buffer under a
//! mutex and get its log sequence number (LSN, 1-based, in append order).
//! The journal thread (`tickfan-journal`, the single writer of the files)
//! takes everything pending at once, writes it with one `write` and makes it
//! durable with one `fdatasync` (group commit, as Kafka's log flush or
//! Redis's AOF `always` with batching), then publishes the highest durable
//! LSN and calls the notifier (the gateway's mio waker).
//!
//! Invariants: the durable LSN only grows and never passes an LSN whose
//! bytes were not synced; after a failed write or sync the journal is
//! *failed* for good (after a failed `fsync` the kernel may have dropped the
//! dirty pages, so nothing later can be trusted): every LSN above the
//! durable one will never be durable, and new appends are refused. Disk use
//! (segments on disk plus pending bytes) never passes `max_bytes` by more
//! than a segment header.
//!
//! Retirement: a closed segment is deleted once every order accepted in it
//! has ended (its last LSN is below the oldest live order's, which the
//! gateway publishes with [`Journal::set_oldest_live`]) and its last record
//! is older than `retain_ns` (the dedup retention: its ids need not be
//! remembered after a restart). Only the oldest segments go, in order; the
//! journal thread checks after each commit and every [`RETIRE_TICK`] when
//! idle (a full journal appends nothing, and must still empty).
//! Segments found at start count as holding LSN 0 and as written at start.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::logging::repeat::warn_repeating;
use crate::model::warning::WarnKind;
use crate::sys::clock::wall_ns;
use crate::sys::watch::Watch;

use super::files::{JournalFile, JournalFiles};
use super::record::Record;
use super::segment::{header, put_frame};

/// Called by the journal thread after each commit or failure.
pub type Notify = Box<dyn Fn() + Send + Sync>;

/// Sizes of the journal.
#[derive(Debug, Clone, Copy)]
pub struct JournalLimits {
    /// Most bytes on disk (all segments plus pending), `--journal-max-bytes`.
    pub max_bytes: u64,
    /// A segment is closed and a new one begun past this many bytes.
    pub segment_bytes: u64,
    /// A closed segment whose orders have all ended is kept this long after
    /// its last record (`--dedup-retention`), ns.
    pub retain_ns: u64,
}

/// How often an idle journal thread looks for segments to retire.
pub const RETIRE_TICK: Duration = Duration::from_secs(1);

/// A segment on disk.
#[derive(Debug, Clone, Copy)]
struct Segment {
    number: u64,
    bytes: u64,
    /// LSN of its last record (0: found at start, or none yet).
    last_lsn: u64,
    /// Wall-clock ns of its last commit (start time for segments found at start).
    last_wall_ns: u64,
}

/// Why an append was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The journal is at `--journal-max-bytes` (`SYSTEM_BUSY journal_full`).
    #[error("journal full")]
    Full,
    /// A write or sync failed earlier (`SYSTEM_BUSY journal_error`).
    #[error("journal failed: {0}")]
    Failed(String),
    /// The journal is stopping.
    #[error("journal stopped")]
    Stopped,
}

/// The state shared by appenders and the journal thread.
struct State {
    /// Frames appended and not yet taken by the journal thread.
    pending: Vec<u8>,
    /// LSN of the last appended record.
    last_lsn: u64,
    /// Bytes in segment files on disk (written, synced or not).
    disk_bytes: u64,
    /// Segments on disk, oldest first; the last is the one written.
    segments: Vec<Segment>,
    /// Set once a write or sync failed: the error, for new appends.
    failed: Option<String>,
    /// Set by [`Journal::stop`].
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the journal thread (pending bytes or stop).
    work: Condvar,
    /// Wakes threads blocked in [`Journal::wait_durable`].
    committed: Condvar,
    /// Highest durable LSN (Release by the journal thread, Acquire by readers).
    durable: AtomicU64,
    /// LSNs above this never become durable (`u64::MAX` while healthy).
    lost_from: AtomicU64,
    /// LSN of the oldest order not ended (`u64::MAX`: none), written by the
    /// gateway, read by the journal thread for retirement.
    oldest_live: AtomicU64,
    limits: JournalLimits,
    notify: Notify,
}

/// Handle to the journal: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Journal {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("durable", &self.durable_lsn())
            .field("used_bytes", &self.used_bytes())
            .finish_non_exhaustive()
    }
}

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    s.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Starts the journal thread writing new segments from `first_segment`
    /// on, with `existing` segments (number, bytes) already on disk.
    ///
    /// # Errors
    /// The first segment cannot be created, or the thread cannot start.
    pub fn start(
        files: Box<dyn JournalFiles>,
        limits: JournalLimits,
        first_segment: u64,
        existing: Vec<(u64, u64)>,
        notify: Notify,
    ) -> io::Result<(Journal, JoinHandle<()>)> {
        Self::start_watched(files, limits, first_segment, existing, notify, None)
    }

    /// [`Journal::start`], the thread guarded by `watch` (the engine's): if
    /// it panics, the watch names it dead (the engine exits, `/health`
    /// answers 503) and the journal turns failed, so no one waits on it
    /// for ever.
    ///
    /// # Errors
    /// As [`Journal::start`].
    pub fn start_watched(
        mut files: Box<dyn JournalFiles>,
        limits: JournalLimits,
        first_segment: u64,
        existing: Vec<(u64, u64)>,
        notify: Notify,
        watch: Option<Arc<Watch>>,
    ) -> io::Result<(Journal, JoinHandle<()>)> {
        let mut file = files.create(first_segment)?;
        file.write_all(&header(first_segment))?;
        file.sync_data()?;
        let now = wall_ns();
        let seg = |(number, bytes)| Segment {
            number,
            bytes,
            last_lsn: 0,
            last_wall_ns: now,
        };
        let mut segments: Vec<Segment> = existing.into_iter().map(seg).collect();
        segments.push(seg((first_segment, header(0).len() as u64)));
        let disk_bytes = segments.iter().map(|s| s.bytes).sum();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: Vec::with_capacity(1 << 16),
                last_lsn: 0,
                disk_bytes,
                segments,
                failed: None,
                stop: false,
            }),
            work: Condvar::new(),
            committed: Condvar::new(),
            durable: AtomicU64::new(0),
            lost_from: AtomicU64::new(u64::MAX),
            oldest_live: AtomicU64::new(0),
            limits,
            notify,
        });
        let thread = Writer {
            shared: Arc::clone(&shared),
            files,
            file,
            segment: first_segment,
            segment_len: header(0).len() as u64,
        };
        let handle = std::thread::Builder::new()
            .name("tickfan-journal".into())
            .spawn(move || {
                let _beat = watch.map(|w| w.guard());
                let _failed_if_panics = FailOnPanic(Arc::clone(&thread.shared));
                thread.run();
            })?;
        Ok((Journal { shared }, handle))
    }

    /// Appends `rec`; it is durable once [`Journal::durable_lsn`] reaches
    /// the returned LSN.
    ///
    /// # Errors
    /// [`AppendError::Full`] at `max_bytes`, [`AppendError::Failed`] after a
    /// disk error, [`AppendError::Stopped`] after [`Journal::stop`].
    pub fn append(&self, rec: &Record) -> Result<u64, AppendError> {
        let mut st = lock(&self.shared);
        if let Some(e) = &st.failed {
            return Err(AppendError::Failed(e.clone()));
        }
        if st.stop {
            return Err(AppendError::Stopped);
        }
        let before = st.pending.len();
        put_frame(&mut st.pending, rec);
        let used = st.disk_bytes + st.pending.len() as u64;
        if used > self.shared.limits.max_bytes {
            st.pending.truncate(before);
            return Err(AppendError::Full);
        }
        st.last_lsn += 1;
        let lsn = st.last_lsn;
        drop(st);
        self.shared.work.notify_one();
        Ok(lsn)
    }

    /// Publishes the LSN of the oldest order not ended (`u64::MAX`: none;
    /// 0 holds every segment), for retirement.
    pub fn set_oldest_live(&self, lsn: u64) {
        self.shared.oldest_live.store(lsn, Ordering::Relaxed);
    }

    /// Segments on disk now (retired ones are gone).
    pub fn segment_count(&self) -> usize {
        lock(&self.shared).segments.len()
    }

    /// Highest durable LSN (0 before the first commit).
    pub fn durable_lsn(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// LSNs above this will never be durable (a disk error); `None` while
    /// the journal is healthy.
    pub fn lost_from(&self) -> Option<u64> {
        Some(self.shared.lost_from.load(Ordering::Acquire)).filter(|&l| l != u64::MAX)
    }

    /// Bytes used (segments on disk plus pending) out of `max_bytes`.
    pub fn used_bytes(&self) -> u64 {
        let st = lock(&self.shared);
        st.disk_bytes + st.pending.len() as u64
    }

    /// The limits it was started with.
    pub fn limits(&self) -> JournalLimits {
        self.shared.limits
    }

    /// Blocks until `lsn` is durable (`true`) or never will be (`false`).
    pub fn wait_durable(&self, lsn: u64) -> bool {
        let mut st = lock(&self.shared);
        loop {
            if self.durable_lsn() >= lsn {
                return true;
            }
            if self.lost_from().is_some_and(|l| lsn > l) || st.stop && st.pending.is_empty() {
                return self.durable_lsn() >= lsn;
            }
            st = self
                .shared
                .committed
                .wait(st)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits at most `timeout` for every record appended so far to be
    /// durable (the engine's fatal path: another thread died, the journal
    /// commits what it holds before the exit). `false` when something is
    /// still not durable: a disk error, a dead journal thread, or time out.
    pub fn sync_pending(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut st = lock(&self.shared);
        let last = st.last_lsn;
        loop {
            if self.durable_lsn() >= last {
                return true;
            }
            if self.lost_from().is_some_and(|l| last > l) {
                return false;
            }
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                return false;
            };
            st = self
                .shared
                .committed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Asks the journal thread to commit what is pending and end; join its
    /// handle to wait for it.
    pub fn stop(&self) {
        lock(&self.shared).stop = true;
        self.shared.work.notify_one();
    }
}

/// Held by the journal thread: if it unwinds (a panic), the journal turns
/// failed for good, as after a disk error: appends are refused and every
/// waiter learns its record will never be durable.
struct FailOnPanic(Arc<Shared>);

impl Drop for FailOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut st = lock(&self.0);
        st.failed = Some("the journal thread died".into());
        st.pending.clear();
        self.0
            .lost_from
            .store(self.0.durable.load(Ordering::Acquire), Ordering::Release);
        (self.0.notify)();
        drop(st);
        self.0.committed.notify_all();
    }
}

/// The journal thread's own state: the open segment.
struct Writer {
    shared: Arc<Shared>,
    files: Box<dyn JournalFiles>,
    file: Box<dyn JournalFile>,
    segment: u64,
    segment_len: u64,
}

impl Writer {
    fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        let mut batch = Vec::with_capacity(1 << 16);
        loop {
            let last = {
                let mut st = lock(&shared);
                while st.pending.is_empty() && !st.stop {
                    let (next, waited) = shared
                        .work
                        .wait_timeout(st, RETIRE_TICK)
                        .unwrap_or_else(|p| p.into_inner());
                    st = next;
                    if waited.timed_out() {
                        self.retire(&mut st);
                    }
                }
                if st.pending.is_empty() || st.failed.is_some() {
                    return;
                }
                std::mem::swap(&mut st.pending, &mut batch);
                st.last_lsn
            };
            let result = self.commit(&batch);
            let mut st = lock(&shared);
            match result {
                Ok(()) => {
                    st.disk_bytes += batch.len() as u64;
                    if let Some(s) = st.segments.last_mut() {
                        s.bytes = self.segment_len;
                        s.last_lsn = last;
                        s.last_wall_ns = wall_ns();
                    }
                    self.shared.durable.store(last, Ordering::Release);
                    self.retire(&mut st);
                }
                Err(e) => {
                    log::error!("journal: write failed, new orders are refused: {e}");
                    st.failed = Some(e.to_string());
                    // Nothing pending will be written either.
                    st.pending.clear();
                    self.shared.lost_from.store(
                        self.shared.durable.load(Ordering::Acquire),
                        Ordering::Release,
                    );
                }
            }
            let failed = st.failed.is_some();
            // Under the lock: whoever sees the new durable LSN (or the
            // failure) in `wait_durable` also sees the owner woken.
            (self.shared.notify)();
            drop(st);
            batch.clear();
            self.shared.committed.notify_all();
            if failed {
                return;
            }
        }
    }

    /// Deletes the oldest closed segments whose orders have all ended and
    /// whose last record is older than the retention.
    fn retire(&mut self, st: &mut State) {
        let oldest_live = self.shared.oldest_live.load(Ordering::Relaxed);
        let now = wall_ns();
        while st.segments.len() > 1 {
            let s = st.segments[0];
            let ended = s.last_lsn < oldest_live;
            let old = now.saturating_sub(s.last_wall_ns) >= self.shared.limits.retain_ns;
            if !(ended && old) {
                return;
            }
            if let Err(e) = self.files.remove(s.number) {
                warn_repeating!(
                    WarnKind::JournalRetireFailed,
                    "journal: cannot retire segment {}: {e}",
                    s.number
                );
                return;
            }
            st.segments.remove(0);
            st.disk_bytes = st.disk_bytes.saturating_sub(s.bytes);
        }
    }

    /// One write and one sync for the whole batch, rolling to a new segment
    /// first when the current one is full.
    fn commit(&mut self, batch: &[u8]) -> io::Result<()> {
        if self.segment_len + batch.len() as u64 > self.shared.limits.segment_bytes
            && self.segment_len > header(0).len() as u64
        {
            let next = self.segment + 1;
            let mut f = self.files.create(next)?;
            f.write_all(&header(next))?;
            self.file = f;
            self.segment = next;
            self.segment_len = header(0).len() as u64;
            let mut st = lock(&self.shared);
            st.segments.push(Segment {
                number: next,
                bytes: self.segment_len,
                last_lsn: 0,
                last_wall_ns: wall_ns(),
            });
            st.disk_bytes += self.segment_len;
        }
        self.file.write_all(batch)?;
        self.file.sync_data()?;
        self.segment_len += batch.len() as u64;
        Ok(())
    }
}
