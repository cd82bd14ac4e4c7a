//! Wiring: locks the data directory, binds the listeners, creates the
//! slots, the queues and the threads, pins them, and stops them in order.
//! Nothing imports this module but the binary, the tools and the tests.
//!
//! The data directory's lock ([`crate::sys::dir_lock`]) is taken before
//! anything else, so a second engine on a held directory stops having bound
//! and opened nothing; the [`Engine`] releases it only once stopped.
//!
//! Threads (each named `tickfan-…`): `feed` (ingest loop), `publish`
//! (publisher loop), `reporter` (histogram merge + report lines), `dlq`
//! (dead-letter store), the admin endpoint (`admin-io`, its workers and
//! `admin-replay`; see [`crate::admin`]), and, on a role that takes
//! orders (not an edge), the order path (`order-gw`
//! gateway, `order-wN`/`order-LN` small/large-lane workers, `order-scale`
//! their scaler, `retry` timer,
//! `fills` fill thread; see [`crate::order::wiring`]). Shutdown order: the
//! admin endpoint → the order path (it stops taking orders and gives every
//! accepted one its terminal reply) → the feed (stop flag, wake, join: it
//! flushes its histograms) → the publisher (its final drain sees every
//! tick) → the DLQ and the reporter, when their last producer is gone.
//!
//! A thread that panics does not stop anything by itself: its beat in the
//! [`Watch`] marks it dead, `/health` answers 503 naming it, and the
//! binary's main thread, which polls [`Watch::fatal`], runs the on-fatal
//! hooks (the DLQ file's `sync_data`; the journal registers its own with
//! [`Watch::on_fatal`]) and exits with status 3 without a graceful stop
//! (a stage is missing, so a drain could wait for it forever).

mod parts;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::Waker;
use parking_lot::Mutex;

use crate::admin::AdminServer;
use crate::bridge::Bridge;
use crate::cluster::nats_thread::NatsThread;
use crate::cluster::{Backbone, EdgeParts};
use crate::config::Config;
use crate::dlq::{Dlq, DlqStore};
use crate::error::StartError;
use crate::feed::ingest::{FeedLoop, STOP_WAKER};
use crate::metrics::report::SubscriberStats;
use crate::metrics::reporter::{Reporter, Totals};
use crate::metrics::{Counters, FinalReport, Stage, StageRecorder};
use crate::net::LoopCtx;
use crate::order::journal::files::WrapFiles;
use crate::order::wiring::OrderPath;
use crate::publish::publisher::{Publisher, WAKER};
use crate::retry::SharedClock;
use crate::slots::slots;
use crate::symbols::{SymbolInterner, SymbolTable};
use crate::sys::dir_lock::DirLock;
use crate::sys::watch::{Fault, Watch};

use parts::{
    feed_settings, os, polled, publisher_settings, spawn_hot, stale_link, Base, FeedRun, Listeners,
    PUBLISH_STAGES,
};

/// Parts a test or a tool may put in place of the defaults.
#[derive(Debug, Default)]
pub struct Injected {
    /// The engine clock of the order path (deadlines, retry timers, dedup
    /// retention, scheduled outages). Default: the monotonic clock.
    pub clock: Option<SharedClock>,
    /// Bridges to use instead of the simulators the config describes.
    pub bridges: Option<Vec<Arc<dyn Bridge>>>,
    /// The clock of the subscribers' throttle windows (`TICKFAN.THROTTLE`,
    /// `--sub-max-rate`, `--sub-max-bandwidth`) in the publisher. Default:
    /// the monotonic clock.
    pub window_clock: Option<SharedClock>,
    /// A fault that makes one thread panic or stall (tests; the binary
    /// takes it from `TICKFAN_FAULT`). See [`crate::sys::watch`].
    pub fault: Option<Fault>,
    /// What the order journal writes its segments through, around the data
    /// directory's files (tests: a disk whose syncs they hold or fail).
    /// Default: the files as they are.
    pub journal_files: Option<WrapFiles>,
}

/// A running engine.
///
/// Over 15 fields because it holds every thread's handle and every stop
/// flag and waker: [`Engine::shutdown`] stops them in a fixed order
/// (admin, orders, feed, publisher, DLQ, reporter), which one owner of
/// them all makes plain.
#[derive(Debug)]
pub struct Engine {
    feed_addr: SocketAddr,
    sub_addr: SocketAddr,
    /// `0.0.0.0:0` on an edge, which has no order path.
    order_addr: SocketAddr,
    /// The order path (`None`: an edge, see `Role::takes_orders`).
    order: Option<OrderPath>,
    counters: Arc<Counters>,
    symbols: Arc<SymbolTable>,
    subscribers: Arc<Mutex<Vec<SubscriberStats>>>,
    dlq_store: Arc<DlqStore>,
    feed_stop: Arc<AtomicBool>,
    publish_stop: Arc<AtomicBool>,
    feed_waker: Arc<Waker>,
    publish_waker: Arc<Waker>,
    feed: Option<FeedRun>,
    /// The NATS backbone's thread (ingest and edge roles).
    nats: Option<NatsThread>,
    publish: Option<JoinHandle<()>>,
    reporter: Option<Reporter>,
    dlq: Option<Dlq>,
    totals: Arc<Totals>,
    admin: Option<AdminServer>,
    watch: Arc<Watch>,
    /// The data directory's lock ([`Config::data_dir_in_use`]). Declared
    /// last and never taken: it is released only after [`Engine::stop`]
    /// (or the drop) has stopped every thread that writes there.
    _data_lock: Option<DirLock>,
}

impl Engine {
    /// Validates `config`, binds the listeners and starts every thread.
    ///
    /// # Errors
    /// An invalid configuration, a listener that cannot bind, a DLQ file that
    /// cannot be opened, or a thread/poller the OS refuses.
    pub fn start(config: &Config) -> Result<Engine, StartError> {
        Engine::start_with(config, Injected::default())
    }

    /// [`start`](Self::start) with an injected clock and/or bridges.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with(config: &Config, injected: Injected) -> Result<Engine, StartError> {
        config.validate()?;
        // First, before a port is bound or a file opened: a second engine
        // on this directory stops here, having touched nothing.
        let data_lock = config.data_dir_in_use().map(DirLock::acquire).transpose()?;
        let ports = Listeners::bind(config)?;
        let feed_stop = Arc::new(AtomicBool::new(false));
        let publish_stop = Arc::new(AtomicBool::new(false));
        let base = Base::start(
            config,
            injected.fault,
            ports.order.as_ref().map(|_| ports.order_addr),
        )?;
        let order = ports
            .order
            .map(|listener| {
                base.order_path(
                    config,
                    listener,
                    injected.clock,
                    injected.bridges,
                    injected.journal_files,
                )
            })
            .transpose()?;
        let Base {
            counters,
            subscribers,
            clock,
            watch,
            reporter,
            link,
            totals,
            dlq,
            dlq_tx,
            dlq_store,
            halt: _,
            admin,
        } = base;

        let (interner, symbols) = SymbolInterner::new(config.max_symbols);
        let (slot_writer, slot_reader) = slots(config.max_symbols);
        let backbone = Backbone::new(&config.cluster, config.max_symbols, &counters);
        let stale_link = stale_link(config, &backbone);

        let (publish_poll, publish_waker) = polled(WAKER, "publisher poller")?;
        let (feed_poll, feed_waker) = polled(STOP_WAKER, "feed poller")?;

        let publisher = Publisher::new(
            ports.sub,
            LoopCtx {
                poll: publish_poll,
                counters: Arc::clone(&counters),
                recorder: StageRecorder::new(&PUBLISH_STAGES, link.clone()),
                clock,
                stop: Arc::clone(&publish_stop),
                beat: watch.beat("tickfan-publish"),
            },
            slot_reader,
            Arc::clone(&symbols),
            publisher_settings(
                config,
                injected.window_clock,
                clock,
                &backbone,
                stale_link.clone(),
            ),
            Arc::clone(&subscribers),
        )
        .map_err(os("publisher"))?;
        let (feed, nats) = match ports.feed {
            None => {
                // The NATS thread takes the write ends the feed would have had.
                let nats = backbone
                    .start_edge(
                        EdgeParts {
                            interner,
                            slots: slot_writer,
                            publisher: Arc::clone(&publish_waker),
                            clock,
                            recorder: StageRecorder::new(&[Stage::Backbone], link.clone()),
                        },
                        &counters,
                        watch.beat("tickfan-nats"),
                    )
                    .map_err(os("nats thread"))?;
                (None, Some(nats))
            }
            Some(l) => {
                let nats = backbone
                    .start_ingest(&symbols, &counters, watch.beat("tickfan-nats"))
                    .map_err(os("nats thread"))?;
                (Some((l, interner, slot_writer)), nats)
            }
        };
        let feed = feed
            .map(|(listener, interner, slot_writer)| {
                FeedLoop::new(
                    listener,
                    LoopCtx {
                        poll: feed_poll,
                        counters: Arc::clone(&counters),
                        recorder: StageRecorder::new(&[Stage::FeedParse], link),
                        clock,
                        stop: Arc::clone(&feed_stop),
                        beat: watch.beat("tickfan-feed"),
                    },
                    interner,
                    slot_writer,
                    dlq_tx,
                    Arc::clone(&publish_waker),
                    feed_settings(config, stale_link),
                )
            })
            .transpose()
            .map_err(os("feed loop"))?;

        let (publish, feed) = spawn_hot(config, publisher, feed)?;
        log::info!(
            "feed listening on {}, subscribers on {}, orders on {}, admin on http://{}",
            ports.feed_addr,
            ports.sub_addr,
            ports.order_addr,
            admin.addr()
        );

        Ok(Engine {
            feed_addr: ports.feed_addr,
            sub_addr: ports.sub_addr,
            order_addr: ports.order_addr,
            order,
            counters,
            symbols,
            subscribers,
            dlq_store,
            feed_stop,
            publish_stop,
            feed_waker,
            publish_waker,
            feed,
            nats,
            publish: Some(publish),
            reporter: Some(reporter),
            dlq: Some(dlq),
            totals,
            admin: Some(admin),
            watch,
            _data_lock: data_lock,
        })
    }

    /// Where feeds connect.
    pub fn feed_addr(&self) -> SocketAddr {
        self.feed_addr
    }

    /// Where the admin endpoint listens (HTTP).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .as_ref()
            .map(AdminServer::addr)
            .unwrap_or(self.feed_addr)
    }

    /// Where subscribers connect.
    pub fn subscriber_addr(&self) -> SocketAddr {
        self.sub_addr
    }

    /// Where order clients connect (`0.0.0.0:0` on an edge, which takes
    /// no orders).
    pub fn order_addr(&self) -> SocketAddr {
        self.order_addr
    }

    /// Orders in the retry stage now (waiting for a retry or just due).
    pub fn retry_waiting(&self) -> usize {
        self.order.as_ref().map_or(0, OrderPath::retry_in_use)
    }

    /// Live counters.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// The interned symbols.
    pub fn symbols(&self) -> &Arc<SymbolTable> {
        &self.symbols
    }

    /// The dead-letter store.
    pub fn dlq(&self) -> &Arc<DlqStore> {
        &self.dlq_store
    }

    /// Per-subscriber figures as of the publisher's last refresh.
    pub fn subscribers(&self) -> Vec<SubscriberStats> {
        self.subscribers.lock().clone()
    }

    /// Merged stage histograms as of the last hand-off.
    pub fn totals(&self) -> &Arc<Totals> {
        &self.totals
    }

    /// The thread watch: `/health`'s source; register here what must be
    /// made durable before a fatal exit ([`Watch::on_fatal`]).
    pub fn watch(&self) -> &Arc<Watch> {
        &self.watch
    }

    /// Stops every thread and returns the final report.
    pub fn stop(mut self) -> FinalReport {
        self.shutdown()
    }

    fn shutdown(&mut self) -> FinalReport {
        if let Some(a) = self.admin.take() {
            a.stop();
        }
        if let Some(o) = &mut self.order {
            o.stop();
        }
        self.feed_stop.store(true, Ordering::Release);
        let _ = self.feed_waker.wake();
        if let Some(f) = self.feed.take() {
            f.join();
        }
        // An edge's slot writer (and an ingest's sender) stops with the feed.
        if let Some(mut n) = self.nats.take() {
            n.stop();
        }
        // The feed is gone: the publisher's final drain sees every tick.
        self.publish_stop.store(true, Ordering::Release);
        let _ = self.publish_waker.wake();
        if let Some(h) = self.publish.take() {
            let _ = h.join();
        }
        if let Some(d) = self.dlq.take() {
            d.finish();
        }
        self.reporter
            .take()
            .map(Reporter::finish)
            .unwrap_or_default()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.feed.is_some() || self.publish.is_some() || self.nats.is_some() {
            self.shutdown();
        }
    }
}
