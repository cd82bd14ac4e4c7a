//! The worker pool: starts each lane's workers, and the scaler thread
//! (`tickfan-order-scale`) that grows and shrinks them with the load and
//! keeps the lanes' capacity view.
//!
//! ```text
//!  every TICK (10 ms):  for each lane
//!     queue depth, oldest age, LaneLoad ──▶ elastic::Scaler ──▶ Up: start a worker thread (a free seat)
//!                                                 │            Down(n): ask n idle workers to retire
//!                                                 └──▶ capacity::Estimator ──▶ gauges (metrics::capacity_counters)
//! ```
//!
//! Seats: each lane has `max` seats; a worker holds one from its start to
//! its end (its thread name `tickfan-order-wN`/`-LN`, its bridge-call slot
//! and its jitter seed come from the seat number), so no two live workers
//! share a slot and a lane never has more than `max` workers.
//!
//! Scale decisions read the engine clock (`retry::SimClock` in tests; the
//! decision itself is the pure [`Scaler`]); the queue's oldest age is on
//! the measurement clock, as its gauge is. Every step is logged (one line)
//! and counted; worker counts are gauges.
//!
//! Shutdown: when `stop` is set (the order path's draining flag) the scaler
//! ends and drops its share of the kit ([`WorkerKit`], shared with the
//! workers), and with it its handles on the queues, the retry channel, the
//! outlet and the done signal once the last worker has ended too; the
//! workers end as before (`super::super::wiring`). It returns the workers'
//! join handles.
//!
//! Single writer of the capacity gauges: this thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::logging::repeat::warn_repeating;
use crate::metrics::capacity_counters::{CapacityCounters, NOT_DRAINING};
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::model::lane::Lane;
use crate::model::warning::WarnKind;

use super::capacity::Estimator;
use super::elastic::{LaneLoad, LaneSample, ScalePolicy, Scaler, Step};
use super::quota::QuotaTurn;
use super::worker::{process_stage, queue_stage, Worker, WorkerKit};
use crate::order::venue::Caller;

/// Period of the scaler's look at the lanes.
pub(crate) const TICK: Duration = Duration::from_millis(10);

/// A worker's seat: freed, and the worker counted out, when its thread ends.
struct Seat {
    taken: Arc<[AtomicBool]>,
    index: usize,
    load: Arc<LaneLoad>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.load.ended();
        self.taken[self.index].store(false, Ordering::Release);
    }
}

/// The pool: the kit (shared with every worker it starts) and the seats.
#[derive(Debug)]
pub(crate) struct Pool {
    kit: Arc<WorkerKit>,
    taken: [Arc<[AtomicBool]>; 2],
}

impl Pool {
    /// A pool with every seat free.
    pub(crate) fn new(kit: WorkerKit) -> Self {
        let seats = |n: usize| (0..n).map(|_| AtomicBool::new(false)).collect();
        let taken = [seats(kit.seats[0]), seats(kit.seats[1])];
        Pool {
            kit: Arc::new(kit),
            taken,
        }
    }

    /// Starts one worker of `lane` on a free seat; `Ok(None)` when every
    /// seat is taken.
    ///
    /// # Errors
    /// When the thread cannot be created.
    pub(crate) fn spawn(&self, lane: Lane) -> std::io::Result<Option<JoinHandle<()>>> {
        let k = &self.kit;
        let li = lane.index();
        let taken = &self.taken[li];
        let Some(seat) = (0..taken.len()).find(|&i| {
            taken[i]
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        }) else {
            return Ok(None);
        };
        let (name, call_slot) = match lane {
            Lane::Small => (format!("tickfan-order-w{seat}"), seat),
            Lane::Large => (format!("tickfan-order-L{seat}"), k.seats[0] + seat),
        };
        let w = Worker {
            kit: Arc::clone(k),
            lane,
            call_slot,
            caller: Caller::new(Arc::clone(&k.call_pool), &name),
            turn: QuotaTurn::default(),
            recorder: StageRecorder::new(
                &[
                    Stage::OrderRetryWait,
                    Stage::OrderQueueWait,
                    Stage::OrderProcess,
                    queue_stage(lane),
                    process_stage(lane),
                ],
                k.link.clone(),
            ),
            rng: StdRng::seed_from_u64(worker_seed(seat + li * 1_000)),
        };
        k.loads[li].started();
        let guard = Seat {
            taken: Arc::clone(taken),
            index: seat,
            load: Arc::clone(&k.loads[li]),
        };
        let done = k.done.clone();
        let watch = Arc::clone(&k.watch);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _beat = watch.guard();
                let _done = done; // dropped when the worker ends, even by a panic
                let _seat = guard;
                w.run();
            })
            .map(Some)
    }
}

/// Each worker's jitter generator is seeded from its seat: runs repeat.
const fn worker_seed(n: usize) -> u64 {
    0x7469_636b_6661_6e00 ^ n as u64
}

/// One lane under the scaler.
#[derive(Debug)]
struct LaneScale {
    lane: Lane,
    scaler: Scaler,
    estimator: Estimator,
}

/// The scaler thread's state.
#[derive(Debug)]
pub(crate) struct ScaleLoop {
    pool: Pool,
    lanes: Vec<LaneScale>,
    counters: Arc<Counters>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl ScaleLoop {
    /// Starts every lane's `min` workers and returns the loop that keeps
    /// them between `min` and `max` (`policies` by [`Lane::index`]; a lane
    /// whose `max` is 0 has no workers, as the large lane in shared mode).
    ///
    /// # Errors
    /// When a worker thread cannot be created.
    pub(crate) fn start(
        pool: Pool,
        policies: [ScalePolicy; 2],
        slo: Duration,
        counters: Arc<Counters>,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<ScaleLoop> {
        let mut handles = Vec::new();
        let mut lanes = Vec::new();
        set(&counters.capacity.slo_us, slo.as_micros() as u64);
        for lane in Lane::ALL {
            let p = policies[lane.index()];
            if p.max == 0 {
                continue;
            }
            for _ in 0..p.min {
                handles.extend(pool.spawn(lane)?);
            }
            set(&counters.capacity.workers[lane.index()], p.min as u64);
            lanes.push(LaneScale {
                lane,
                scaler: Scaler::new(p),
                estimator: Estimator::default(),
            });
        }
        Ok(ScaleLoop {
            pool,
            lanes,
            counters,
            handles,
            stop,
        })
    }

    /// Runs until `stop`; returns every worker's join handle.
    pub(crate) fn run(mut self) -> Vec<JoinHandle<()>> {
        while !self.stop.load(Ordering::Acquire) {
            self.tick();
            std::thread::sleep(TICK);
        }
        self.handles
    }

    /// One look at every lane: scale, estimate, publish.
    pub(crate) fn tick(&mut self) {
        let now_ns = self.pool.kit.clock.now_ns();
        let mono_ns = self.pool.kit.mono.now_ns();
        let cap: &CapacityCounters = &self.counters.capacity;
        for ls in &mut self.lanes {
            let li = ls.lane.index();
            let q = &self.pool.kit.lanes[li];
            let load = &self.pool.kit.loads[li];
            let (alive, retiring, busy, completed) = load.read();
            let workers = alive.saturating_sub(retiring);
            let depth = q.rx.len();
            let sample = LaneSample {
                now_ns,
                depth,
                oldest_age_ns: q.stats.oldest_age_ns(mono_ns),
                workers,
                alive,
                busy,
            };
            let mut now_workers = workers;
            match ls.scaler.decide(&sample) {
                Step::Hold => {}
                Step::Up => match self.pool.spawn(ls.lane) {
                    Ok(Some(h)) => {
                        self.handles.push(h);
                        now_workers += 1;
                        bump(&cap.scale_up[li], 1);
                        log::info!(
                            "order workers: {} lane {workers} → {now_workers} (queue {depth}, oldest {:.1} ms, max {})",
                            ls.lane.as_str(),
                            sample.oldest_age_ns as f64 / 1e6,
                            ls.scaler.policy().max
                        );
                    }
                    Ok(None) => {}
                    Err(e) => warn_repeating!(
                        WarnKind::WorkerStartFailed,
                        "order workers: {} lane: no worker started: {e}",
                        ls.lane.as_str()
                    ),
                },
                Step::Down(n) if n > 0 => {
                    load.ask_retire(n);
                    now_workers -= n;
                    bump(&cap.scale_down[li], n as u64);
                    log::info!(
                        "order workers: {} lane {workers} → {now_workers} ({n} idle for {:?}, min {})",
                        ls.lane.as_str(),
                        Duration::from_nanos(ls.scaler.policy().idle_ns),
                        ls.scaler.policy().min
                    );
                }
                Step::Down(_) => {}
            }
            let e = ls.estimator.update(
                now_ns,
                (q.stats.admitted(), completed),
                (busy, now_workers),
                depth,
            );
            set(&cap.workers[li], alive as u64);
            set(&cap.busy[li], busy as u64);
            CapacityCounters::set_f64(&cap.arrival_rate[li], e.arrival);
            CapacityCounters::set_f64(&cap.service_rate[li], e.service);
            CapacityCounters::set_f64(&cap.utilisation[li], e.utilisation);
            set(
                &cap.drain_us[li],
                e.drain_s
                    .map_or(NOT_DRAINING, |s| (s * 1e6).min(1e15) as u64),
            );
        }
        // Reap the workers that retired (in place: a tick allocates nothing,
        // as the engine's idle threads must not; `tests/alloc_free.rs`).
        let mut i = 0;
        while i < self.handles.len() {
            if self.handles[i].is_finished() {
                let _ = self.handles.swap_remove(i).join();
            } else {
                i += 1;
            }
        }
    }
}
