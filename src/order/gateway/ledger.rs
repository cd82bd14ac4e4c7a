//! The gateway's order ledger: everything it does for an order line apart
//! from the sockets. Parses the line, applies the per-connection rate
//! limit and idempotency ([`Dedup`]), offers the order to its lane (full →
//! `SYSTEM_BUSY` at once), re-admits dead letters on `REPLAY`, and turns
//! the workers' [`Event`]s into reply lines. Owned by the gateway thread
//! alone, like the dedup store and the order counters it writes.

use std::sync::Arc;

use bytes::BytesMut;
use crossbeam_channel::Receiver;

use crate::dlq::{DlqSender, DlqStore};
use crate::metrics::counters::{bump, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::retry::SharedClock;
use crate::sys::clock::{wall_ns, MonoClock};

use crate::model::lane::Lane;
use crate::model::order_reasons::{InvalidReason, RejectReason};
use crate::model::units::{Amount, Lots};
use crate::net::ConnId;
use crate::order::msg::admission::{Admission, Busy};
use crate::order::msg::event::e2e_stage;
use crate::order::msg::event::{Event, EventKind};
use crate::order::msg::order::Order;

use super::acct::AcctKeys;
use super::cancel::CancelBook;
use super::codec::{
    parse_request, write_dead, write_done, write_fill, write_reject, NewOrder, Request,
};
use super::dedup::{Dedup, IdState, Refusal};
use super::pending_acks::PendingAcks;
use super::send_on::Owed;
use super::status::{write_status, OrderStatus};
use crate::order::msg::claim::Cancelled;
use crate::order::msg::journal::AppendError;
use crate::order::msg::record::{Record, TerminalState};
use crate::rate_limit::RateLimit;

/// The gateway's state apart from the sockets.
///
/// Over 15 fields: it is the one owner of everything a request line may
/// touch (dedup, cancels, account keys, pending `ACK`s, admission), each
/// kept in its own type; grouping them further would only add a hop to
/// every handler. Single writer: the gateway thread.
#[derive(Debug)]
pub(super) struct Ledger {
    pub(super) admission: Option<Admission>,
    pub(super) events: Receiver<Event>,
    pub(super) dedup: Dedup,
    pub(super) dlq_store: Arc<DlqStore>,
    pub(super) dlq: Option<DlqSender>,
    pub(super) counters: Arc<Counters>,
    pub(super) recorder: StageRecorder,
    pub(super) mono: MonoClock,
    pub(super) clock: SharedClock,
    pub(super) next_seq: u64,
    pub(super) in_flight: u64,
    /// Rejects written this turn (their latency is recorded after the write).
    pub(super) rejects: u64,
    /// The detail of a queue-full reject per lane (by [`Lane::index`]),
    /// formatted once (the overload path must stay cheap).
    pub(super) busy_detail: [String; 2],
    /// `--max-order-rate`, for the refusal's text.
    pub(super) max_order_rate: u32,
    /// With the journal on: orders waiting for their record to be durable
    /// before their `ACK` (`None`: `--no-journal`, `ACK` at once).
    pub(super) pending: Option<PendingAcks>,
    /// The kill switch (`POST /orders/halt`): while on, `NEW` is refused.
    pub(super) halt: Arc<crate::order::msg::halt::Halt>,
    /// The orders `CANCEL` may still reach, and the cancels not yet answered.
    pub(super) cancels: CancelBook,
    /// Per-account ordering: the active (account, symbol) keys and the
    /// followers parked behind their heads.
    pub(super) acct: AcctKeys,
    /// Terminal records refused while the journal's disk was full, written
    /// once it has room ([`Ledger::rejournal`]), so an order that ended
    /// meanwhile is not run again after a later restart. Bounded: no order
    /// is accepted while the disk is full, so at most the orders in flight
    /// when it filled end meanwhile (and at most [`UNJOURNALED_MAX`]).
    pub(super) unjournaled: Vec<Record>,
}

/// Most terminal records kept for a disk that has no room; past it a record
/// is dropped (as if lost in a crash: a restart re-runs its order under its
/// idempotent id).
const UNJOURNALED_MAX: usize = 1 << 16;

impl Ledger {
    pub(super) fn handle_line(
        &mut self,
        conn: ConnId,
        peer: &Arc<str>,
        out: &mut BytesMut,
        live: &mut u64,
        rate: &mut Option<RateLimit>,
        line: &[u8],
    ) {
        match parse_request(line) {
            Ok(Request::Blank) => {}
            Ok(Request::Ping) => out.extend_from_slice(b"PONG\n"),
            Ok(Request::Status(id)) => {
                write_status(out, id, self.dedup.status(id, self.clock.now_ns()));
            }
            Ok(Request::Cancel(id)) => {
                let status = self.dedup.status(id, self.clock.now_ns());
                let journal = self.pending.as_ref().map(PendingAcks::journal);
                match self.cancels.cancel(id, status, Some(conn), journal) {
                    Ok(Cancelled::Whole) => {}
                    // The fill thread answers once every chunk has ended.
                    Ok(Cancelled::Chunks) => bump(&self.counters.orders.cancelled, 1),
                    Err((reason, detail)) => self.reject(out, id, reason, detail),
                }
            }
            Ok(Request::New(o)) if !self.within_rate(rate, out, o.id) => {}
            Ok(Request::Replay(id)) if !self.within_rate(rate, out, id) => {}
            Ok(Request::New(o)) => {
                let raw = std::str::from_utf8(line.strip_suffix(b"\r").unwrap_or(line))
                    .expect("a parsed line is UTF-8")
                    .trim();
                if self.admit(conn, peer, out, &o, raw, false) {
                    *live += 1;
                }
            }
            Ok(Request::Replay(id)) => {
                if self.replay(conn, peer, out, id) {
                    *live += 1;
                }
            }
            Err(inv) => {
                let detail = inv.detail.clone();
                self.reject_invalid(out, inv.id, inv.reason, &detail);
            }
        }
    }

    /// Takes one order's budget; over the rate, writes the refusal and
    /// returns false. Before dedup: a refused order was not accepted, so
    /// its id may be sent again.
    fn within_rate(&mut self, rate: &mut Option<RateLimit>, out: &mut BytesMut, id: &str) -> bool {
        let Some(r) = rate else { return true };
        if r.try_take(self.clock.now_ns()) {
            return true;
        }
        bump(&self.counters.orders.rate_limited, 1);
        let detail = format!(
            "rate_limited: over {} orders/s on this connection",
            self.max_order_rate
        );
        self.reject(out, id, RejectReason::SystemBusy, &detail);
        false
    }

    pub(super) fn reject_invalid(
        &mut self,
        out: &mut BytesMut,
        id: &str,
        reason: InvalidReason,
        detail: &str,
    ) {
        bump(&self.counters.orders.invalid[reason.index()], 1);
        let text = format!("{}: {detail}", reason.as_str());
        self.reject(out, id, RejectReason::Invalid, &text);
    }

    fn reject(&mut self, out: &mut BytesMut, id: &str, reason: RejectReason, detail: &str) {
        bump(&self.counters.orders.rejected[reason.index()], 1);
        self.rejects += 1;
        write_reject(out, id, reason, detail);
    }

    /// Admits one order; true if accepted (`ACK` written).
    fn admit(
        &mut self,
        conn: ConnId,
        peer: &Arc<str>,
        out: &mut BytesMut,
        o: &NewOrder<'_>,
        raw: &str,
        replay: bool,
    ) -> bool {
        let now = self.clock.now_ns();
        let Some(admission) = &self.admission else {
            self.reject(out, o.id, RejectReason::SystemBusy, "shutting down");
            return false;
        };
        if self.halt.is_halted() {
            bump(&self.counters.orders.halted_rejects, 1);
            self.reject(out, o.id, RejectReason::SystemBusy, "halted");
            return false;
        }
        match self.dedup.check(o.id, now, replay) {
            Ok(()) => {}
            Err(Refusal::Duplicate { since_ns, state }) => {
                let state = match state {
                    IdState::Live => "in flight",
                    IdState::Done => "ended",
                    IdState::Dead => "dead-lettered; REPLAY it instead",
                };
                let detail = format!(
                    "id accepted {} ms ago ({state})",
                    now.saturating_sub(since_ns) / 1_000_000
                );
                self.reject(out, o.id, RejectReason::Duplicate, &detail);
                return false;
            }
            Err(Refusal::Full) => {
                self.reject(
                    out,
                    o.id,
                    RejectReason::SystemBusy,
                    "dedup_full: too many recent order ids",
                );
                return false;
            }
        }
        let mono = self.mono.now_ns();
        let id: Arc<str> = Arc::from(o.id);
        let acct_key = o.acct.map(|a| super::acct::key(a, o.symbol));
        if let Some(k) = &acct_key {
            if let Err(full) = self.acct.reserve(&id, k, false) {
                self.reject(out, o.id, RejectReason::SystemBusy, &full.to_string());
                return false;
            }
        }
        self.next_seq += 1;
        let order = Order {
            seq: self.next_seq,
            conn,
            id: Arc::clone(&id),
            symbol: o.symbol.into(),
            side: o.side,
            qty: o.qty,
            raw: raw.into(),
            acct_key,
            peer: Arc::clone(peer),
            recv_mono_ns: mono,
            enq_mono_ns: mono,
            deadline_ns: o.ttl.map(|t| now.saturating_add(t.as_nanos() as u64)),
            recv_wall_ns: wall_ns(),
            history: Vec::new(),
            next_delay: (0, 0),
            retry_due_ns: 0,
            replay,
            lane: Lane::Small, // set by `offer`
            chunk: None,
            resumed: Default::default(),
            claim: Default::default(),
        };
        let lane = admission.lane_of(order.qty);
        // Followers parked behind their key's head count as queued in their lane.
        let parked = self.acct.parked_in(lane);
        if let Some(p) = &mut self.pending {
            if admission.lane_depth(lane) + p.held_in(lane) + parked >= admission.capacity_of(lane)
            {
                self.acct.ended(&id);
                let detail = std::mem::take(&mut self.busy_detail[lane.index()]);
                self.reject(out, o.id, RejectReason::SystemBusy, &detail);
                self.busy_detail[lane.index()] = detail;
                return false;
            }
            let rec = Record::Accepted {
                seq: order.seq,
                id: o.id.to_owned(),
                symbol: o.symbol.to_owned(),
                side: o.side,
                qty: o.qty,
                lane,
                deadline_wall_ns: o
                    .ttl
                    .map(|t| order.recv_wall_ns.saturating_add(t.as_nanos() as u64)),
                recv_wall_ns: order.recv_wall_ns,
                raw: raw.to_owned(),
            };
            let detail = match p.journal().append(&rec) {
                Ok(lsn) => {
                    self.dedup.insert(o.id, now);
                    if let Some(st) = self.dedup.track(o.id) {
                        *st = OrderStatus::queued(o.qty);
                    }
                    let mut order = order;
                    order.lane = lane;
                    p.hold(lsn, order);
                    self.in_flight += 1;
                    return true;
                }
                Err(AppendError::Full) => {
                    bump(&self.counters.orders.journal_full_rejects, 1);
                    "journal_full: the journal is at --journal-max-bytes".to_owned()
                }
                Err(AppendError::DiskFull) => {
                    bump(&self.counters.orders.journal_full_rejects, 1);
                    super::JOURNAL_DISK_FULL.to_owned()
                }
                Err(AppendError::Failed(e)) => format!("journal_error: {e}"),
                Err(AppendError::Stopped) => "shutting down".to_owned(),
            };
            self.acct.ended(&id);
            self.reject(out, o.id, RejectReason::SystemBusy, &detail);
            return false;
        }
        // No journal: on its way now, `ACK`ed at once.
        match self.send_on(order, Owed::Ack(Some(&mut *out)), true) {
            Ok(()) => {
                self.dedup.insert(o.id, now);
                if let Some(st) = self.dedup.track(o.id) {
                    *st = OrderStatus::queued(o.qty);
                }
                self.in_flight += 1;
                true
            }
            Err(Busy(back)) => {
                self.acct.ended(&id);
                let lane = back.lane.index();
                let detail = std::mem::take(&mut self.busy_detail[lane]);
                self.reject(out, o.id, RejectReason::SystemBusy, &detail);
                self.busy_detail[lane] = detail;
                false
            }
        }
    }

    /// `REPLAY <id>`: admits the dead-lettered order again; true if accepted.
    fn replay(&mut self, conn: ConnId, peer: &Arc<str>, out: &mut BytesMut, id: &str) -> bool {
        let Some(rec) = self.dlq_store.take_replayable(id) else {
            let detail = match self.dedup.state(id, self.clock.now_ns()) {
                Some(IdState::Live) => "order is in flight, not dead-lettered",
                Some(IdState::Done) => "order ended, not dead-lettered",
                _ => "no dead-lettered order with this id",
            };
            self.reject_invalid(out, id, InvalidReason::NotReplayable, detail);
            return false;
        };
        let raw = rec.raw.clone();
        let o = match parse_request(raw.as_bytes()) {
            Ok(Request::New(o)) if o.id == id => o,
            _ => {
                self.reject_invalid(
                    out,
                    id,
                    InvalidReason::NotReplayable,
                    "dead letter does not hold a NEW line for this id",
                );
                return false;
            }
        };
        // The marker is on disk before the order is admitted again: a crash
        // in between leaves it not replayable, never executed twice. Rare
        // and operator-driven: waiting for the DLQ thread's sync is fine.
        let mut marker = rec.clone();
        marker.replayed_ns = Some(wall_ns());
        marker.last_seen_ns = wall_ns();
        if let Some(dlq) = &self.dlq {
            if let Err(e) = dlq.record_durably(marker, false) {
                log::error!("replay of order {id} refused: its replay record is not stored: {e}");
                self.dlq_store.restore_replayable(rec);
                self.reject(
                    out,
                    id,
                    RejectReason::SystemBusy,
                    "dlq_unsynced: the replay record could not be stored",
                );
                return false;
            }
        }
        if !self.admit(conn, peer, out, &o, &raw, true) {
            // Replayable again, in memory and (after a restart) on disk.
            self.dlq_store.restore_replayable(rec.clone());
            if let Some(dlq) = &self.dlq {
                if let Err(e) = dlq.record_durably(rec, true) {
                    log::error!("order {id} is replayable until the next restart only: {e}");
                }
            }
            return false;
        }
        bump(&self.counters.orders.replays, 1);
        true
    }

    /// Counts an event, updates the dedup state and the order's `STATUS`,
    /// and records a terminal event's latency. Its reply line is
    /// [`write_event`]'s, written when the connection is still open.
    /// `journaled`: its terminal record is in the journal already (a
    /// cancel, `cancel.rs`).
    pub(super) fn apply(&mut self, ev: &Event, journaled: bool) {
        let id = &*ev.id;
        if let Some(st) = self.dedup.track(id) {
            st.apply(&ev.kind);
        }
        let o = &self.counters.orders;
        match &ev.kind {
            EventKind::Attempt | EventKind::Parked => {}
            EventKind::Fill { .. } => bump(&o.fills, 1),
            EventKind::Done {
                status, attempts, ..
            } => {
                bump(&o.done[status.index()], 1);
                bump(&o.attempts, u64::from(*attempts));
                self.dedup.mark(id, IdState::Done, self.clock.now_ns());
            }
            EventKind::Dead {
                reason, attempts, ..
            } => {
                bump(&o.dead[reason.index()], 1);
                bump(&o.attempts, u64::from(*attempts));
                self.dedup.mark(id, IdState::Dead, self.clock.now_ns());
            }
            EventKind::Expired { attempts } => {
                bump(&o.rejected[RejectReason::Expired.index()], 1);
                bump(&o.attempts, u64::from(*attempts));
                self.dedup.mark(id, IdState::Done, self.clock.now_ns());
            }
        }
        if ev.kind.is_terminal() {
            self.cancels.ended(id);
            // One branch while no order has `acct=`: a head frees its key's
            // next follower; a cancelled parked follower leaves its key.
            if !self.acct.is_empty() {
                self.acct.ended(id);
            }
        }
        if let Some(p) = &mut self.pending {
            if ev.kind.is_terminal() {
                p.ended(id);
            }
            if let EventKind::Fill { n, cum, amount, .. } = &ev.kind {
                // Appended before its `FILL` is written, not waited for
                // (lazily: no commit of its own): a fill lost in a crash is
                // re-delivered by the idempotent venue (see docs/decisions.md).
                if let Err(e) = p.journal().append_lazy(&Record::FillApplied {
                    id: id.to_owned(),
                    fill_no: *n,
                    cum: *cum,
                    amount: *amount,
                }) {
                    log::debug!("fill {n} of {id} not journaled: {e}");
                }
            }
            let rec = match &ev.kind {
                _ if journaled => None,
                EventKind::Fill { .. } | EventKind::Attempt | EventKind::Parked => None,
                EventKind::Done {
                    status,
                    cum,
                    amount,
                    attempts,
                } => Some((
                    TerminalState::Done,
                    status.as_str(),
                    *cum,
                    *amount,
                    *attempts,
                )),
                EventKind::Dead {
                    reason, attempts, ..
                } => Some((
                    TerminalState::Dead,
                    reason.as_str(),
                    Lots(0),
                    Amount(0),
                    *attempts,
                )),
                EventKind::Expired { attempts } => {
                    Some((TerminalState::Expired, "ttl", Lots(0), Amount(0), *attempts))
                }
            };
            if let Some((state, reason, cum, amount, attempts)) = rec {
                // Not waited for (lazily: no commit of its own): a terminal
                // record lost in a crash only makes recovery run the order
                // again, under its idempotent id.
                let rec = Record::Terminal {
                    id: id.to_owned(),
                    state,
                    reason: reason.to_owned(),
                    cum,
                    amount,
                    attempts,
                };
                match p.journal().append_lazy(&rec) {
                    Ok(_) => {}
                    Err(AppendError::DiskFull) if self.unjournaled.len() < UNJOURNALED_MAX => {
                        self.unjournaled.push(rec);
                    }
                    Err(e) => log::debug!("terminal record of {id} not journaled: {e}"),
                }
            }
        }
        if ev.kind.is_terminal() {
            self.in_flight = self.in_flight.saturating_sub(1);
            let now = self.mono.now_ns();
            self.recorder
                .record_span(Stage::OrderE2e, ev.recv_mono_ns, now);
            self.recorder
                .record_span(e2e_stage(ev.lane), ev.recv_mono_ns, now);
        }
    }
}

impl Ledger {
    /// Appends the terminal records a full disk refused, once the journal
    /// takes appends again; those it refuses again wait for the next call.
    /// Called every gateway turn (nothing to do in the common case).
    pub(super) fn rejournal(&mut self) {
        let Some(p) = &self.pending else { return };
        if self.unjournaled.is_empty() || p.journal().is_disk_full() {
            return;
        }
        let n = self.unjournaled.len();
        let mut kept = Vec::new();
        for rec in self.unjournaled.drain(..) {
            match p.journal().append_lazy(&rec) {
                Ok(_) => {}
                Err(AppendError::DiskFull) => kept.push(rec),
                Err(e) => log::debug!("terminal record not journaled: {e}"),
            }
        }
        if kept.len() < n {
            log::info!(
                "journal: {} terminal record(s) refused while the disk was full written now",
                n - kept.len()
            );
        }
        self.unjournaled = kept;
    }
}

/// Writes the reply line of an event to its connection's buffer.
pub(super) fn write_event(out: &mut BytesMut, ev: &Event) {
    let id = &*ev.id;
    match &ev.kind {
        EventKind::Attempt | EventKind::Parked => {}
        EventKind::Fill {
            n,
            cum,
            amount,
            left,
        } => write_fill(out, id, *n, *cum, *amount, *left),
        EventKind::Done {
            status,
            cum,
            amount,
            attempts,
        } => write_done(out, id, *status, *cum, *amount, *attempts),
        EventKind::Dead {
            reason,
            attempts,
            last,
        } => write_dead(out, id, *reason, *attempts, last),
        EventKind::Expired { attempts } => {
            let detail = format!("ttl passed before it could be sent (after {attempts} attempts)");
            write_reject(out, id, RejectReason::Expired, &detail);
        }
    }
}
