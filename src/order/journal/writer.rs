//! The journal's handle and the state it shares with the journal thread:
//! appends from any thread, one writer, group commit. The thread's loop is
//! `thread.rs`.
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
//! bytes were not synced; an LSN is durable when it is at or below the
//! durable LSN and not *lost* ([`super::lost`]). A write or sync that fails
//! because the disk is full makes the journal *full*
//! ([`super::disk_full`]): the segment is cut back to its last durable
//! record, the LSNs not yet durable are lost, appends are refused until a
//! probe finds room, then taken again. Any other failed write or sync makes
//! the journal *failed* for good (after a failed `fsync` the kernel may
//! have dropped the dirty pages, so nothing later can be trusted): every
//! LSN above the durable one will never be durable, and new appends are
//! refused. Disk use (segments on disk plus pending bytes) never passes
//! `max_bytes` by more than a segment header.
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
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::retry::Clock;
use crate::sys::clock::{wall_ns, MonoClock};
use crate::sys::watch::Watch;

use super::disk_full::DiskFull;
use super::files::JournalFiles;
use super::lost::LostRanges;
use super::segment::{header, put_frame};
use super::thread::{open_segment, FailOnPanic, Writer};
use crate::metrics::counters::set;
use crate::metrics::order_counters::OrderCounters;
use crate::metrics::recorder::RecorderLink;
use crate::metrics::{Stage, StageRecorder};
use crate::order::msg::journal::{AppendError, Durability, JournalLink, Loss};
use crate::order::msg::record::Record;

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
pub(super) struct Segment {
    pub(super) number: u64,
    pub(super) bytes: u64,
    /// LSN of its last record (0: found at start, or none yet).
    pub(super) last_lsn: u64,
    /// Wall-clock ns of its last commit (start time for segments found at start).
    pub(super) last_wall_ns: u64,
}

/// What the journal thread works with besides its files and sizes.
pub struct JournalEnv {
    /// Called by the journal thread after each commit, failure, probe.
    pub notify: Notify,
    /// The engine's watch over the thread (`None`: not watched): if it
    /// panics, the watch names it dead (the engine exits, `/health`
    /// answers 503) and the journal turns failed, so no one waits on it
    /// for ever.
    pub watch: Option<Arc<Watch>>,
    /// The engine clock: when a full journal probes for room
    /// ([`super::disk_full::PROBE_EVERY`]).
    pub clock: Arc<dyn Clock>,
    /// Where each commit's duration goes (`None`: not measured).
    pub timing: Option<JournalTiming>,
}

/// The journal thread's histogram of its commits ([`Stage::JournalSync`]),
/// on the engine's measurement clock.
#[derive(Debug)]
pub struct JournalTiming {
    /// The journal thread's recorder (stage `journal_sync` only).
    pub(crate) recorder: StageRecorder,
    /// The engine's measurement clock (shared epoch with every recorder).
    pub(crate) mono: MonoClock,
}

impl JournalTiming {
    /// A recorder of [`Stage::JournalSync`] on `link`, timed by `mono`.
    pub(crate) fn new(link: RecorderLink, mono: MonoClock) -> Self {
        JournalTiming {
            recorder: StageRecorder::new(&[Stage::JournalWait, Stage::JournalSync], link),
            mono,
        }
    }
}

impl std::fmt::Debug for JournalEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalEnv")
            .field("watch", &self.watch.is_some())
            .field("clock", &self.clock)
            .field("timing", &self.timing.is_some())
            .finish_non_exhaustive()
    }
}

/// The state shared by appenders and the journal thread.
pub(super) struct State {
    /// Frames appended and not yet taken by the journal thread.
    pub(super) pending: Vec<u8>,
    /// LSN of the last appended record.
    pub(super) last_lsn: u64,
    /// Bytes in segment files on disk (written, synced or not).
    pub(super) disk_bytes: u64,
    /// Segments on disk, oldest first; the last is the one written.
    pub(super) segments: Vec<Segment>,
    /// Set once a write or sync failed for good: the error, for new appends.
    pub(super) failed: Option<String>,
    /// Set while the disk is full (appends refused, probes due).
    pub(super) full: Option<DiskFull>,
    /// LSNs lost to a full disk (written by the journal thread, pruned by
    /// [`Journal::set_oldest_live`]).
    pub(super) lost: LostRanges,
    /// Set by [`Journal::stop`].
    pub(super) stop: bool,
    /// Something pending wants its commit now (an urgent append, or a
    /// wait for a lazy one). Cleared when the batch is taken.
    pub(super) urgent: bool,
    /// When the oldest record pending was appended (`None`: nothing
    /// pending since the last batch was taken).
    pub(super) pending_since: Option<Instant>,
    /// When the first urgent record pending was appended (stage
    /// `journal_wait`).
    pub(super) urgent_since: Option<Instant>,
}

impl State {
    /// Takes everything pending into `batch` (empty) for one commit.
    pub(super) fn take_batch(&mut self, batch: &mut Vec<u8>) {
        std::mem::swap(&mut self.pending, batch);
        self.forget_pending_marks();
    }

    /// Drops everything pending (a full disk cut it off, or the journal
    /// failed): no commit is owed for it.
    pub(super) fn drop_pending(&mut self) {
        self.pending.clear();
        self.forget_pending_marks();
    }

    /// With nothing pending, nothing is urgent or waiting: the next
    /// append wakes the journal thread again.
    fn forget_pending_marks(&mut self) {
        self.urgent = false;
        self.pending_since = None;
        self.urgent_since = None;
    }
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the journal thread (pending bytes or stop).
    pub(super) work: Condvar,
    /// Wakes threads blocked in [`Journal::wait_durable`].
    pub(super) committed: Condvar,
    /// Highest durable LSN (Release by the journal thread, Acquire by readers).
    pub(super) durable: AtomicU64,
    /// When the last successful commit ended, on the measurement clock (0
    /// while commits are not measured); stored before `durable`.
    pub(super) durable_at_ns: AtomicU64,
    /// LSNs above this never become durable (`u64::MAX` while not failed
    /// for good).
    pub(super) lost_from: AtomicU64,
    /// `lost.len()`, so a journal that never lost anything answers
    /// [`Journal::outcome`] without the mutex. Stored (Release) by the
    /// journal thread before the durable LSN can pass a lost range, read
    /// (Acquire) after the durable LSN.
    pub(super) lost_ranges: AtomicUsize,
    /// True while the disk is full (the gateway's gauge reads it).
    pub(super) disk_full: AtomicBool,
    /// Times the disk was found full.
    pub(super) full_episodes: AtomicU64,
    /// The engine clock (probe cadence).
    pub(super) clock: Arc<dyn Clock>,
    /// LSN of the oldest order not ended (`u64::MAX`: none), written by the
    /// gateway, read by the journal thread for retirement.
    pub(super) oldest_live: AtomicU64,
    pub(super) limits: JournalLimits,
    pub(super) notify: Notify,
}

/// Handle to the journal: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct Journal {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("durable", &self.durable_lsn())
            .field("used_bytes", &self.used_bytes())
            .finish_non_exhaustive()
    }
}

pub(super) fn lock(s: &Shared) -> MutexGuard<'_, State> {
    s.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Starts the journal thread writing new segments from `first_segment`
    /// on, with `existing` segments (number, bytes) already on disk; not
    /// watched, probing on the monotonic clock.
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
        let env = JournalEnv {
            notify,
            watch: None,
            clock: Arc::new(MonoClock::new()),
            timing: None,
        };
        Self::start_in(files, limits, first_segment, existing, env)
    }

    /// [`Journal::start`] with its thread's environment: the notifier, the
    /// engine's watch and clock.
    ///
    /// # Errors
    /// As [`Journal::start`]; a first segment left half made is removed.
    pub fn start_in(
        mut files: Box<dyn JournalFiles>,
        limits: JournalLimits,
        first_segment: u64,
        existing: Vec<(u64, u64)>,
        env: JournalEnv,
    ) -> io::Result<(Journal, JoinHandle<()>)> {
        let file = open_segment(&mut *files, first_segment)?;
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
                full: None,
                lost: LostRanges::default(),
                stop: false,
                urgent: false,
                pending_since: None,
                urgent_since: None,
            }),
            work: Condvar::new(),
            committed: Condvar::new(),
            durable: AtomicU64::new(0),
            durable_at_ns: AtomicU64::new(0),
            lost_from: AtomicU64::new(u64::MAX),
            lost_ranges: AtomicUsize::new(0),
            disk_full: AtomicBool::new(false),
            full_episodes: AtomicU64::new(0),
            clock: env.clock,
            oldest_live: AtomicU64::new(0),
            limits,
            notify: env.notify,
        });
        let thread = Writer {
            shared: Arc::clone(&shared),
            files,
            file,
            segment: first_segment,
            segment_len: header(0).len() as u64,
            timing: env.timing,
        };
        let watch = env.watch;
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
    /// [`AppendError::Full`] at `max_bytes`, [`AppendError::DiskFull`]
    /// while the disk is full, [`AppendError::Failed`] after a disk error,
    /// [`AppendError::Stopped`] after [`Journal::stop`].
    pub fn append(&self, rec: &Record) -> Result<u64, AppendError> {
        self.append_as(rec, true)
    }

    /// Appends `rec` without a commit of its own (see
    /// [`JournalLink::append_lazy`]): it rides with the next urgent
    /// append's commit, or is committed once it has waited
    /// [`LAZY_WITHIN`](crate::order::msg::journal::LAZY_WITHIN).
    ///
    /// # Errors
    /// As [`Journal::append`].
    pub fn append_lazy(&self, rec: &Record) -> Result<u64, AppendError> {
        self.append_as(rec, false)
    }

    fn append_as(&self, rec: &Record, urgent: bool) -> Result<u64, AppendError> {
        let mut st = lock(&self.shared);
        if let Some(e) = &st.failed {
            return Err(AppendError::Failed(e.clone()));
        }
        if st.stop {
            return Err(AppendError::Stopped);
        }
        if let Some(full) = &st.full {
            // A probe is due: the journal thread may be asleep on its poll.
            if full.probe_due(self.shared.clock.now_ns()) {
                drop(st);
                self.shared.work.notify_one();
            }
            return Err(AppendError::DiskFull);
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
        // The journal thread is woken for an urgent record, and for the
        // first lazy one of a batch (to wait out its LAZY_WITHIN).
        let wake = if urgent {
            !std::mem::replace(&mut st.urgent, true)
        } else {
            st.pending_since.is_none()
        };
        if st.pending_since.is_none() || (urgent && st.urgent_since.is_none()) {
            let now = Instant::now();
            st.pending_since.get_or_insert(now);
            if urgent {
                st.urgent_since = Some(now);
            }
        }
        drop(st);
        if wake {
            self.shared.work.notify_one();
        }
        Ok(lsn)
    }

    /// Publishes the LSN of the oldest order not ended (`u64::MAX`: none;
    /// 0 holds every segment), for retirement, and forgets the lost ranges
    /// below it.
    ///
    /// The caller (the gateway, once per turn) computes it after its own
    /// appends of the turn: every LSN anyone may still ask
    /// [`outcome`](Self::outcome) about (an order held for its `ACK`, a
    /// cancel's record, a worker's attempt of an order not ended) is at or
    /// above it, so a lost range below it is never asked about again.
    pub fn set_oldest_live(&self, lsn: u64) {
        self.shared.oldest_live.store(lsn, Ordering::Relaxed);
        if self.shared.lost_ranges.load(Ordering::Acquire) > 0 {
            let mut st = lock(&self.shared);
            st.lost.prune_below(lsn);
            self.shared
                .lost_ranges
                .store(st.lost.len(), Ordering::Release);
        }
    }

    /// What became of the record appended as `lsn`.
    pub fn outcome(&self, lsn: u64) -> Durability {
        let durable = self.durable_lsn();
        // After the durable LSN (see `Shared::lost_ranges`): a durable LSN
        // past a lost range comes with the range's count.
        if self.shared.lost_ranges.load(Ordering::Acquire) == 0 && self.lost_from().is_none() {
            return if lsn <= durable {
                Durability::Durable
            } else {
                Durability::Pending
            };
        }
        let st = lock(&self.shared);
        self.outcome_locked(&st, lsn)
    }

    /// [`outcome`](Self::outcome) under the state lock (the journal thread
    /// changes the durable LSN, the lost ranges and the failure under it).
    fn outcome_locked(&self, st: &State, lsn: u64) -> Durability {
        if st.lost.contains(lsn) {
            Durability::Lost(Loss::DiskFull)
        } else if lsn <= self.durable_lsn() {
            Durability::Durable
        } else if self.lost_from().is_some_and(|l| lsn > l) {
            Durability::Lost(Loss::Failed)
        } else {
            Durability::Pending
        }
    }

    /// True while the disk is full: appends are refused until a probe
    /// finds room.
    pub fn is_disk_full(&self) -> bool {
        self.shared.disk_full.load(Ordering::Acquire)
    }

    /// True once a write or sync failed for good.
    pub fn is_failed(&self) -> bool {
        self.lost_from().is_some()
    }

    /// Times the disk was found full since start.
    pub fn disk_full_episodes(&self) -> u64 {
        self.shared.full_episodes.load(Ordering::Relaxed)
    }

    /// Segments on disk now (retired ones are gone).
    pub fn segment_count(&self) -> usize {
        lock(&self.shared).segments.len()
    }

    /// Highest durable LSN (0 before the first commit).
    pub fn durable_lsn(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// LSNs above this will never be durable (a disk error for good);
    /// `None` while the journal has not failed. LSNs lost to a full disk
    /// are not counted here: ask [`outcome`](Self::outcome).
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
            match self.outcome_locked(&st, lsn) {
                Durability::Durable => return true,
                Durability::Lost(_) => return false,
                Durability::Pending if st.stop && st.pending.is_empty() => return false,
                Durability::Pending => self.hurry(&mut st),
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
            match self.outcome_locked(&st, last) {
                Durability::Durable => return true,
                Durability::Lost(_) => return false,
                Durability::Pending => self.hurry(&mut st),
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

    /// Someone waits for a pending record: what is pending is committed now,
    /// lazy or not.
    fn hurry(&self, st: &mut State) {
        if !st.pending.is_empty() && !std::mem::replace(&mut st.urgent, true) {
            self.shared.work.notify_one();
        }
    }

    /// Asks the journal thread to commit what is pending and end; join its
    /// handle to wait for it.
    pub fn stop(&self) {
        lock(&self.shared).stop = true;
        self.shared.work.notify_one();
    }
}

impl JournalLink for Journal {
    fn append(&self, rec: &Record) -> Result<u64, AppendError> {
        Journal::append(self, rec)
    }

    fn append_lazy(&self, rec: &Record) -> Result<u64, AppendError> {
        Journal::append_lazy(self, rec)
    }

    fn outcome(&self, lsn: u64) -> Durability {
        Journal::outcome(self, lsn)
    }

    fn wait_durable(&self, lsn: u64) -> bool {
        Journal::wait_durable(self, lsn)
    }

    fn set_oldest_live(&self, lsn: u64) {
        Journal::set_oldest_live(self, lsn);
    }

    fn is_disk_full(&self) -> bool {
        Journal::is_disk_full(self)
    }

    fn durable_at_ns(&self) -> u64 {
        self.shared.durable_at_ns.load(Ordering::Acquire)
    }

    fn publish_gauges(&self, o: &OrderCounters) {
        set(&o.journal_bytes, self.used_bytes());
        set(&o.journal_max_bytes, self.limits().max_bytes);
        set(&o.journal_disk_full, u64::from(self.is_disk_full()));
        set(&o.journal_failed, u64::from(self.is_failed()));
        set(&o.journal_disk_full_episodes, self.disk_full_episodes());
    }
}
