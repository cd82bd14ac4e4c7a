//! The journal at engine start: recover the segments in `--data-dir`,
//! rebuild what the order path needs from them, and start the journal
//! thread.
//!
//! From the records, in journal order: an `Accepted` order with no later
//! `Terminal` is re-queued (in admission order, with a fresh admission
//! number, no connection to answer, its deadline carried over on the wall
//! clock); every id accepted within `--dedup-retention` is remembered by
//! the dedup store with its original age, so a `NEW` with an id accepted
//! before the crash is still a `DUPLICATE`, and with its `STATUS` (the
//! terminal state its `Terminal` record names, or `QUEUED` with its
//! quantity when it is re-queued); a re-queued order carries its last
//! journaled fill (number, cum, amount) so its fill numbers continue
//! without a repeat.

use std::sync::Arc;
use std::thread::JoinHandle;

use indexmap::IndexMap;

use crate::model::order_reasons::{DeadReason, DoneStatus};
use crate::model::units::Lots;
use crate::order::accepted::{Order, Resumed};
use crate::order::config::OrderConfig;
use crate::order::gateway::dedup::{Dedup, IdState};
use crate::order::gateway::status::OrderStatus;
use crate::order::lanes::events::EventKind;
use crate::sys::clock::wall_ns;

use super::files::DirFiles;
use super::record::{Record, TerminalState};
use super::recover::{recover, RecoverError};
use super::writer::{Journal, JournalLimits, Notify};

/// Largest segment; smaller when `--journal-max-bytes` is small, so old
/// segments can be retired one by one.
const SEGMENT_BYTES: u64 = 64 << 20;

/// The connection id of recovered orders: no live connection ever has it.
pub(crate) const NO_CONN: u64 = u64::MAX;

/// The journal, started, and what was recovered from it.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The handle.
    pub journal: Journal,
    /// The journal thread.
    pub thread: JoinHandle<()>,
    /// Orders accepted and not terminal, in admission order (seq 1..).
    pub orders: Vec<Order>,
    /// The highest fencing token journaled (0: none): new attempts take
    /// tokens above it.
    pub last_fence_token: u64,
}

/// The parent id and index of a chunk id (`<parent id>.c<index>`).
fn chunk_of(id: &str) -> Option<(&str, u32)> {
    let (parent, i) = id.rsplit_once(".c")?;
    Some((parent, i.parse().ok()?))
}

/// The `STATUS` of a journaled order after a restart, and its dedup state:
/// `QUEUED` with its quantity (and the fills already sent) when it has no
/// `Terminal` record (it is re-queued), else the terminal state the record names, with its cum,
/// amount and attempts. A `Rejected` one (refused before its `ACK`) keeps
/// the id taken, as before the restart, and shows `DONE FAILED`: it never ran.
fn restored_status(qty: Lots, end: Option<&Record>, resumed: &Resumed) -> (OrderStatus, IdState) {
    let mut st = OrderStatus::queued(qty);
    if resumed.fills > 0 {
        st.apply(&EventKind::Fill {
            n: resumed.fills,
            cum: resumed.cum,
            amount: resumed.amount,
            left: Lots(qty.0.saturating_sub(resumed.cum.0)),
        });
    }
    let Some(Record::Terminal {
        state,
        reason,
        cum,
        amount,
        attempts,
        ..
    }) = end
    else {
        return (st, IdState::Live);
    };
    let attempts = *attempts;
    let (ev, id_state) = match state {
        TerminalState::Done | TerminalState::Rejected => {
            let status = DoneStatus::ALL
                .into_iter()
                .find(|d| d.as_str() == reason)
                .unwrap_or(DoneStatus::of(*cum, qty));
            let ev = EventKind::Done {
                status,
                cum: *cum,
                amount: *amount,
                attempts,
            };
            (ev, IdState::Done)
        }
        TerminalState::Dead => {
            let dead = DeadReason::ALL
                .into_iter()
                .find(|d| d.as_str() == reason)
                .unwrap_or(DeadReason::RetriesExhausted);
            let ev = EventKind::Dead {
                reason: dead,
                attempts,
                last: "recovered".into(),
            };
            (ev, IdState::Dead)
        }
        TerminalState::Expired => (EventKind::Expired { attempts }, IdState::Done),
    };
    st.apply(&ev);
    (st, id_state)
}

/// Recovers `c.data_dir`, fills `dedup`, and starts the journal thread.
///
/// # Errors
/// The journal cannot be read (see [`RecoverError`]) or the first new
/// segment cannot be created.
pub(crate) fn open(
    c: &OrderConfig,
    dedup: &mut Dedup,
    now_ns: u64,
    mono_ns: u64,
    notify: Notify,
) -> Result<Opened, RecoverError> {
    // id → (its Accepted record, its Terminal record if any, its fills
    // sent), in acceptance order.
    let mut seen: IndexMap<String, (Record, Option<Record>, Resumed)> = IndexMap::new();
    let mut last_fence_token = 0;
    let r = recover(&c.data_dir, |rec| match rec {
        Record::Accepted { ref id, .. } => {
            seen.shift_remove(id);
            seen.insert(id.clone(), (rec, None, Resumed::default()));
        }
        Record::Terminal { ref id, .. } => {
            if let Some(e) = seen.get_mut(id) {
                e.1 = Some(rec);
            }
        }
        Record::FillApplied {
            id,
            fill_no,
            cum,
            amount,
        } => {
            if let Some(e) = seen.get_mut(&id) {
                if fill_no > e.2.fills {
                    e.2.fills = fill_no;
                    e.2.cum = cum;
                    e.2.amount = amount;
                }
            }
        }
        Record::AttemptSent {
            id,
            bridge,
            fence_token,
        } => {
            last_fence_token = last_fence_token.max(fence_token);
            if let Some(e) = seen.get_mut(&id) {
                e.2.bridge = Some(bridge.into());
            } else if let Some((parent, i)) = chunk_of(&id) {
                // A chunk of a large order (`<parent id>.c<index>`).
                if let Some(e) = seen.get_mut(parent) {
                    let cb = &mut e.2.chunk_bridges;
                    cb.retain(|c| c.0 != i);
                    cb.push((i, bridge.into()));
                }
            }
        }
        Record::Replay { .. } => {}
    })?;
    let wall = wall_ns();
    let retention = c.dedup_retention.as_nanos() as u64;
    let mut orders = Vec::new();
    for (id, (rec, end, resumed)) in seen {
        let Record::Accepted {
            symbol,
            side,
            qty,
            deadline_wall_ns,
            recv_wall_ns,
            raw,
            ..
        } = rec
        else {
            continue;
        };
        let age = wall.saturating_sub(recv_wall_ns);
        if age < retention && dedup.check(&id, now_ns, false).is_ok() {
            let since = now_ns.saturating_sub(age);
            dedup.insert(&id, since);
            let (status, state) = restored_status(qty, end.as_ref(), &resumed);
            if let Some(st) = dedup.track(&id) {
                *st = status;
            }
            if end.is_some() {
                dedup.mark(&id, state, since);
            }
        }
        if end.is_some() {
            continue;
        }
        orders.push(Order {
            seq: orders.len() as u64 + 1,
            conn: NO_CONN,
            id: Arc::from(id.as_str()),
            symbol: symbol.into(),
            side,
            qty,
            raw: raw.into(),
            peer: Arc::from("recovered"),
            recv_mono_ns: mono_ns,
            enq_mono_ns: mono_ns,
            deadline_ns: deadline_wall_ns.map(|d| now_ns.saturating_add(d.saturating_sub(wall))),
            recv_wall_ns,
            history: Vec::new(),
            next_delay: (0, 0),
            retry_due_ns: 0,
            replay: false,
            lane: c.lanes.lane_of(qty),
            chunk: None,
            resumed,
            claim: Default::default(),
        });
    }
    if !orders.is_empty() || r.records > 0 {
        log::info!(
            "journal {}: {} records in {} segments, {} orders re-queued",
            c.data_dir.display(),
            r.records,
            r.segments.len(),
            orders.len()
        );
    }
    let limits = JournalLimits {
        max_bytes: c.journal_max_bytes,
        segment_bytes: SEGMENT_BYTES.min(c.journal_max_bytes / 8).max(4096),
        retain_ns: c.dedup_retention.as_nanos() as u64,
    };
    let next = r.next_segment();
    let (journal, thread) = Journal::start(
        Box::new(DirFiles {
            dir: c.data_dir.clone(),
            reserve: limits.segment_bytes,
        }),
        limits,
        next,
        r.segments,
        notify,
    )
    .map_err(|source| RecoverError::Io {
        path: c.data_dir.join(super::segment::file_name(next)),
        source,
    })?;
    Ok(Opened {
        journal,
        thread,
        orders,
        last_fence_token,
    })
}
