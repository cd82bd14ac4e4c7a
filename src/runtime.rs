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

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::{Poll, Waker};
use parking_lot::Mutex;

use crate::admin::orders_switch::OrdersSwitch;
use crate::admin::{AdminServer, AdminState};
use crate::bridge::Bridge;
use crate::cluster::nats_thread::NatsThread;
use crate::cluster::role::Role;
use crate::cluster::{Backbone, EdgeParts};
use crate::config::Config;
use crate::dlq::{Dlq, DlqConfig, DlqSender, DlqStore};
use crate::error::StartError;
use crate::feed::ingest::{FeedLoop, FeedSettings, STOP_WAKER};
use crate::metrics::alerts::{AlertLimits, Alerts};
use crate::metrics::hlog::{HistogramLog, ENGINE_LOG};
use crate::metrics::recorder::RecorderLink;
use crate::metrics::report::SubscriberStats;
use crate::metrics::reporter::{Reporter, ReporterInputs, Totals};
use crate::metrics::{Counters, FinalReport, Stage, StageRecorder};
use crate::net::LoopCtx;
use crate::order::journal::files::WrapFiles;
use crate::order::msg::halt::Halt;
use crate::order::wiring::{OrderPath, OrderPathInputs};
use crate::publish::publisher::{Publisher, PublisherSettings, WAKER};
use crate::publish::throttle::WindowClock;
use crate::retry::SharedClock;
use crate::slots::slots;
use crate::stale::StaleLink;
use crate::symbols::{SymbolInterner, SymbolTable};
use crate::sys::affinity::pin_and_log;
use crate::sys::clock::MonoClock;
use crate::sys::dir_lock::DirLock;
use crate::sys::watch::{Fault, Watch};
use crate::tls::TlsPortName;

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
    feed: Option<JoinHandle<()>>,
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

fn bind(what: &'static str, addr: SocketAddr) -> Result<mio::net::TcpListener, StartError> {
    mio::net::TcpListener::bind(addr).map_err(|source| StartError::Bind { what, addr, source })
}

fn os(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Os { what, source }
}

/// The engine's listeners, bound before any thread starts: the feed port
/// (not on an edge: its slots are written from the backbone), the
/// subscriber port, the order port (on a role that takes orders, see
/// `Role::takes_orders`); a listener not bound has address 0.0.0.0:0.
struct Listeners {
    feed: Option<mio::net::TcpListener>,
    sub: mio::net::TcpListener,
    order: Option<mio::net::TcpListener>,
    feed_addr: SocketAddr,
    sub_addr: SocketAddr,
    order_addr: SocketAddr,
}

impl Listeners {
    /// Binds them, warning about every one reachable beyond this host
    /// without a token.
    fn bind(config: &Config) -> Result<Listeners, StartError> {
        // An edge has no feed port (its slots are written from the
        // backbone) and no order path (see `Role::takes_orders`).
        let is_edge = config.cluster.role == Role::Edge;
        let takes_orders = config.cluster.role.takes_orders();
        for (what, addr, bound) in [
            ("feed", config.feed_addr, !is_edge),
            ("subscriber", config.sub_addr, true),
            ("admin", config.admin_addr, true),
            ("order", config.order_addr, takes_orders),
        ] {
            if bound && !addr.ip().is_loopback() && config.token.is_none() {
                log::warn!(
                        "{what} listener on {addr} is reachable beyond this host and no --token-file is set: anyone who can connect can use it"
                    );
            }
        }
        let feed_listener = match is_edge {
            true => None,
            false => Some(bind("feed", config.feed_addr)?),
        };
        let sub_listener = bind("subscribers", config.sub_addr)?;
        let order_listener = match takes_orders {
            true => Some(bind("orders", config.order_addr)?),
            false => None,
        };
        let order_addr = match &order_listener {
            Some(l) => l.local_addr().map_err(os("order listener"))?,
            None => SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let feed_addr = match &feed_listener {
            Some(l) => l.local_addr().map_err(os("feed listener"))?,
            None => SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let sub_addr = sub_listener
            .local_addr()
            .map_err(os("subscriber listener"))?;
        Ok(Listeners {
            feed: feed_listener,
            sub: sub_listener,
            order: order_listener,
            feed_addr,
            sub_addr,
            order_addr,
        })
    }
}

/// The alert thresholds the flags set.
fn alert_limits(config: &Config) -> AlertLimits {
    AlertLimits {
        fill_ratio: 0.8,
        max_symbols: config.max_symbols as u64,
        max_conns: config.max_conns_per_port as u64,
        staleness: config.alert_staleness,
        dlq_per_sec: config.alert_dlq_rate,
        order_queue_capacity: [
            config.order.queue_capacity as u64,
            config.order.large_queue_capacity as u64,
        ],
        order_age: config.alert_order_age,
        bridge_call: config.alert_bridge_call,
    }
}

/// The publisher's settings from the flags, the backbone's hand-offs and
/// the stale flags' link.
fn publisher_settings(
    config: &Config,
    window_clock: Option<SharedClock>,
    clock: MonoClock,
    backbone: &Backbone,
    stale_link: Option<Arc<StaleLink>>,
) -> PublisherSettings {
    PublisherSettings {
        hwm: config.sub_hwm,
        max_conns: config.max_conns_per_port,
        max_rate: config.max_publish_rate,
        idle: config.idle,
        stats_interval_ns: config.report_interval.as_nanos() as u64,
        token: config.token.clone(),
        auth_timeout_ns: config.auth_timeout.as_nanos() as u64,
        max_subscriptions: config.max_subscriptions,
        sndbuf: config.sub_sndbuf,
        sub_max_rate: config.sub_max_rate,
        sub_max_bandwidth: config.sub_max_bandwidth,
        history_depth: config.history_depth,
        window_clock: {
            let c = window_clock.unwrap_or_else(|| Arc::new(clock));
            WindowClock::new(move || c.now_ns())
        },
        outbox: backbone.outbox.clone(),
        interest: backbone.interest.clone(),
        stale_after_ns: config
            .cluster
            .stale_after
            .map_or(0, |d| d.as_nanos() as u64),
        stale_link,
        max_lag_ns: config.sub_max_lag.as_nanos() as u64,
        pending_order: config.sub_pending_order,
        tls: config
            .tls
            .as_ref()
            .and_then(|t| t.for_port(TlsPortName::Subscribers)),
    }
}

/// Starts the publisher and feed threads, pinned per `--pin`.
fn spawn_hot(
    config: &Config,
    publisher: Publisher,
    feed: Option<FeedLoop>,
) -> Result<(JoinHandle<()>, Option<JoinHandle<()>>), StartError> {
    let pin = crate::sys::affinity::resolve(config.pin);
    let publish = std::thread::Builder::new()
        .name("tickfan-publish".into())
        .spawn(move || {
            pin_and_log("publish", pin.publish);
            publisher.run();
        })
        .map_err(os("publisher thread"))?;
    let feed = feed
        .map(|feed| {
            std::thread::Builder::new()
                .name("tickfan-feed".into())
                .spawn(move || {
                    pin_and_log("feed", pin.feed);
                    feed.run();
                })
        })
        .transpose()
        .map_err(os("feed thread"))?;
    Ok((publish, feed))
}

/// What every role runs before its stages: the counters and the
/// per-subscriber figures, the engine clock and the watch over the
/// threads, the reporter (with the histogram log, `--log-dir`), the
/// dead-letter store, the order kill switch and the admin endpoint (bound
/// here, before any hot thread starts: a failure leaves nothing running).
struct Base {
    counters: Arc<Counters>,
    subscribers: Arc<Mutex<Vec<SubscriberStats>>>,
    clock: MonoClock,
    watch: Arc<Watch>,
    reporter: Reporter,
    link: RecorderLink,
    totals: Arc<Totals>,
    dlq: Dlq,
    dlq_tx: DlqSender,
    dlq_store: Arc<DlqStore>,
    halt: Arc<Halt>,
    admin: AdminServer,
}

impl Base {
    /// Starts them; `order_addr` is the order port's address on a role
    /// that takes orders (the admin endpoint's kill switch and report).
    fn start(
        config: &Config,
        fault: Option<Fault>,
        order_addr: Option<SocketAddr>,
    ) -> Result<Base, StartError> {
        let counters = Arc::new(Counters::default());
        let subscribers = Arc::new(Mutex::new(Vec::new()));
        let clock = MonoClock::new();
        let watch = Arc::new(Watch::new(clock, fault));

        let alerts = Alerts::new(alert_limits(config));
        let alert_gauges = Arc::clone(alerts.gauges());
        let log = match &config.log_dir {
            Some(dir) => Some(HistogramLog::create(
                dir,
                ENGINE_LOG,
                // Time zero of the log is the engine clock's epoch, so
                // interval k starts at exactly k·I in the log.
                std::time::SystemTime::now() - clock.epoch().elapsed(),
                "tickfan engine: merged stage histograms per report interval",
            )?),
            None => None,
        };
        let (reporter, link) = Reporter::spawn(ReporterInputs {
            alerts,
            counters: Arc::clone(&counters),
            subscribers: Arc::clone(&subscribers),
            print_intervals: config.print_intervals,
            interval: config.report_interval,
            log,
            clock,
            watch: Arc::clone(&watch),
        })
        .map_err(os("reporter thread"))?;
        let totals = Arc::clone(reporter.totals());

        let (dlq, dlq_tx) = Dlq::start(
            &DlqConfig {
                capacity: config.dlq_capacity,
                file: config.dlq_file.clone(),
                handoff_capacity: 4096,
                max_bytes: config.dlq_max_bytes,
            },
            Arc::clone(&counters),
            &watch,
        )
        .map_err(|source| StartError::DlqFile {
            path: config
                .dlq_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            source,
        })?;
        let dlq_store = Arc::clone(dlq.store());
        // The order kill switch: the admin endpoint flips it, the order path reads it.
        let halt = Arc::new(Halt::new(config.order.start_halted));
        // Bound before any hot thread starts: a failure here leaves nothing running.
        let admin = AdminServer::start(
            config.admin_addr,
            AdminState {
                counters: Arc::clone(&counters),
                totals: Arc::clone(&totals),
                subscribers: Arc::clone(&subscribers),
                dlq: Arc::clone(&dlq_store),
                alerts: alert_gauges,
                token: config.token.clone(),
                order_addr,
                started: std::time::Instant::now(),
                watch: Arc::clone(&watch),
                orders: order_addr.map(|_| Arc::clone(&halt) as Arc<dyn OrdersSwitch>),
                tls: config
                    .tls
                    .as_ref()
                    .and_then(|t| t.for_port(TlsPortName::Admin)),
            },
        )
        .map_err(|source| StartError::Bind {
            what: "admin",
            addr: config.admin_addr,
            source,
        })?;
        Ok(Base {
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
            halt,
            admin,
        })
    }

    /// Starts the order path on `listener`, with the test hooks given
    /// (an engine clock, simulated venues, a journal's files).
    fn order_path(
        &self,
        config: &Config,
        listener: mio::net::TcpListener,
        clock: Option<SharedClock>,
        bridges: Option<Vec<Arc<dyn Bridge>>>,
        journal_files: Option<WrapFiles>,
    ) -> Result<OrderPath, StartError> {
        OrderPath::start(OrderPathInputs {
            listener,
            config: config.order.clone(),
            max_conns: config.max_conns_per_port,
            idle: config.idle,
            counters: Arc::clone(&self.counters),
            dlq_store: Arc::clone(&self.dlq_store),
            dlq: self.dlq_tx.clone(),
            link: self.link.clone(),
            mono: self.clock,
            clock: clock.unwrap_or_else(|| Arc::new(self.clock)),
            bridges,
            journal_files,
            token: config.token.clone(),
            auth_timeout: config.auth_timeout,
            watch: Arc::clone(&self.watch),
            halt: Arc::clone(&self.halt),
            tls: config
                .tls
                .as_ref()
                .and_then(|t| t.for_port(TlsPortName::Orders)),
        })
        .map_err(os("order path"))
    }
}

/// The stages the publisher thread records.
const PUBLISH_STAGES: [Stage; 4] = [
    Stage::SlotWait,
    Stage::Publish,
    Stage::SocketWrite,
    Stage::EngineE2e,
];

/// The feed loop's settings from the flags; the stale flags' link only
/// with `--stale-after` (an edge's link is the backbone's, not the feed's).
fn feed_settings(config: &Config, stale_link: Option<Arc<StaleLink>>) -> FeedSettings {
    FeedSettings {
        max_line_len: config.max_line_len,
        max_conns: config.max_conns_per_port,
        idle: config.idle,
        token: config.token.clone(),
        auth_timeout_ns: config.auth_timeout.as_nanos() as u64,
        stale: stale_link.filter(|_| config.cluster.stale_after.is_some()),
    }
}

/// The stale flags' link: an edge's (backbone events), or with
/// `--stale-after` one for the feed's closed connections.
fn stale_link(config: &Config, backbone: &Backbone) -> Option<Arc<StaleLink>> {
    backbone.stale_link.clone().or_else(|| {
        config
            .cluster
            .stale_after
            .map(|_| Arc::new(StaleLink::new(config.max_symbols)))
    })
}

/// A poller and its waker on `token`.
fn polled(token: mio::Token, what: &'static str) -> Result<(Poll, Arc<Waker>), StartError> {
    let poll = Poll::new().map_err(os(what))?;
    let waker = Waker::new(poll.registry(), token).map_err(os(what))?;
    Ok((poll, Arc::new(waker)))
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
        if let Some(h) = self.feed.take() {
            let _ = h.join();
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
