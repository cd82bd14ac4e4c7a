//! The parts [`super::Engine::start_with`] starts, in its order: the
//! listeners, the base every role runs (counters, reporter, dead letters,
//! the kill switch, the admin endpoint), the order path, the publisher's
//! and the feed's settings, the hot threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use mio::{Poll, Waker};
use parking_lot::Mutex;

use crate::admin::orders_switch::OrdersSwitch;
use crate::admin::{AdminServer, AdminState};
use crate::bridge::Bridge;
use crate::cluster::role::Role;
use crate::cluster::Backbone;
use crate::config::Config;
use crate::dlq::{Dlq, DlqConfig, DlqSender, DlqStore};
use crate::error::StartError;
use crate::feed::ingest::{FeedLoop, FeedSettings};
use crate::metrics::alerts::{AlertLimits, Alerts};
use crate::metrics::hlog::{HistogramLog, ENGINE_LOG};
use crate::metrics::recorder::RecorderLink;
use crate::metrics::report::SubscriberStats;
use crate::metrics::reporter::{Reporter, ReporterInputs, Totals};
use crate::metrics::{Counters, Stage};
use crate::order::journal::files::WrapFiles;
use crate::order::msg::halt::Halt;
use crate::order::wiring::{OrderPath, OrderPathInputs};
use crate::publish::publisher::{Publisher, PublisherSettings};
use crate::publish::throttle::WindowClock;
use crate::retry::SharedClock;
use crate::stale::StaleLink;
use crate::sys::affinity::pin_and_log;
use crate::sys::clock::MonoClock;
use crate::sys::watch::{Fault, Watch};
use crate::tls::TlsPortName;

pub(super) fn bind(
    what: &'static str,
    addr: SocketAddr,
) -> Result<mio::net::TcpListener, StartError> {
    mio::net::TcpListener::bind(addr).map_err(|source| StartError::Bind { what, addr, source })
}

pub(super) fn os(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Os { what, source }
}

/// The engine's listeners, bound before any thread starts: the feed port
/// (not on an edge: its slots are written from the backbone), the
/// subscriber port, the order port (on a role that takes orders, see
/// `Role::takes_orders`); a listener not bound has address 0.0.0.0:0.
pub(super) struct Listeners {
    pub(super) feed: Option<mio::net::TcpListener>,
    pub(super) sub: mio::net::TcpListener,
    pub(super) order: Option<mio::net::TcpListener>,
    pub(super) feed_addr: SocketAddr,
    pub(super) sub_addr: SocketAddr,
    pub(super) order_addr: SocketAddr,
}

impl Listeners {
    /// Binds them, warning about every one reachable beyond this host
    /// without a token.
    pub(super) fn bind(config: &Config) -> Result<Listeners, StartError> {
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
pub(super) fn alert_limits(config: &Config) -> AlertLimits {
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
pub(super) fn publisher_settings(
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
        flush_gap_ns: config.sub_flush_gap.as_nanos() as u64,
        tls: config
            .tls
            .as_ref()
            .and_then(|t| t.for_port(TlsPortName::Subscribers)),
    }
}

/// How the feed runs: a thread of its own, or as the publisher's guest.
#[derive(Debug)]
pub(super) enum FeedRun {
    /// Its own thread.
    Thread(JoinHandle<()>),
    /// Turns inside the publisher's thread; told here when it has finished.
    Guest(crossbeam_channel::Receiver<()>),
}

impl FeedRun {
    /// Waits until the feed has finished (its stop flag set and its waker
    /// rung first). A guest whose host is gone has finished too (the
    /// channel is closed).
    pub(super) fn join(self) {
        match self {
            FeedRun::Thread(h) => {
                let _ = h.join();
            }
            FeedRun::Guest(done) => {
                let _ = done.recv();
            }
        }
    }
}

/// Starts the publisher and feed threads, pinned per `--pin`; the feed
/// runs in the publisher's thread when `--feed-thread` says so (by
/// default: when the engine may use one core only).
pub(super) fn spawn_hot(
    config: &Config,
    mut publisher: Publisher,
    feed: Option<FeedLoop>,
) -> Result<(JoinHandle<()>, Option<FeedRun>), StartError> {
    let pin = crate::sys::affinity::resolve(config.pin);
    let cores = crate::sys::affinity::usable_cores();
    let (feed, guest) = match feed {
        Some(f) if config.feed_thread.shares_publisher(cores, pin) => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            publisher
                .host(Box::new(f.into_guest(tx)))
                .map_err(os("feed loop in the publisher's thread"))?;
            log::info!("feed: in the publisher's thread ({cores} usable core(s))");
            (None, Some(FeedRun::Guest(rx)))
        }
        f => (f, None),
    };
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
                .map(FeedRun::Thread)
        })
        .transpose()
        .map_err(os("feed thread"))?;
    Ok((publish, feed.or(guest)))
}

/// What every role runs before its stages: the counters and the
/// per-subscriber figures, the engine clock and the watch over the
/// threads, the reporter (with the histogram log, `--log-dir`), the
/// dead-letter store, the order kill switch and the admin endpoint (bound
/// here, before any hot thread starts: a failure leaves nothing running).
pub(super) struct Base {
    pub(super) counters: Arc<Counters>,
    pub(super) subscribers: Arc<Mutex<Vec<SubscriberStats>>>,
    pub(super) clock: MonoClock,
    pub(super) watch: Arc<Watch>,
    pub(super) reporter: Reporter,
    pub(super) link: RecorderLink,
    pub(super) totals: Arc<Totals>,
    pub(super) dlq: Dlq,
    pub(super) dlq_tx: DlqSender,
    pub(super) dlq_store: Arc<DlqStore>,
    pub(super) halt: Arc<Halt>,
    pub(super) admin: AdminServer,
}

impl Base {
    /// Starts them; `order_addr` is the order port's address on a role
    /// that takes orders (the admin endpoint's kill switch and report).
    pub(super) fn start(
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
    pub(super) fn order_path(
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
pub(super) const PUBLISH_STAGES: [Stage; 4] = [
    Stage::SlotWait,
    Stage::Publish,
    Stage::SocketWrite,
    Stage::EngineE2e,
];

/// The feed loop's settings from the flags; the stale flags' link only
/// with `--stale-after` (an edge's link is the backbone's, not the feed's).
pub(super) fn feed_settings(config: &Config, stale_link: Option<Arc<StaleLink>>) -> FeedSettings {
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
pub(super) fn stale_link(config: &Config, backbone: &Backbone) -> Option<Arc<StaleLink>> {
    backbone.stale_link.clone().or_else(|| {
        config
            .cluster
            .stale_after
            .map(|_| Arc::new(StaleLink::new(config.max_symbols)))
    })
}

/// A poller and its waker on `token`.
pub(super) fn polled(
    token: mio::Token,
    what: &'static str,
) -> Result<(Poll, Arc<Waker>), StartError> {
    let poll = Poll::new().map_err(os(what))?;
    let waker = Waker::new(poll.registry(), token).map_err(os(what))?;
    Ok((poll, Arc::new(waker)))
}
