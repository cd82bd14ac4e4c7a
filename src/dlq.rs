//! The dead-letter store: where poison input goes, with its reason, instead
//! of being retried or silently dropped.
//!
//! Producers hand records to the DLQ thread over bounded channels, one per
//! path:
//!
//! * the **feed** never blocks on it: when its channel is full the record is
//!   counted as dropped (its poison counter still counts it); a flood of
//!   poison must not stall ingest;
//! * the **order path** blocks on its own channel ([`DlqSender::send_order`]):
//!   a dead-lettered order is an accepted order the client was promised an
//!   answer for and that may be replayed, so it is never dropped. A slow disk
//!   slows the workers down, the lane queues fill and new orders get
//!   `SYSTEM_BUSY`: backpressure ends at the admission bound, not in a lost
//!   record. The separate channel means a feed flood cannot take its room.
//!
//! The DLQ thread is the single writer of the store: it appends each record
//! as one JSON line to the optional file (so nothing is lost on restart) and
//! keeps the newest `capacity` records in memory for listing; older ones are
//! evicted from memory (counted), never from the file.
//!
//! Dead-lettered orders are also kept in a replay index (by order id, newest
//! `capacity` ids), rebuilt from the file at start, so `REPLAY <id>` on the
//! order port works after a restart. A replay appends a marker line (the
//! record with `replayed_ns` set) so a replayed order is not replayable again
//! after the next restart.

use std::collections::{BTreeMap, VecDeque};

use indexmap::IndexMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;

use crate::metrics::counters::{bump, Counters};

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
    /// Capacity of the feed → DLQ thread channel (the order path has its
    /// own, [`ORDER_HANDOFF_CAPACITY`], on which it blocks).
    pub handoff_capacity: usize,
}

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
    orders: Mutex<IndexMap<String, DeadLetter>>,
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
        self.orders.lock().shift_remove(id)
    }

    /// Puts a record taken with [`take_replayable`](Self::take_replayable)
    /// back (its replay could not be admitted).
    pub fn restore_replayable(&self, rec: DeadLetter) {
        self.index_order(rec);
    }

    /// Ids of every replayable order, oldest first.
    pub fn replayable_ids(&self) -> Vec<String> {
        self.orders.lock().keys().cloned().collect()
    }

    fn index_order(&self, rec: DeadLetter) {
        let Some(id) = rec.order_id.clone() else {
            return;
        };
        let mut idx = self.orders.lock();
        if rec.replayed_ns.is_some() {
            idx.shift_remove(&id);
            return;
        }
        idx.shift_remove(&id);
        if idx.len() >= self.capacity {
            idx.shift_remove_index(0);
        }
        idx.insert(id, rec);
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
    order_tx: Sender<DeadLetter>,
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

    /// Hands a dead-lettered order (or a replay marker) to the DLQ thread,
    /// waiting for room: never dropped.
    ///
    /// # Errors
    /// Hands the record back only when the DLQ thread has stopped.
    pub(crate) fn send_order(&self, rec: DeadLetter) -> Result<(), Box<DeadLetter>> {
        self.order_tx.send(rec).map_err(|e| Box::new(e.0))
    }
}

/// A running DLQ thread and its store.
#[derive(Debug)]
pub(crate) struct Dlq {
    store: Arc<DlqStore>,
    handle: JoinHandle<()>,
}

impl Dlq {
    /// Opens the file (append mode) and starts the DLQ thread.
    ///
    /// The thread stops once every [`DlqSender`] is dropped, after writing
    /// everything it was handed.
    ///
    /// # Errors
    /// When the file cannot be opened or the thread cannot start.
    pub(crate) fn start(
        config: &DlqConfig,
        counters: Arc<Counters>,
    ) -> std::io::Result<(Dlq, DlqSender)> {
        let previous = match &config.file {
            Some(p) if p.exists() => read_file_lenient(p)?,
            _ => Vec::new(),
        };
        let file = match &config.file {
            Some(p) => Some(BufWriter::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        let store = Arc::new(DlqStore {
            capacity: config.capacity.max(1),
            ..DlqStore::default()
        });
        // A restart: dead-lettered orders stay replayable.
        for rec in previous.into_iter().filter(|r| r.source == "order") {
            store.index_order(rec);
        }
        let (tx, rx) = crossbeam_channel::bounded(config.handoff_capacity.max(1));
        let (order_tx, order_rx) = crossbeam_channel::bounded(ORDER_HANDOFF_CAPACITY);
        let s = Arc::clone(&store);
        let handle = std::thread::Builder::new()
            .name("tickfan-dlq".into())
            .spawn(move || run(rx, order_rx, file, s, counters))?;
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
    order_rx: Receiver<DeadLetter>,
    mut file: Option<BufWriter<File>>,
    store: Arc<DlqStore>,
    counters: Arc<Counters>,
) {
    let mut file_failed = false;
    let (mut feed_open, mut order_open) = (true, true);
    while feed_open || order_open {
        let mut sel = crossbeam_channel::Select::new();
        let feed_i = feed_open.then(|| sel.recv(&rx));
        let order_i = order_open.then(|| sel.recv(&order_rx));
        let op = sel.select();
        let i = op.index();
        let first = if Some(i) == feed_i {
            match op.recv(&rx) {
                Ok(r) => r,
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
        let mut next = Some(first);
        while let Some(rec) = next {
            if let Some(f) = file.as_mut() {
                let line = serde_json::to_string(&rec).expect("dead letter serialises");
                if let Err(e) = writeln!(f, "{line}") {
                    if !file_failed {
                        log::error!(
                            "dead-letter file write failed: {e}; records stay in memory only"
                        );
                        file_failed = true;
                    }
                }
            }
            if rec.replayed_ns.is_some() {
                // A marker: the file keeps it; memory only updates the index.
                store.index_order(rec);
            } else {
                store.push(rec);
                bump(&counters.dlq_stored, 1);
            }
            next = order_rx.try_recv().or_else(|_| rx.try_recv()).ok();
        }
        if let Some(f) = file.as_mut() {
            let _ = f.flush();
        }
    }
    if let Some(f) = file.as_mut() {
        let _ = f.flush();
    }
}

/// Reads a DLQ file at start, skipping lines that do not parse (a line cut
/// by a crash must not stop the engine from starting); says how many once.
fn read_file_lenient(path: &std::path::Path) -> std::io::Result<Vec<DeadLetter>> {
    let text = std::fs::read_to_string(path)?;
    let mut bad = 0usize;
    let recs = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).map_err(|_| bad += 1).ok())
        .collect();
    if bad > 0 {
        log::warn!(
            "dead-letter file {}: {bad} unreadable line(s) skipped",
            path.display()
        );
    }
    Ok(recs)
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

    fn rec(reason: &str, raw: &[u8]) -> DeadLetter {
        DeadLetter::refused("feed", "127.0.0.1:1", reason, raw, raw.len(), 1)
    }

    #[test]
    fn bounded_memory_and_every_record_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let cfg = DlqConfig {
            capacity: 3,
            file: Some(path.clone()),
            handoff_capacity: 64,
        };
        let counters = Arc::new(Counters::default());
        let (dlq, tx) = Dlq::start(&cfg, Arc::clone(&counters)).unwrap();
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
}
