//! The journal thread (`tickfan-journal`), the single writer of the
//! segment files: it takes everything pending at once, writes and syncs it
//! (group commit), publishes the durable LSN, and handles a full or failed
//! disk, probes and retirement. The handle the other threads use, the
//! state they share with this thread, and the invariants of both are in
//! [`super::writer`].

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use crate::logging::repeat::warn_repeating;
use crate::model::warning::WarnKind;
use crate::sys::clock::wall_ns;

use super::disk_full::{is_disk_full, probe, DiskFull, Probe, FULL_POLL, PROBE_EVERY};
use super::files::{JournalFile, JournalFiles};
use super::segment::header;

use super::writer::{lock, JournalTiming, Segment, Shared, State, RETIRE_TICK};
use crate::metrics::Stage;
use crate::order::msg::journal::LAZY_WITHIN;

/// Held by the journal thread: if it unwinds (a panic), the journal turns
/// failed for good, as after a disk error: appends are refused and every
/// waiter learns its record will never be durable.
pub(super) struct FailOnPanic(pub(super) Arc<Shared>);

impl Drop for FailOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut st = lock(&self.0);
        st.failed = Some("the journal thread died".into());
        st.full = None;
        st.drop_pending();
        self.0.disk_full.store(false, Ordering::Release);
        self.0
            .lost_from
            .store(self.0.durable.load(Ordering::Acquire), Ordering::Release);
        (self.0.notify)();
        drop(st);
        self.0.committed.notify_all();
    }
}

/// The journal thread's own state: the open segment.
pub(super) struct Writer {
    pub(super) shared: Arc<Shared>,
    pub(super) files: Box<dyn JournalFiles>,
    pub(super) file: Box<dyn JournalFile>,
    pub(super) segment: u64,
    /// Bytes of the open segment that are durable (its header and the
    /// records of every successful commit): where a cut goes back to.
    pub(super) segment_len: u64,
    /// Each commit's duration, when measured.
    pub(super) timing: Option<JournalTiming>,
}

/// What the journal thread does next.
enum Step {
    /// Write and sync the batch, whose last record is this LSN; its first
    /// urgent record was appended this long ago.
    Commit(u64, Option<Duration>),
    /// The disk is full and a probe is due.
    Probe,
}

/// Creates segment `n`, writes its header and syncs it, so a segment on
/// disk always starts with a durable header (a later cut never goes below
/// it). On failure the half-made file is removed (a file that cannot be
/// removed is left for recovery, which removes a last segment with no
/// header).
///
/// # Errors
/// The OS error of the creation, the write or the sync.
pub(super) fn open_segment(
    files: &mut dyn JournalFiles,
    n: u64,
) -> io::Result<Box<dyn JournalFile>> {
    let made = files.create(n).and_then(|mut f| {
        f.write_all(&header(n))?;
        f.sync_data()?;
        Ok(f)
    });
    if made.is_err() {
        match files.remove(n) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("journal: cannot remove the half-made segment {n}: {e}"),
        }
    }
    made
}

impl Writer {
    pub(super) fn run(mut self) {
        self.turns();
        if let Some(t) = &mut self.timing {
            t.recorder.finish(t.mono.now_ns());
        }
    }

    /// Commits and probes until the journal stops or fails.
    fn turns(&mut self) {
        let shared = Arc::clone(&self.shared);
        let mut batch = Vec::with_capacity(1 << 16);
        loop {
            let step = {
                let mut st = lock(&shared);
                loop {
                    if st.failed.is_some() {
                        return;
                    }
                    if let Some(full) = &st.full {
                        if st.stop {
                            // Nothing is pending: every append was refused.
                            return;
                        }
                        if full.probe_due(shared.clock.now_ns()) {
                            break Step::Probe;
                        }
                        st = self.idle(st, FULL_POLL);
                        continue;
                    }
                    if !st.pending.is_empty() {
                        // Lazy records alone wait for an urgent one to ride
                        // with, at most LAZY_WITHIN from the oldest.
                        let waited = st.pending_since.map_or(LAZY_WITHIN, |t| t.elapsed());
                        if st.urgent || st.stop || waited >= LAZY_WITHIN {
                            let urgent_for = st.urgent_since.map(|t| t.elapsed());
                            st.take_batch(&mut batch);
                            break Step::Commit(st.last_lsn, urgent_for);
                        }
                        st = self.idle(st, LAZY_WITHIN - waited);
                        continue;
                    }
                    if st.stop {
                        return;
                    }
                    st = self.idle(st, RETIRE_TICK);
                }
            };
            match step {
                Step::Commit(last, urgent_for) => {
                    let start = self.timing.as_ref().map(|t| t.mono.now_ns());
                    let result = self.commit(&batch);
                    let mut end = None;
                    if let (Some(t), Some(start)) = (&mut self.timing, start) {
                        let now = t.mono.now_ns();
                        if let Some(waited) = urgent_for {
                            let since = start.saturating_sub(waited.as_nanos() as u64);
                            t.recorder.record_span(Stage::JournalWait, since, start);
                        }
                        t.recorder.record_span(Stage::JournalSync, start, now);
                        end = Some(now);
                    }
                    self.committed(result, last, batch.len() as u64, end);
                    batch.clear();
                }
                Step::Probe => self.probe(),
            }
        }
    }

    /// Waits for work at most `tick`; retires segments when it times out
    /// (a full journal appends nothing, and must still empty). A measured
    /// journal wakes by its recorder's interval boundary too, to hand the
    /// interval over on time.
    fn idle<'a>(&mut self, st: MutexGuard<'a, State>, tick: Duration) -> MutexGuard<'a, State> {
        let tick = match &self.timing {
            Some(t) => tick.min(Duration::from_nanos(
                t.recorder.ns_until_flush(t.mono.now_ns()).max(1),
            )),
            None => tick,
        };
        let (mut st, waited) = self
            .shared
            .work
            .wait_timeout(st, tick)
            .unwrap_or_else(|p| p.into_inner());
        if let Some(t) = &mut self.timing {
            t.recorder.maybe_flush(t.mono.now_ns());
        }
        if waited.timed_out() {
            self.retire(&mut st);
        }
        st
    }

    /// Publishes the outcome of a commit of `bytes` bytes whose last record
    /// is `last`, ended at `end_ns` when measured: durable; or, the disk
    /// full, cut back and full; or failed.
    fn committed(&mut self, result: io::Result<()>, last: u64, bytes: u64, end_ns: Option<u64>) {
        // The cut is I/O: before the lock, as the commit was.
        let cut = match &result {
            Err(e) if is_disk_full(e) => Some(self.file.truncate(self.segment_len)),
            _ => None,
        };
        let now_ns = self.shared.clock.now_ns();
        let shared = Arc::clone(&self.shared);
        let mut st = lock(&shared);
        match (result, cut) {
            (Ok(()), _) => {
                st.disk_bytes += bytes;
                if let Some(s) = st.segments.last_mut() {
                    s.bytes = self.segment_len;
                    s.last_lsn = last;
                    s.last_wall_ns = wall_ns();
                }
                if let Some(end) = end_ns {
                    self.shared.durable_at_ns.store(end, Ordering::Release);
                }
                self.shared.durable.store(last, Ordering::Release);
                self.retire(&mut st);
            }
            (Err(e), Some(Ok(()))) => self.disk_full(&mut st, &e, now_ns),
            (Err(e), Some(Err(cut))) => self.fail(
                &mut st,
                format!("{e}; and the cut back to the last durable record failed: {cut}"),
            ),
            (Err(e), None) => self.fail(&mut st, e.to_string()),
        }
        // Under the lock: whoever sees the new durable LSN (or the loss)
        // in `wait_durable` also sees the owner woken.
        (self.shared.notify)();
        drop(st);
        self.shared.committed.notify_all();
    }

    /// The disk is full: every LSN not durable is lost, appends are
    /// refused until a probe finds room.
    fn disk_full(&self, st: &mut State, e: &io::Error, now_ns: u64) {
        let durable = self.shared.durable.load(Ordering::Acquire);
        let lost = st.last_lsn.saturating_sub(durable);
        if let Err(too_many) = st.lost.add(durable, st.last_lsn) {
            return self.fail(st, format!("{e}; {too_many}"));
        }
        self.shared
            .lost_ranges
            .store(st.lost.len(), Ordering::Release);
        st.drop_pending();
        st.full = Some(DiskFull::new(e, now_ns));
        self.shared.disk_full.store(true, Ordering::Release);
        self.shared.full_episodes.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "journal: the disk is full ({e}): {lost} record(s) not made durable were cut off; new orders are refused (SYSTEM_BUSY journal_full) until a probe finds room (every {PROBE_EVERY:?})"
        );
    }

    /// A write or sync failed for good: nothing pending will be written.
    fn fail(&self, st: &mut State, error: String) {
        log::error!("journal: write failed, new orders are refused: {error}");
        st.failed = Some(error);
        st.full = None;
        st.drop_pending();
        self.shared.disk_full.store(false, Ordering::Release);
        self.shared.lost_from.store(
            self.shared.durable.load(Ordering::Acquire),
            Ordering::Release,
        );
    }

    /// Probes a full disk for room ([`super::disk_full::probe`]); with
    /// room, appends are taken again.
    fn probe(&mut self) {
        let found = probe(&mut *self.file, self.segment_len);
        let now_ns = self.shared.clock.now_ns();
        let shared = Arc::clone(&self.shared);
        let mut st = lock(&shared);
        match found {
            Probe::Room => {
                let (since, error) = st
                    .full
                    .take()
                    .map_or((now_ns, String::new()), |f| (f.since_ns, f.error));
                self.shared.disk_full.store(false, Ordering::Release);
                log::warn!(
                    "journal: the disk has room again after {:.1} s full ({error}); orders are accepted",
                    now_ns.saturating_sub(since) as f64 / 1e9
                );
            }
            Probe::Full(e) => {
                log::debug!("journal: the disk is still full: {e}");
                if let Some(f) = &mut st.full {
                    f.next_probe_ns = now_ns.saturating_add(PROBE_EVERY.as_nanos() as u64);
                }
            }
            Probe::Broken(e) => self.fail(&mut st, format!("probing a full disk: {e}")),
        }
        (self.shared.notify)();
        drop(st);
        self.shared.committed.notify_all();
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
    /// first when the current one is full (its header synced on its own,
    /// see [`open_segment`]).
    fn commit(&mut self, batch: &[u8]) -> io::Result<()> {
        if self.segment_len + batch.len() as u64 > self.shared.limits.segment_bytes
            && self.segment_len > header(0).len() as u64
        {
            let next = self.segment + 1;
            self.file = open_segment(&mut *self.files, next)?;
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
