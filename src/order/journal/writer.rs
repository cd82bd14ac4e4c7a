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
//! (segments on disk plus pending bytes) never passes `max_bytes`.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

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
    /// Segments on disk, oldest first, with their sizes.
    segments: Vec<(u64, u64)>,
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
        mut files: Box<dyn JournalFiles>,
        limits: JournalLimits,
        first_segment: u64,
        existing: Vec<(u64, u64)>,
        notify: Notify,
    ) -> io::Result<(Journal, JoinHandle<()>)> {
        let mut file = files.create(first_segment)?;
        file.write_all(&header(first_segment))?;
        file.sync_data()?;
        let mut segments = existing;
        segments.push((first_segment, header(0).len() as u64));
        let disk_bytes = segments.iter().map(|s| s.1).sum();
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
            .spawn(move || thread.run())?;
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

    /// Asks the journal thread to commit what is pending and end; join its
    /// handle to wait for it.
    pub fn stop(&self) {
        lock(&self.shared).stop = true;
        self.shared.work.notify_one();
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
        let mut batch = Vec::with_capacity(1 << 16);
        loop {
            let last = {
                let mut st = lock(&self.shared);
                while st.pending.is_empty() && !st.stop {
                    st = self.shared.work.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.pending.is_empty() || st.failed.is_some() {
                    return;
                }
                std::mem::swap(&mut st.pending, &mut batch);
                st.last_lsn
            };
            let result = self.commit(&batch);
            let mut st = lock(&self.shared);
            match result {
                Ok(()) => {
                    st.disk_bytes += batch.len() as u64;
                    if let Some(s) = st.segments.last_mut() {
                        s.1 = self.segment_len;
                    }
                    self.shared.durable.store(last, Ordering::Release);
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
            st.segments.push((next, self.segment_len));
            st.disk_bytes += self.segment_len;
        }
        self.file.write_all(batch)?;
        self.file.sync_data()?;
        self.segment_len += batch.len() as u64;
        Ok(())
    }
}
