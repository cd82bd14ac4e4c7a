//! The admin server: its threads and how they are wired (see
//! [`super::event_loop`] for the picture).
//!
//! Threads: one I/O event loop, [`Limits::workers`] workers that build the
//! answers of the quick routes, one replay thread for `POST /dlq/replay`.
//! All of them only read shared state (atomics, snapshots taken under
//! short locks), never the hot path's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use mio::net::TcpListener;
use mio::{Interest, Poll, Waker};
use parking_lot::Mutex;

use super::counters::AdminCounters;
use super::event_loop::{Answer, EventLoop, Job, LISTENER, WAKER};
use super::http::{Limits, Response};
use super::routes::{self, Routed};
use crate::auth::Token;
use crate::dlq::DlqStore;
use crate::metrics::alerts::AlertGauges;
use crate::metrics::report::SubscriberStats;
use crate::metrics::reporter::Totals;
use crate::metrics::Counters;
use crate::net::TlsPort;
use crate::sys::watch::Watch;
use crate::tls::TlsPortName;

/// What a plaintext HTTP client of an HTTPS admin endpoint reads before its close.
const TLS_REFUSAL: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 37\r\nConnection: close\r\n\r\nthis port requires TLS: use https://\n";

/// What the endpoint reads.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Every counter.
    pub counters: Arc<Counters>,
    /// Merged stage histograms.
    pub totals: Arc<Totals>,
    /// Per-subscriber figures.
    pub subscribers: Arc<Mutex<Vec<SubscriberStats>>>,
    /// Dead letters.
    pub dlq: Arc<DlqStore>,
    /// Alert states.
    pub alerts: Arc<AlertGauges>,
    /// Bearer token every route but `/health` requires, if any.
    pub token: Option<Token>,
    /// The order port, where `POST /dlq/replay` sends `REPLAY` lines
    /// (`None`: no order path, an edge).
    pub order_addr: Option<SocketAddr>,
    /// Engine start.
    pub started: Instant,
    /// The engine's threads: `/health` answers 503 when one died or stalled.
    pub watch: Arc<Watch>,
    /// The order kill switch (`POST /orders/halt|resume`), if there is an order path.
    pub orders: Option<Arc<dyn super::orders_switch::OrdersSwitch>>,
    /// The endpoint's TLS (`--tls-ports` with `admin`): HTTPS only.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// What the workers share: the engine's state and the endpoint's counters.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The engine's state.
    pub state: AdminState,
    /// The endpoint's own counters.
    pub counters: Arc<AdminCounters>,
}

/// A running admin server.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

impl AdminServer {
    /// Binds `addr` and serves with the default [`Limits`].
    ///
    /// # Errors
    /// When the address cannot be bound or a thread cannot start.
    pub fn start(addr: SocketAddr, state: AdminState) -> std::io::Result<AdminServer> {
        AdminServer::start_with(addr, state, Limits::default())
    }

    /// Binds `addr` and serves within `limits`.
    ///
    /// # Errors
    /// When the address cannot be bound or a thread cannot start.
    pub fn start_with(
        addr: SocketAddr,
        state: AdminState,
        limits: Limits,
    ) -> std::io::Result<AdminServer> {
        let mut listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(AdminCounters::default());
        let tls = state.tls.clone().map(|server| {
            TlsPort::new(
                server,
                TlsPortName::Admin,
                TLS_REFUSAL,
                "admin connection",
                Arc::clone(&state.counters),
            )
        });
        let shared = Arc::new(Shared {
            state,
            counters: Arc::clone(&counters),
        });
        // Capacity max_connections: at most one job or answer per connection.
        let (job_tx, job_rx) = crossbeam_channel::bounded::<Job>(limits.max_connections);
        let (ans_tx, ans_rx) = crossbeam_channel::bounded::<Answer>(limits.max_connections);
        let (replay_tx, replay_rx) = crossbeam_channel::bounded::<Job>(limits.replay_queue);

        let mut server = AdminServer {
            addr,
            stop: Arc::clone(&stop),
            waker: Arc::clone(&waker),
            threads: Vec::new(),
        };
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            let watch = Arc::clone(&shared.state.watch);
            std::thread::Builder::new().name(name).spawn(move || {
                let _beat = watch.guard();
                f();
            })
        };
        for i in 0..limits.workers.max(1) {
            let (jobs, answers, replays) = (job_rx.clone(), ans_tx.clone(), replay_tx.clone());
            let (sh, wk) = (Arc::clone(&shared), Arc::clone(&waker));
            let h = spawn(
                format!("tickfan-admin-{i}"),
                Box::new(move || worker(&jobs, &answers, &replays, &wk, &sh)),
            )?;
            server.threads.push(h);
        }
        drop(replay_tx);
        let (sh, wk, answers) = (Arc::clone(&shared), Arc::clone(&waker), ans_tx.clone());
        let h = spawn(
            "tickfan-admin-replay".into(),
            Box::new(move || replayer(&replay_rx, &answers, &wk, &sh)),
        )?;
        server.threads.push(h);
        drop(ans_tx);
        let event_loop = EventLoop {
            poll,
            listener,
            jobs: job_tx,
            answers: ans_rx,
            stop,
            limits,
            counters,
            tls,
        };
        let h = spawn(
            "tickfan-admin-io".into(),
            Box::new(move || event_loop.run()),
        )?;
        server.threads.push(h);
        Ok(server)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection and joins the threads (a
    /// replay in progress is finished first).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Release pairs with the Acquire load in the event loop.
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        // The event loop ends and drops the job sender; the workers end and
        // drop the replay sender; the replay thread ends.
        for h in self.threads.drain(..).rev() {
            let _ = h.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Hands an answer to the event loop.
fn reply(answers: &Sender<Answer>, waker: &Waker, job: &Job, response: Response) {
    let a = Answer {
        conn: job.conn,
        id: job.id,
        response,
    };
    if answers.send(a).is_ok() {
        let _ = waker.wake();
    }
}

/// Runs `f`, turning a panic into a `500` so every request is answered.
fn guarded(f: impl FnOnce() -> Response) -> Response {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Response::text(500, "internal error (logged)\n"))
}

/// A worker: answers the quick routes, passes replays on.
fn worker(
    jobs: &Receiver<Job>,
    answers: &Sender<Answer>,
    replays: &Sender<Job>,
    waker: &Waker,
    sh: &Shared,
) {
    for job in jobs {
        let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            routes::route(&job.request, sh)
        }));
        let response = match routed {
            Ok(Routed::Now(r)) => r,
            Ok(Routed::Replay(_)) => match replays.try_send(job) {
                Ok(()) => continue,
                Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                    let busy = Response::text(503, "a replay is already in progress; try again\n")
                        .and_header("Retry-After", "5");
                    reply(answers, waker, &job, busy);
                    continue;
                }
            },
            Err(_) => Response::text(500, "internal error (logged)\n"),
        };
        reply(answers, waker, &job, response);
    }
}

/// The replay thread: one `POST /dlq/replay` at a time.
fn replayer(jobs: &Receiver<Job>, answers: &Sender<Answer>, waker: &Waker, sh: &Shared) {
    for job in jobs {
        let id = job.request.query("id").map(str::to_string);
        let response = guarded(|| routes::replay(id, sh));
        reply(answers, waker, &job, response);
    }
}
