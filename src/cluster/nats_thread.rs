//! The NATS client on its own thread: a current-thread tokio runtime
//! running `async-nats`, bridged to the engine's threads without a lock on
//! the hot path (docs/src/decisions.md, "NATS client").
//!
//! - **In from the engine**: an ingest's publisher hands updates to the
//!   [`super::ingest_out::Outbox`] (conflating per symbol, never blocking);
//!   an edge's publisher reports interest changes to the
//!   [`super::interest::InterestBoard`]. Both wake this thread through one
//!   `tokio::sync::Notify`.
//! - **Out to the engine**: an edge writes its slots itself
//!   ([`super::edge_in`]) and wakes the publisher.
//! - **Events** of the client library (connected, disconnected, slow
//!   consumer) come through a bounded channel of [`EVENTS`]; a full channel
//!   drops the event (counted in the log), and the next one of the same
//!   kind makes up for it, since each triggers a full re-seed.
//!
//! The client reconnects by itself (every server of `--nats`, forever,
//! 50 ms × attempts up to 500 ms between rounds) and re-subscribes; this
//! thread re-seeds. Its beat in the thread watch is `tickfan-nats`.
//!
//! **Stopping never waits for a server.** With no server to talk to, the
//! client's calls wait: a publish once its command buffer is full, a
//! subscribe, and a flush until a server answers, which may be never (an
//! edge and an ingest whose server had gone ran on for 14 minutes after
//! SIGTERM, issue 26). So: the loop sees the stop between any two steps;
//! its last flush waits at most [`FLUSH_AT_STOP`]; and whatever call the
//! loop is inside when the stop comes, the whole job is dropped
//! [`STOP_GRACE`] after the stop (its unsent updates with it: market data
//! is absolute, the next start re-seeds), and the runtime with it.
//! [`NatsThread::stop`] therefore returns within about [`STOP_GRACE`].

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use async_nats::{ConnectOptions, Event, ServerAddr};
use crossbeam_channel::RecvTimeoutError;
use tokio::sync::{mpsc, watch, Notify};

use super::edge_node::EdgeNode;
use super::ingest_node::IngestNode;
use super::role::ClusterConfig;
use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::{bump, set};
use crate::metrics::Counters;
use crate::model::warning::WarnKind;
use crate::sys::watch::Beat;

/// Client events waiting for the loop.
pub(crate) const EVENTS: usize = 64;
/// How often the loop beats, retries seeds and looks for lost wakes.
pub(crate) const TICK: Duration = Duration::from_millis(50);
/// Longest the loop's last flush waits for a server at the stop.
pub(crate) const FLUSH_AT_STOP: Duration = Duration::from_secs(1);
/// From the stop, how long the loop has to end by itself before it is
/// dropped wherever it waits.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);
/// Longest [`NatsThread::stop`] waits for the thread beyond [`STOP_GRACE`]
/// (the runtime's own shutdown) before leaving it behind.
const JOIN_MARGIN: Duration = Duration::from_secs(1);

/// What this node's loop does.
#[derive(Debug)]
pub(crate) enum Job {
    /// Send the outbox, answer snapshot requests.
    Ingest(Box<IngestNode>),
    /// Follow the interest, seed, write the slots.
    Edge(Box<EdgeNode>),
}

/// The running thread.
#[derive(Debug)]
pub(crate) struct NatsThread {
    handle: Option<JoinHandle<()>>,
    /// `true` once stopping; dropping it stops the thread too.
    stop: watch::Sender<bool>,
    /// Disconnected when the thread has ended (it holds the sender).
    ended: crossbeam_channel::Receiver<()>,
}

impl NatsThread {
    /// Starts `tickfan-nats` running `job` against the servers of `cfg`.
    ///
    /// # Errors
    /// When the OS refuses the thread.
    pub(crate) fn spawn(
        cfg: &ClusterConfig,
        job: Job,
        wake: Arc<Notify>,
        counters: Arc<Counters>,
        beat: Beat,
    ) -> std::io::Result<NatsThread> {
        let (stop, stop_rx) = watch::channel(false);
        let (ended_tx, ended) = crossbeam_channel::bounded::<()>(0);
        let urls: Vec<ServerAddr> = cfg
            .nats
            .iter()
            .filter_map(|u| u.trim().parse().ok())
            .collect();
        let name = format!("tickfan-{}", cfg.role.as_str());
        let handle = std::thread::Builder::new()
            .name("tickfan-nats".into())
            .spawn(move || {
                let _ended = ended_tx;
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        log::error!("nats: cannot build its runtime: {e}");
                        return;
                    }
                };
                let mut stopped = stop_rx.clone();
                rt.block_on(async move {
                    tokio::select! {
                        () = run(urls, name, job, wake, counters, beat, stop_rx) => {}
                        () = async {
                            // Err: the handle was dropped, which stops too.
                            let _ = stopped.wait_for(|s| *s).await;
                            tokio::time::sleep(STOP_GRACE).await;
                        } => log::warn!(
                            "nats: no server answered within {STOP_GRACE:?} of the stop; updates not yet sent are dropped"
                        ),
                    }
                });
                // Tasks of the client and of the job are dropped, not waited for.
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(NatsThread {
            handle: Some(handle),
            stop,
            ended,
        })
    }

    /// Stops the loop and waits for the thread: at most [`STOP_GRACE`]
    /// plus a margin, whatever the servers do. A thread still running then
    /// (it should not be) is left behind, logged, and not joined.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(true);
        match self.ended.recv_timeout(STOP_GRACE + JOIN_MARGIN) {
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(h) = self.handle.take() {
                    let _ = h.join();
                }
            }
            Ok(()) | Err(RecvTimeoutError::Timeout) => log::error!(
                "nats: its thread did not end within {:?} of the stop; left behind",
                STOP_GRACE + JOIN_MARGIN
            ),
        }
    }
}

/// One input of a job's own.
#[derive(Debug)]
pub(crate) enum Input {
    /// A snapshot request (ingest).
    Snap(async_nats::Message),
    /// An update on a market-data subject (edge).
    Md(async_nats::Message),
    /// The outcome of a snapshot request (edge).
    Seed(super::seed::SeedOutcome),
    /// The job's input ended (its subscription is gone until the next turn).
    Idle,
}

/// What the loop reacts to besides its job's own inputs.
#[derive(Debug)]
pub(crate) enum Link {
    /// (Re)connected to a server.
    Up,
    /// The connection was lost.
    Down,
    /// The client library dropped messages for a subscription.
    SlowConsumer,
}

async fn run(
    urls: Vec<ServerAddr>,
    name: String,
    job: Job,
    wake: Arc<Notify>,
    counters: Arc<Counters>,
    beat: Beat,
    mut stop: watch::Receiver<bool>,
) {
    let (ev_tx, mut ev_rx) = mpsc::channel::<Event>(EVENTS);
    let opts = ConnectOptions::new()
        .name(name)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(2))
        .ping_interval(Duration::from_secs(1))
        .reconnect_delay_callback(|n| Duration::from_millis((n as u64 * 50).min(500)))
        .event_callback(move |ev| {
            let tx = ev_tx.clone();
            async move {
                if let Err(e) = tx.try_send(ev) {
                    warn_repeating!(
                        WarnKind::NatsEventsDropped,
                        "nats: event channel full, dropped: {e}"
                    );
                }
            }
        });
    let client = match opts.connect(urls).await {
        Ok(c) => c,
        Err(e) => {
            log::error!("nats: cannot start the client: {e}");
            return;
        }
    };
    let mut job = job;
    match &mut job {
        Job::Ingest(n) => n.start(&client).await,
        Job::Edge(n) => n.start(&client).await,
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let c = &counters.cluster;
    while !*stop.borrow() {
        let mut link = None;
        tokio::select! {
            biased;
            // A change is the stop (or the handle dropped: stop as well).
            _ = stop.changed() => break,
            ev = ev_rx.recv() => {
                match ev {
                    Some(Event::Connected) => {
                        set(&c.connected, 1);
                        link = Some(Link::Up);
                    }
                    Some(Event::Disconnected) => {
                        set(&c.connected, 0);
                        bump(&c.disconnects, 1);
                        link = Some(Link::Down);
                    }
                    Some(Event::SlowConsumer(sid)) => {
                        bump(&c.slow_consumer_events, 1);
                        warn_repeating!(
                            WarnKind::NatsSlowConsumer,
                            "nats: slow consumer on subscription {sid}: re-seeding"
                        );
                        link = Some(Link::SlowConsumer);
                    }
                    Some(other) => log::info!("nats: {other}"),
                    None => {}
                }
            }
            _ = wake.notified() => {}
            _ = tick.tick() => {
                beat.beat();
                if let Job::Edge(n) = &mut job {
                    n.flush_stats();
                }
            }
            more = async {
                match &mut job {
                    Job::Ingest(n) => n.next_input().await,
                    Job::Edge(n) => n.next_input().await,
                }
            } => {
                match &mut job {
                    Job::Ingest(n) => n.handle(&client, more).await,
                    Job::Edge(n) => n.handle(&client, more).await,
                }
            }
        }
        match &mut job {
            Job::Ingest(n) => n.turn(&client, link).await,
            Job::Edge(n) => n.turn(&client, link).await,
        }
    }
    if let Job::Edge(n) = &mut job {
        n.finish_stats();
    }
    // Bounded: with no server a flush would wait for one for ever.
    if tokio::time::timeout(FLUSH_AT_STOP, client.flush())
        .await
        .is_err()
    {
        log::warn!("nats: last flush not confirmed within {FLUSH_AT_STOP:?} (no server?)");
    }
}
