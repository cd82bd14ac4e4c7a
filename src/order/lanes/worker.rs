//! Order workers: take an order (a due retry first, within the lane's
//! retry quota ([`super::quota`]) while new orders wait, then a chunk, then
//! the lane's queue; nothing queued while halted; a cancelled order is
//! dropped unsent, [`crate::order::msg::claim`]), check its deadline, send one attempt
//! to a bridge, and act on the outcome.
//!
//! ```text
//!  lane queue ─┐                        ┌─ executed ──▶ fills ──▶ fill thread ──▶ FILL… DONE
//!  chunks ─────┼─▶ worker ─▶ bridge ────┼─ permanent ─▶ DLQ, DEAD           (never retried)
//!  ready ──────┘     ▲   (large parent: └─ transient ─▶ permit? ─▶ delay queue (timer thread)
//!    ▲               │    split into chunks first)           └ none/exhausted ─▶ DLQ, DEAD
//!    │               └ expired ──▶ REJECT EXPIRED (not sent)
//!    └──────────── due retries (timer) ──────────────────────────┘
//! ```
//!
//! A worker serves one lane only ([`super::routing`]): small workers take
//! small orders and their retries; large workers take large orders, split
//! each into chunks on the lane's chunk queue, and execute chunks (a chunk
//! before a new large order, so a split order finishes before the next
//! starts). A chunk is an [`Order`] with [`Order::chunk`] set: it is retried,
//! expired and dead-lettered like an order, but its outcome goes to the fill
//! thread, which answers for the parent.
//!
//! Routing: attempt `k` of order number `seq` (chunk `i`: `seq + i`) goes to
//! bridge `(seq [+ i] + k − 1) mod bridges`, so orders and the chunks of one
//! order spread over the bridges, and a retry goes to the next one. A
//! recovered order keeps the number it had before the restart for this
//! ([`Order::route_seq`]): its first attempt's record is not synced before
//! the call, and recovery finds that bridge again from the number alone.
//!
//! Chunk queue bound: a worker takes a new large order only after finding
//! the chunk queue empty, and its chunks stay queued until the queue is
//! empty again, so at most `large workers × max chunks` chunks are queued;
//! the queue has that capacity (a chunk that would not fit runs at once in
//! the splitting worker, which cannot happen but is handled).
//!
//! Leases: the bridge call runs on the worker's call thread under a lease
//! (`--bridge-lease`, [`crate::order::venue`] (lease)); each attempt has a fresh fencing
//! token. A call not answered within the lease is abandoned and the order
//! parked as a transient failure `lease_expired`, so its retry goes to the
//! next bridge with a new token; the abandoned call's answer is discarded.
//!
//! Elastic: a lane's workers come and go with its load
//! ([`super::elastic`], started by [`super::pool`]); a worker that finds
//! nothing to do takes a retirement the scaler asked for and ends. While it
//! holds an order it counts as busy in its lane's [`LaneLoad`].
//!
//! `max_inflight`: before an attempt the worker waits for a place under its
//! bridge's limit ([`crate::order::venue`] (inflight)); the place goes with the call and
//! is freed when the venue answers.
//!
//! Ownership: a worker owns the order it holds; it owns its histograms and
//! its random generator. Workers share nothing mutable but the channels, the
//! retry permits and the bridge-call slots (each writes only its own:
//! [`BridgeCalls`], read by the gateway for the `bridge_call_slow` alert).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use rand::rngs::StdRng;

use crate::bridge::{Bridge, BridgeOrder, Outcome};
use crate::dlq::AttemptRecord;
use crate::logging::repeat::warn_repeating;
use crate::metrics::recorder::RecorderLink;
use crate::metrics::{Stage, StageRecorder};
use crate::model::warning::WarnKind;
use crate::retry::{Backoff, Permits, SharedClock};
use crate::sys::clock::{wall_ns, MonoClock};
use crate::sys::watch::Watch;

use crate::model::lane::Lane;
use crate::model::order_reasons::DeadReason;
use crate::order::msg::fill::FillMsg;
use crate::order::msg::journal::{AppendError, JournalHandle};
use crate::order::msg::order::{ChunkOf, Order, Resumed};
use crate::order::msg::record::Record;

use super::elastic::LaneLoad;
use super::outlet::Outlet;
use super::quota::{QuotaTurn, RetryQuota};
use super::routing::split;
use crate::order::config::LaneConfig;
use crate::order::msg::admission::LaneRx;
use crate::order::msg::event::EventKind;
use crate::order::msg::halt::Halt;
use crate::order::venue::{BridgeCalls, CallPool, CallResult, Caller, FenceTokens, InflightLimit};

/// What every worker shares: built once by the wiring, held by the pool
/// and by each worker ([`Worker::kit`]), so a worker is this plus the few
/// parts its seat gives it.
///
/// Over 15 fields: it is the one list of every channel, limit, clock and
/// flag a worker touches, named once here instead of copied into each
/// worker; the per-lane parts are arrays by [`Lane::index`].
#[derive(Debug)]
pub(crate) struct WorkerKit {
    /// Lane queues, by [`Lane::index`] (consumer side; a worker counts what
    /// it takes from its own lane's).
    pub lanes: [LaneRx; 2],
    /// Due retries, by [`Lane::index`], from the timer.
    pub ready: [Receiver<Order>; 2],
    /// The large lane's chunk queue (both sides: a large worker splits into
    /// it and executes from it); `None` in shared mode. Small workers never
    /// see it ([`Worker::chunks`]).
    pub chunks: Option<(Sender<Order>, Receiver<Order>)>,
    /// Chunk size and count.
    pub lane_config: LaneConfig,
    /// To the timer: `(due_ns, order)`.
    pub retry_tx: Sender<(u64, Order)>,
    /// Bound of the retry stage (delay queue + the channels around it).
    pub permits: Arc<Permits>,
    /// The venues.
    pub bridges: Arc<[Arc<dyn Bridge>]>,
    /// Each venue's `max_inflight`, by bridge index ([`crate::order::venue`] (inflight)).
    pub inflight: Arc<[Arc<InflightLimit>]>,
    /// When each worker's bridge call started (a worker writes its own slot,
    /// [`Worker::call_slot`], only): small seats first, then large seats.
    pub bridge_calls: Arc<BridgeCalls>,
    /// Call threads (each worker's [`Caller`] runs on it).
    pub call_pool: Arc<CallPool>,
    /// Fencing tokens, one per attempt.
    pub tokens: Arc<FenceTokens>,
    /// The journal (`None` with `--no-journal`): each attempt is recorded.
    pub journal: Option<JournalHandle>,
    /// Retry policy.
    pub backoff: Backoff,
    /// Engine clock (deadlines, due times).
    pub clock: SharedClock,
    /// Measurement clock.
    pub mono: MonoClock,
    /// Replies, fills, dead letters.
    pub out: Outlet,
    /// Set at shutdown: transient failures are dead-lettered (`shutdown`), not parked.
    pub draining: Arc<AtomicBool>,
    /// Set when the shutdown deadline passed: an order taken now is
    /// dead-lettered (`shutdown`) without an attempt.
    pub abandon: Arc<AtomicBool>,
    /// Histogram hand-off.
    pub link: RecorderLink,
    /// Thread watch.
    pub watch: Arc<Watch>,
    /// Held by every worker; disconnected once all have ended.
    pub done: Sender<()>,
    /// Each lane's load (busy workers, completions, retirements,
    /// [`super::elastic`]), by [`Lane::index`], shared with its workers.
    pub loads: [Arc<LaneLoad>; 2],
    /// Seats per lane (its `max`).
    pub seats: [usize; 2],
    /// Pauses the taking of queued orders and due retries (`POST /orders/halt`).
    pub halt: Arc<Halt>,
    /// Each lane's retry quota (`--retry-share`), by [`Lane::index`], shared
    /// by its workers.
    pub quotas: [Arc<RetryQuota>; 2],
}

/// One worker: the shared kit and what its seat makes its own.
#[derive(Debug)]
pub(crate) struct Worker {
    /// What every worker shares.
    pub kit: Arc<WorkerKit>,
    /// The lane it serves.
    pub lane: Lane,
    /// This worker's slot in the kit's `bridge_calls`.
    pub call_slot: usize,
    /// Runs its bridge calls under a lease ([`crate::order::venue`] (lease)).
    pub caller: Caller,
    /// This worker's turn in the quota (one-worker lanes alternate).
    pub turn: QuotaTurn,
    /// Queue wait, retry wait and processing histograms.
    pub recorder: StageRecorder,
    /// Jitter.
    pub rng: StdRng,
}

const FLUSH_WAIT: Duration = Duration::from_millis(100);

impl Worker {
    /// Its lane's queue.
    fn own(&self) -> &LaneRx {
        &self.kit.lanes[self.lane.index()]
    }

    /// Its lane's due retries.
    fn ready(&self) -> &Receiver<Order> {
        &self.kit.ready[self.lane.index()]
    }

    /// The chunk queue, for a large worker in split mode only.
    fn chunks(&self) -> Option<&(Sender<Order>, Receiver<Order>)> {
        match self.lane {
            Lane::Large => self.kit.chunks.as_ref(),
            Lane::Small => None,
        }
    }

    /// Its lane's load.
    fn load(&self) -> &LaneLoad {
        &self.kit.loads[self.lane.index()]
    }

    /// Its lane's retry quota.
    fn quota(&self) -> &RetryQuota {
        &self.kit.quotas[self.lane.index()]
    }
    /// Runs until its lane's queue and the retry channel are closed and
    /// empty, and no chunk is queued.
    pub(crate) fn run(mut self) {
        let mut own_open = true;
        let mut ready_open = true;
        loop {
            self.recorder.maybe_flush(self.kit.mono.now_ns());
            // Halted (`POST /orders/halt`): queued orders and due retries
            // are held; chunks of orders already split run on. A shutdown
            // lifts the hold, so the queues drain.
            let held = self.kit.halt.is_halted() && !self.kit.draining.load(Ordering::Acquire);
            // Due retries first (they are the oldest orders), within the
            // lane's retry quota while new orders wait.
            let new_waiting =
                !self.own().rx.is_empty() || self.chunks().is_some_and(|(_, rx)| !rx.is_empty());
            let workers = self.load().alive();
            if !held
                && self
                    .quota()
                    .may_take_retry(&self.turn, new_waiting, workers)
            {
                let taken = self.ready().try_recv();
                if let Ok(o) = taken {
                    self.turn.took_retry(new_waiting);
                    self.held(false, |w| w.take_retry(o));
                    self.quota().leave();
                    continue;
                }
                self.quota().leave();
                if let Err(TryRecvError::Disconnected) = taken {
                    ready_open = false;
                }
            }
            // Then the chunks of orders already started.
            if let Some(c) = self.chunks().and_then(|(_, rx)| rx.try_recv().ok()) {
                self.turn.took_new();
                self.held(false, |w| w.process(c));
                continue;
            }
            if !held {
                match self.own().rx.try_recv() {
                    Ok(o) => {
                        self.turn.took_new();
                        self.held(true, |w| w.take_main(o));
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => own_open = false,
                    Err(TryRecvError::Empty) => {}
                }
                // Over the quota with no new order left: the retry is next.
                if !self.ready().is_empty() {
                    continue;
                }
            }
            // The chunk queue was empty just now, and this worker's own
            // chunks were pushed before: another worker's are its to run.
            if !own_open && !ready_open {
                break;
            }
            // Nothing to do: the scaler may have asked an idle worker to retire.
            if own_open && self.load().take_retirement() {
                break;
            }
            let mut sel = Select::new();
            if ready_open && !held {
                sel.recv(self.ready());
            }
            if let Some((_, rx)) = self.chunks() {
                sel.recv(rx);
            }
            if own_open && !held {
                sel.recv(&self.own().rx);
            }
            // Ready or not, the loop above takes in priority order.
            // Wake for the interval boundary too, so an idle worker hands
            // its interval in on time.
            let until = self.recorder.ns_until_flush(self.kit.mono.now_ns());
            let _ = sel.ready_timeout(FLUSH_WAIT.min(Duration::from_nanos(until)));
        }
        self.recorder.finish(self.kit.mono.now_ns());
    }

    /// Runs `f` on what the worker took, counted busy meanwhile;
    /// `from_queue`: a completion of the lane's queue when it ends.
    fn held(&mut self, from_queue: bool, f: impl FnOnce(&mut Self)) {
        self.load().begin();
        f(self);
        self.load().end(from_queue);
    }

    fn take_main(&mut self, o: Order) {
        self.own().stats.on_take();
        if !o.claim.take() {
            // Cancelled while queued: the gateway has answered it.
            return;
        }
        let now = self.kit.mono.now_ns();
        self.recorder
            .record_span(Stage::OrderQueueWait, o.enq_mono_ns, now);
        self.recorder
            .record_span(queue_stage(o.lane), o.enq_mono_ns, now);
        // Past the shutdown deadline a large order is dead-lettered whole
        // (in `process`), not split into chunks that would each be.
        match self.chunks() {
            Some(_) if o.lane == Lane::Large && !self.kit.abandon.load(Ordering::Acquire) => {
                self.split(o)
            }
            _ => self.process(o),
        }
    }

    /// Splits a large order into chunks: begins it at the fill thread, then
    /// queues the chunks for the lane's workers.
    fn split(&mut self, o: Order) {
        let sizes = split(
            o.qty,
            self.kit.lane_config.chunk,
            self.kit.lane_config.max_chunks,
        );
        let count = sizes.len() as u32;
        // From here a CANCEL reaches only the chunks not yet started.
        o.claim.split(count);
        let chunks: Vec<Order> = sizes
            .iter()
            .enumerate()
            .map(|(i, &qty)| Order {
                seq: o.seq,
                conn: o.conn,
                id: format!("{}.c{i}", o.id).into(),
                symbol: o.symbol.clone(),
                side: o.side,
                qty,
                raw: Box::default(),
                acct_key: None,
                peer: o.peer.clone(),
                recv_mono_ns: o.recv_mono_ns,
                enq_mono_ns: o.enq_mono_ns,
                deadline_ns: o.deadline_ns,
                recv_wall_ns: o.recv_wall_ns,
                history: Vec::new(),
                next_delay: (0, 0),
                retry_due_ns: 0,
                replay: o.replay,
                lane: Lane::Large,
                chunk: Some(ChunkOf {
                    parent: o.seq,
                    index: i as u32,
                    count,
                }),
                // Recovered: each chunk back to the bridge it was at.
                resumed: Resumed {
                    bridge: o
                        .resumed
                        .chunk_bridges
                        .iter()
                        .find(|c| c.0 == i as u32)
                        .map(|c| c.1.clone()),
                    route: o.resumed.route,
                    ..Resumed::default()
                },
                claim: Arc::clone(&o.claim),
            })
            .collect();
        // Begun before any chunk can run: its fills never precede it.
        self.kit.out.to_fills(FillMsg::Begin {
            order: Box::new(o),
            chunks: sizes,
        });
        let (tx, _) = self.chunks().expect("large worker");
        let tx = tx.clone();
        for c in chunks {
            if let Err(e) = tx.try_send(c) {
                log::error!(
                    "chunk queue full (cannot happen; see worker docs): running the chunk here"
                );
                self.process(e.into_inner());
            }
        }
    }

    fn take_retry(&mut self, o: Order) {
        self.kit.permits.release();
        if o.chunk.is_none() && !o.claim.take() {
            // Cancelled while waiting for its retry: answered already.
            return;
        }
        self.recorder.record_span(
            Stage::OrderRetryWait,
            o.retry_due_ns,
            self.kit.clock.now_ns(),
        );
        self.process(o);
    }

    /// Journals the attempt (`AttemptSent`); a retry or a re-send after a
    /// restart also waits until it is durable: after a crash recovery must
    /// know which bridge (whose venue is idempotent by id) the order may
    /// have reached, or a re-send to another venue could execute it twice.
    /// The wait is a group commit shared by every worker.
    ///
    /// A first attempt does not wait, and starts no commit of its own (its
    /// record rides with the next, `append_lazy`): its bridge follows from the order's admission number, which
    /// its durable `Accepted` record holds, so recovery re-sends an order
    /// with no journaled attempt to that bridge ([`Order::route_seq`]). A
    /// worker then spends no sync per new order (two workers take 10k
    /// orders/s on this project's disk, perf/RESULTS.md); the
    /// `ACK` latency is unchanged. Its fencing token may be lost with
    /// it: tokens after a restart start above every earlier one by their
    /// epoch (see `journal::startup::first_fence_token`).
    ///
    /// `false`: the journal failed (the attempt is not made); `true`
    /// without a journal (`--no-journal`) and when the journal or its disk
    /// is full (accepted orders must still end to free it).
    fn journal_attempt(&self, o: &Order, bridge: &str, fence_token: u64) -> bool {
        let Some(j) = &self.kit.journal else {
            return true;
        };
        let rec = Record::AttemptSent {
            id: o.id.to_string(),
            bridge: bridge.to_string(),
            fence_token,
        };
        let first = o.attempts() == 0 && o.resend_to().is_none();
        let appended = if first {
            j.append_lazy(&rec)
        } else {
            j.append(&rec)
        };
        match appended {
            Ok(_) if first => true,
            Ok(lsn) if j.wait_durable(lsn) => true,
            Ok(_) => {
                warn_repeating!(
                    WarnKind::NotJournaled,
                    "attempt of {} not sent: its journal record was not synced",
                    o.id
                );
                false
            }
            // A full journal (or its full disk) refuses new orders; the
            // accepted ones still run (their ends free the journal), this
            // attempt unrecorded.
            Err(AppendError::Full | AppendError::DiskFull) => true,
            Err(e) => {
                warn_repeating!(
                    WarnKind::NotJournaled,
                    "attempt of {} not sent: not journaled: {e}",
                    o.id
                );
                false
            }
        }
    }

    /// One attempt of one order.
    fn process(&mut self, mut o: Order) {
        let t0 = self.kit.mono.now_ns();
        if o.chunk.is_some() && o.history.is_empty() && !o.claim.start_chunk() {
            // Its order was cancelled before this chunk started.
            self.kit.out.chunk_cancelled(&o);
            self.kit.out.events.wake();
            return;
        }
        if self.kit.abandon.load(Ordering::Acquire) {
            self.dead(o, DeadReason::Shutdown);
            self.kit.out.events.wake();
            return;
        }
        let now = self.kit.clock.now_ns();
        if o.expired_at(now) {
            self.kit.out.expired(&o);
            self.kit.out.events.wake();
            return;
        }
        let n = o.attempts() + 1;
        let route = o.route_seq() + o.chunk.map_or(0, |c| u64::from(c.index));
        let mut at = ((route + u64::from(n) - 1) % self.kit.bridges.len() as u64) as usize;
        if let Some(name) = o.resend_to() {
            // Re-sent after a restart: to the bridge it was at, whose venue
            // knows the id (a re-sent id returns the first execution's fills).
            if let Some(i) = self.kit.bridges.iter().position(|b| b.name() == name) {
                at = i;
            }
        }
        let bridge = &self.kit.bridges[at];
        // Under the venue's max_inflight: wait for a place (not at a bridge yet).
        let Ok(permit) = self.kit.inflight[at].acquire(&self.kit.abandon) else {
            self.dead(o, DeadReason::Shutdown);
            self.kit.out.events.wake();
            return;
        };
        // The gateway's STATUS: at a bridge from here (no wake: the end does).
        self.kit.out.progress(&o, EventKind::Attempt);
        // Shown as in progress from `now` (the start the bridge is given)
        // until it returns, however long the venue takes.
        let fence_token = self.kit.tokens.next();
        let journaled = self.journal_attempt(&o, bridge.name(), fence_token);
        let in_call = self.kit.bridge_calls.enter(self.call_slot, now);
        let result = if journaled {
            self.caller.call(
                bridge,
                &BridgeOrder {
                    order_id: &o.id,
                    symbol: &o.symbol,
                    side: o.side,
                    qty: o.qty,
                    attempt: n,
                    fence_token,
                },
                &o.id,
                now,
                &*self.kit.clock,
                permit,
            )
        } else {
            // Not sent: a call the journal does not know of could run twice.
            CallResult::Answered(Outcome::Transient("journal_error".into()))
        };
        drop(in_call);
        let (delay_ns, ceiling_ns) = o.next_delay;
        let record = |what: String| AttemptRecord {
            n,
            bridge: bridge.name().to_string(),
            outcome: what,
            at_ns: now,
            wall_ns: wall_ns(),
            delay_ns,
            ceiling_ns,
        };
        let outcome = match result {
            CallResult::Answered(outcome) => outcome,
            // Abandoned: retried (next bridge, new token) like a transient failure.
            CallResult::LeaseExpired => Outcome::Transient("lease_expired".into()),
        };
        match outcome {
            Outcome::Executed(fills) => {
                o.history.push(record("executed".into()));
                self.kit.out.executed(o, fills);
            }
            Outcome::Permanent(why) => {
                o.history.push(record(format!("permanent:{why}")));
                self.dead(o, DeadReason::BridgeRejected);
            }
            Outcome::Transient(why) => {
                o.history.push(record(format!("transient:{why}")));
                self.park(o, now);
            }
        }
        self.kit.out.events.wake();
        let t1 = self.kit.mono.now_ns();
        self.recorder.record_span(Stage::OrderProcess, t0, t1);
        self.recorder.record_span(process_stage(self.lane), t0, t1);
    }

    /// A transient failure: to the delay queue, or to the DLQ when the policy
    /// or the bound says no.
    fn park(&mut self, mut o: Order, now: u64) {
        let retry = o.attempts(); // the retry this would be: 1 after the first attempt
        if self.kit.draining.load(Ordering::Acquire) {
            return self.dead(o, DeadReason::Shutdown);
        }
        if !self.kit.backoff.allows(retry) {
            return self.dead(o, DeadReason::RetriesExhausted);
        }
        if !self.kit.permits.try_acquire() {
            return self.dead(o, DeadReason::RetryQueueFull);
        }
        let delay = self
            .kit
            .backoff
            .delay_ns(retry, o.next_delay.0, &mut self.rng);
        o.next_delay = (delay, self.kit.backoff.ceiling_ns(retry));
        // Cancellable while it waits (before its `RETRY_WAIT` shows).
        o.claim.release();
        // Reported before the hand-off: the timer may fire it at once.
        self.kit.out.progress(&o, EventKind::Parked);
        if let Err(e) = self.kit.retry_tx.try_send((now.saturating_add(delay), o)) {
            // The channel holds `permits` orders, so only a stopped timer gets here.
            self.kit.permits.release();
            let (_, o) = e.into_inner();
            if o.chunk.is_some() || o.claim.take() {
                self.dead(o, DeadReason::Shutdown);
            }
        }
    }

    fn dead(&mut self, o: Order, reason: DeadReason) {
        self.kit.out.dead(o, reason);
    }
}

/// The queue-wait stage of a lane.
pub(crate) const fn queue_stage(lane: Lane) -> Stage {
    match lane {
        Lane::Small => Stage::OrderQueueWaitSmall,
        Lane::Large => Stage::OrderQueueWaitLarge,
    }
}

/// The processing stage of a lane.
pub(crate) const fn process_stage(lane: Lane) -> Stage {
    match lane {
        Lane::Small => Stage::OrderProcessSmall,
        Lane::Large => Stage::OrderProcessLarge,
    }
}
