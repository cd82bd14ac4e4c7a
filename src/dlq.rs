//! The dead-letter store: where poison input goes, with its reason, instead
//! of being retried or silently dropped.
//!
//! Producers hand records to the DLQ thread over bounded channels, one per
//! path:
//!
//! * the **feed** never blocks on it: when its channel is full the record is
//!   counted as dropped (its poison counter still counts it); a flood of
//!   poison must not stall ingest;
//! * the **order path** blocks on its own channel and waits until the
//!   record is synced ([`DlqSender::record_durably`]) before the order's
//!   `DEAD` is journaled and sent: a dead-lettered order is an accepted
//!   order the client was promised an answer for and that may be replayed,
//!   so it is never dropped, and never `DEAD` without its record. A slow disk
//!   slows the workers down, the lane queues fill and new orders get
//!   `SYSTEM_BUSY`: backpressure ends at the admission bound, not in a lost
//!   record. The separate channel means a feed flood cannot take its room.
//!
//! The DLQ thread is the single writer of the store: it appends each record
//! as one JSON line to the file ([`file`]: in the data directory by
//! default, `fdatasync`ed after every batch, rotated by size) and keeps the
//! newest `capacity` records in memory for listing; older ones are evicted
//! from memory (counted), never from the file.
//!
//! Dead-lettered orders are also kept in a replay index (by order id, newest
//! `capacity` ids), rebuilt at start by streaming the file and its
//! rotations line by line, so `REPLAY <id>` on the order port works after a
//! restart. A replay first appends a marker line (the record with
//! `replayed_ns` set) and waits until it is synced
//! ([`DlqSender::record_durably`]); only then is the order admitted again,
//! so a crash in between leaves an order that is not replayable, never one
//! executed twice. A replay that is then not admitted (queue full) appends
//! the record again, which makes it replayable again after a restart.

mod file;
mod replay_index;

use std::collections::{BTreeMap, VecDeque};

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;

use crate::logging::repeat::error_repeating;
use crate::metrics::counters::{bump, Counters};
use crate::model::warning::WarnKind;
use crate::sys::watch::Watch;
use file::DlqFile;
use replay_index::ReplayIndex;

/// Name of the dead-letter file in the data directory.
pub const DLQ_FILE_NAME: &str = "dlq.jsonl";

/// Longest raw input kept in a record; longer input is cut (its full length is kept).
pub(crate) const RAW_MAX: usize = 512;

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    /// Which path produced it: `feed` or `order`.
    pub source: String,
    /// The peer it came from.
    pub peer: String,
    /// Why (a stable snake-case reason name).
    pub reason: String,
    /// The input as text (invalid UTF-8 replaced), at most [`RAW_MAX`] bytes of it.
    pub raw: String,
    /// The same bytes in hex when they were not valid UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_hex: Option<String>,
    /// Length of the whole input in bytes (may exceed what `raw` holds).
    pub raw_len: u64,
    /// Delivery attempts made (1 for input refused at once).
    pub attempts: u32,
    /// First seen, wall-clock ns since the epoch.
    pub first_seen_ns: u64,
    /// Last seen, wall-clock ns since the epoch.
    pub last_seen_ns: u64,
    /// The client order id (order records only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
    /// Every attempt made, oldest first (order records only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AttemptRecord>,
    /// Set on a replay marker: the order was replayed at this wall-clock ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_ns: Option<u64>,
}

/// One attempt of a dead-lettered order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttemptRecord {
    /// Attempt number, 1 for the first send.
    pub n: u32,
    /// Bridge it went to.
    pub bridge: String,
    /// What came back: `transient:<why>`, `permanent:<why>`.
    pub outcome: String,
    /// When it was sent, engine clock ns.
    pub at_ns: u64,
    /// When it was sent, wall-clock ns since the epoch.
    pub wall_ns: u64,
    /// The backoff delay drawn before this attempt (0 for the first), ns.
    pub delay_ns: u64,
    /// The ceiling that delay was drawn under (0 for the first), ns.
    pub ceiling_ns: u64,
}

impl DeadLetter {
    /// A record for input refused at once (one attempt).
    pub fn refused(
        source: &str,
        peer: &str,
        reason: &str,
        raw: &[u8],
        raw_len: usize,
        now_ns: u64,
    ) -> Self {
        let kept = &raw[..raw.len().min(RAW_MAX)];
        let (text, hex) = match std::str::from_utf8(kept) {
            Ok(s) => (s.to_string(), None),
            Err(_) => (
                String::from_utf8_lossy(kept).into_owned(),
                Some(kept.iter().map(|b| format!("{b:02x}")).collect()),
            ),
        };
        DeadLetter {
            source: source.to_string(),
            peer: peer.to_string(),
            reason: reason.to_string(),
            raw: text,
            raw_hex: hex,
            raw_len: raw_len as u64,
            attempts: 1,
            first_seen_ns: now_ns,
            last_seen_ns: now_ns,
            order_id: None,
            history: Vec::new(),
            replayed_ns: None,
        }
    }

    /// Is this a dead-lettered order that can be replayed (not a marker)?
    pub fn is_replayable_order(&self) -> bool {
        self.source == "order" && self.order_id.is_some() && self.replayed_ns.is_none()
    }
}

/// Settings of the store.
#[derive(Debug, Clone)]
pub(crate) struct DlqConfig {
    /// Records kept in memory.
    pub capacity: usize,
    /// JSON-lines file every record is appended to, if any.
    pub file: Option<PathBuf>,
    /// The file is rotated when a record would take it past this size.
    pub max_bytes: u64,
    /// Capacity of the feed → DLQ thread channel (the order path has its
    /// own, [`ORDER_HANDOFF_CAPACITY`], on which it blocks).
    pub handoff_capacity: usize,
}

/// Records written between two syncs, at most (a flood still syncs, and
/// a replay waiting for its marker is answered, every this many).
const BATCH_MAX: usize = 1024;

/// Capacity of the order path → DLQ thread channel.
pub(crate) const ORDER_HANDOFF_CAPACITY: usize = 1024;

/// The in-memory side, readable from any thread.
#[derive(Debug, Default)]
pub struct DlqStore {
    ring: Mutex<VecDeque<DeadLetter>>,
    by_reason: Mutex<BTreeMap<String, u64>>,
    evicted: AtomicU64,
    capacity: usize,
    /// Replayable dead-lettered orders by id, oldest first (bounded by `capacity`).
    orders: Mutex<ReplayIndex>,
}

impl DlqStore {
    /// The newest records, oldest first, at most `limit`.
    pub fn recent(&self, limit: usize) -> Vec<DeadLetter> {
        let ring = self.ring.lock();
        let skip = ring.len().saturating_sub(limit);
        ring.iter().skip(skip).cloned().collect()
    }

    /// Records stored since start, by reason (evicted ones included).
    pub fn counts_by_reason(&self) -> BTreeMap<String, u64> {
        self.by_reason.lock().clone()
    }

    /// Records in memory now.
    pub fn len(&self) -> usize {
        self.ring.lock().len()
    }

    /// True when no record is in memory.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records evicted from memory (still in the file, if one is set).
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// The replayable dead letter of order `id`, if any.
    pub fn replayable(&self, id: &str) -> Option<DeadLetter> {
        self.orders.lock().get(id).cloned()
    }

    /// Takes order `id` out of the replay index (the caller replays it).
    pub fn take_replayable(&self, id: &str) -> Option<DeadLetter> {
        self.orders.lock().remove(id)
    }

    /// Puts a record taken with [`take_replayable`](Self::take_replayable)
    /// back (its replay could not be admitted).
    pub fn restore_replayable(&self, rec: DeadLetter) {
        self.index_order(rec);
    }

    /// Ids of every replayable order, oldest first.
    pub fn replayable_ids(&self) -> Vec<String> {
        self.orders.lock().ids()
    }

    fn index_order(&self, rec: DeadLetter) {
        let Some(id) = rec.order_id.clone() else {
            return;
        };
        let mut idx = self.orders.lock();
        if rec.replayed_ns.is_some() {
            idx.remove(&id);
        } else {
            idx.insert(id, rec);
        }
    }

    fn push(&self, rec: DeadLetter) {
        if rec.source == "order" {
            self.index_order(rec.clone());
        }
        *self.by_reason.lock().entry(rec.reason.clone()).or_default() += 1;
        let mut ring = self.ring.lock();
        if ring.len() == self.capacity {
            ring.pop_front();
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        ring.push_back(rec);
    }
}

/// A producer's handle: the feed's non-blocking channel and the order
/// path's blocking one.
#[derive(Debug, Clone)]
pub(crate) struct DlqSender {
    tx: Sender<DeadLetter>,
    order_tx: Sender<OrderRecord>,
}

/// What the order path hands the DLQ thread.
#[derive(Debug)]
struct OrderRecord {
    rec: DeadLetter,
    /// A replayable order written again after a replay that was not
    /// admitted: on disk only (memory already has it back).
    restore: bool,
    /// Told `true` once the record is synced (`false`: it could not be).
    synced: Option<Sender<bool>>,
}

/// A record the caller needed on disk is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurableError {
    /// The dead-letter file could not be written or synced.
    #[error("the dead-letter file could not be written or synced")]
    NotSynced,
    /// The DLQ thread has stopped.
    #[error("the DLQ thread has stopped")]
    Stopped,
}

impl DlqSender {
    /// Offers a record.
    ///
    /// # Errors
    /// Hands the record back when the DLQ thread's queue is full or it has stopped.
    pub(crate) fn try_send(&self, rec: DeadLetter) -> Result<(), Box<DeadLetter>> {
        self.tx.try_send(rec).map_err(|e| match e {
            TrySendError::Full(r) | TrySendError::Disconnected(r) => Box::new(r),
        })
    }

    /// Hands a dead-lettered order or a replay marker (`restore` false), or
    /// a restored replayable record (`restore` true), to the DLQ thread
    /// (waiting for room: never dropped) and waits until it is
    /// synced to the file (at once when there is no file).
    ///
    /// # Errors
    /// [`DurableError`] when it is not on disk.
    pub(crate) fn record_durably(
        &self,
        rec: DeadLetter,
        restore: bool,
    ) -> Result<(), DurableError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.order_tx
            .send(OrderRecord {
                rec,
                restore,
                synced: Some(tx),
            })
            .map_err(|_| DurableError::Stopped)?;
        match rx.recv() {
            Ok(true) => Ok(()),
            Ok(false) => Err(DurableError::NotSynced),
            Err(_) => Err(DurableError::Stopped),
        }
    }
}

/// A running DLQ thread and its store.
#[derive(Debug)]
pub(crate) struct Dlq {
    store: Arc<DlqStore>,
    handle: JoinHandle<()>,
}

impl Dlq {
    /// Rebuilds the replay index from the file (streamed), opens it for
    /// appending and starts the DLQ thread, which registers the file's
    /// sync with `watch` for the fatal path.
    ///
    /// The thread stops once every [`DlqSender`] is dropped, after writing
    /// and syncing everything it was handed.
    ///
    /// # Errors
    /// When the file cannot be read or opened or the thread cannot start.
    pub(crate) fn start(
        config: &DlqConfig,
        counters: Arc<Counters>,
        watch: &Arc<Watch>,
    ) -> std::io::Result<(Dlq, DlqSender)> {
        let store = Arc::new(DlqStore {
            capacity: config.capacity.max(1),
            orders: Mutex::new(ReplayIndex::new(config.capacity)),
            ..DlqStore::default()
        });
        let file = match &config.file {
            Some(p) => {
                // A restart: dead-lettered orders stay replayable.
                let bad = file::for_each_record(p, |rec| {
                    if rec.source == "order" {
                        store.index_order(rec);
                    }
                })?;
                if bad > 0 {
                    log::warn!(
                        "dead-letter file {}: {bad} unreadable line(s) skipped",
                        p.display()
                    );
                }
                Some(DlqFile::open(p.clone(), config.max_bytes)?)
            }
            None => None,
        };
        if let Some(f) = &file {
            let handle = f.for_fatal();
            watch.on_fatal(move || {
                if let Some(f) = handle.lock().as_ref() {
                    let _ = f.sync_data();
                }
            });
        }
        let (tx, rx) = crossbeam_channel::bounded(config.handoff_capacity.max(1));
        let (order_tx, order_rx) = crossbeam_channel::bounded(ORDER_HANDOFF_CAPACITY);
        let s = Arc::clone(&store);
        let watch = Arc::clone(watch);
        let handle = std::thread::Builder::new()
            .name("tickfan-dlq".into())
            .spawn(move || {
                let _beat = watch.guard();
                run(rx, order_rx, file, s, counters);
            })?;
        Ok((Dlq { store, handle }, DlqSender { tx, order_tx }))
    }

    /// The in-memory store.
    pub(crate) fn store(&self) -> &Arc<DlqStore> {
        &self.store
    }

    /// Waits for the thread to write everything and stop (all senders dropped).
    pub(crate) fn finish(self) {
        let _ = self.handle.join();
    }
}

fn run(
    rx: Receiver<DeadLetter>,
    order_rx: Receiver<OrderRecord>,
    mut file: Option<DlqFile>,
    store: Arc<DlqStore>,
    counters: Arc<Counters>,
) {
    let mut failed = false;
    let mut waiting: Vec<Sender<bool>> = Vec::new();
    let (mut feed_open, mut order_open) = (true, true);
    while feed_open || order_open {
        let mut sel = crossbeam_channel::Select::new();
        let feed_i = feed_open.then(|| sel.recv(&rx));
        let order_i = order_open.then(|| sel.recv(&order_rx));
        let op = sel.select();
        let i = op.index();
        let first = if Some(i) == feed_i {
            match op.recv(&rx) {
                Ok(r) => plain(r),
                Err(_) => {
                    feed_open = false;
                    continue;
                }
            }
        } else {
            debug_assert_eq!(Some(i), order_i);
            match op.recv(&order_rx) {
                Ok(r) => r,
                Err(_) => {
                    order_open = false;
                    continue;
                }
            }
        };
        // One batch: what is waiting now (at most BATCH_MAX), then one sync.
        let mut batch_ok = true;
        let mut taken = 0usize;
        let mut next = Some(first);
        while let Some(OrderRecord {
            rec,
            restore,
            synced,
        }) = next
        {
            if let Some(f) = file.as_mut() {
                if let Err(e) = f.write(&rec) {
                    batch_ok = false;
                    if !failed {
                        error_repeating!(
                            WarnKind::DlqFileFailed,
                            "dead-letter file write failed: {e}; records stay in memory only"
                        );
                        failed = true;
                    }
                }
            }
            waiting.extend(synced);
            if restore {
                // Memory has it back already: the line is for a restart.
            } else if rec.replayed_ns.is_some() {
                // A marker: the file keeps it; memory only updates the index.
                store.index_order(rec);
            } else {
                store.push(rec);
                bump(&counters.dlq.stored, 1);
            }
            taken += 1;
            next = (taken < BATCH_MAX)
                .then(|| {
                    order_rx
                        .try_recv()
                        .ok()
                        .or_else(|| rx.try_recv().ok().map(plain))
                })
                .flatten();
        }
        if let Some(f) = file.as_mut() {
            if let Err(e) = f.sync() {
                batch_ok = false;
                if !failed {
                    error_repeating!(
                        WarnKind::DlqFileFailed,
                        "dead-letter file sync failed: {e}; records may not survive a crash"
                    );
                    failed = true;
                }
            }
        }
        for w in waiting.drain(..) {
            let _ = w.send(batch_ok);
        }
    }
    if let Some(f) = file.as_mut() {
        let _ = f.sync();
    }
}

fn plain(rec: DeadLetter) -> OrderRecord {
    OrderRecord {
        rec,
        restore: false,
        synced: None,
    }
}

/// Reads every record of a DLQ file (e.g. after a restart).
///
/// # Errors
/// When the file cannot be read or a line is not a record.
pub fn read_file(path: &std::path::Path) -> std::io::Result<Vec<DeadLetter>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DLQ writing to `path`, keeping `capacity` records in memory and
    /// rotating past `max_bytes`.
    fn file_config(path: &std::path::Path, capacity: usize, max_bytes: u64) -> DlqConfig {
        DlqConfig {
            capacity,
            file: Some(path.to_path_buf()),
            handoff_capacity: 64,
            max_bytes,
        }
    }

    fn rec(reason: &str, raw: &[u8]) -> DeadLetter {
        DeadLetter::refused("feed", "127.0.0.1:1", reason, raw, raw.len(), 1)
    }

    #[test]
    fn bounded_memory_and_every_record_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let cfg = file_config(&path, 3, 1 << 20);
        let counters = Arc::new(Counters::default());
        let (dlq, tx) = Dlq::start(&cfg, Arc::clone(&counters), &Arc::default()).unwrap();
        for i in 0..10u8 {
            tx.try_send(rec(
                if i % 2 == 0 {
                    "bad_number"
                } else {
                    "empty_field"
                },
                &[b'a' + i],
            ))
            .unwrap();
        }
        drop(tx);
        let store = Arc::clone(dlq.store());
        dlq.finish();
        assert_eq!(store.len(), 3);
        assert_eq!(store.evicted(), 7);
        assert_eq!(store.recent(10).last().unwrap().raw, "j");
        assert_eq!(store.counts_by_reason()["bad_number"], 5);
        let back = read_file(&path).unwrap();
        assert_eq!(back.len(), 10);
        assert_eq!(back[0], rec("bad_number", b"a"));
    }

    #[test]
    fn invalid_utf8_keeps_hex_and_long_input_is_cut() {
        let r = rec("invalid_utf8", &[0xff, b'x']);
        assert_eq!(r.raw_hex.as_deref(), Some("ff78"));
        let long = vec![b'z'; 2000];
        let r = DeadLetter::refused("feed", "p", "line_too_long", &long, 10_000_000, 0);
        assert_eq!((r.raw.len(), r.raw_len), (RAW_MAX, 10_000_000));
    }

    fn order(id: &str) -> DeadLetter {
        let mut r = DeadLetter::refused("order", "p", "bridge_rejected", b"NEW", 3, 1);
        r.order_id = Some(id.to_string());
        r
    }

    #[test]
    fn a_marker_is_synced_before_record_durably_returns_and_a_restore_makes_it_replayable_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let cfg = file_config(&path, 2, 1 << 20);
        let start = || Dlq::start(&cfg, Arc::new(Counters::default()), &Arc::default()).unwrap();
        let (dlq, tx) = start();
        // Waits until written (and indexed) this time.
        tx.record_durably(order("a"), false).unwrap();
        let taken = dlq.store().take_replayable("a");
        // Before the marker is synced the caller would have the order in hand.
        let mut marker = order("a");
        marker.replayed_ns = Some(2);
        tx.record_durably(marker, false).unwrap();
        let on_disk = read_file(&path).unwrap();
        assert_eq!(
            on_disk.len(),
            2,
            "the marker is in the file when it returns"
        );
        assert!(on_disk[1].replayed_ns.is_some());
        // Not admitted after all: back in memory, and in the file.
        dlq.store().restore_replayable(taken.unwrap());
        tx.record_durably(order("a"), true).unwrap();
        assert_eq!(dlq.store().len(), 1, "a restore is not a new dead letter");
        drop(tx);
        dlq.finish();
        let (dlq, tx) = start();
        assert!(
            dlq.store().replayable("a").is_some(),
            "replayable after a restart"
        );
        drop(tx);
        dlq.finish();
    }

    #[test]
    fn the_replay_index_rebuilt_at_start_is_bounded_by_the_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let cfg = file_config(&path, 3, 4096);
        let (dlq, tx) = Dlq::start(&cfg, Arc::new(Counters::default()), &Arc::default()).unwrap();
        for i in 0..100 {
            tx.record_durably(order(&format!("o{i}")), false).unwrap();
        }
        drop(tx);
        dlq.finish();
        assert!(path.with_extension("1").exists(), "rotated at 4 KiB");
        let (dlq, tx) = Dlq::start(&cfg, Arc::new(Counters::default()), &Arc::default()).unwrap();
        assert_eq!(dlq.store().replayable_ids(), ["o97", "o98", "o99"]);
        drop(tx);
        dlq.finish();
    }
}
