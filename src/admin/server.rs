//! The admin HTTP server thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::Mutex;
use tiny_http::{Header, Method, Request, Response, Server};

use super::prometheus::{render, Scrape};
use crate::auth::Token;
use crate::dlq::DlqStore;
use crate::metrics::alerts::{Alert, AlertGauges};
use crate::metrics::report::SubscriberStats;
use crate::metrics::reporter::Totals;
use crate::metrics::Counters;

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
    /// The order port, where `POST /dlq/replay` sends `REPLAY` lines.
    pub order_addr: SocketAddr,
    /// Engine start.
    pub started: Instant,
}

/// A running admin server.
pub struct AdminServer {
    server: Arc<Server>,
    addr: SocketAddr,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("addr", &self.addr)
            .finish()
    }
}

/// Most dead letters one `/dlq` page returns.
pub const DLQ_PAGE_MAX: usize = 1_000;

impl AdminServer {
    /// Binds `addr` and serves on a thread of its own.
    ///
    /// # Errors
    /// When the address cannot be bound or the thread cannot start.
    pub fn start(addr: SocketAddr, state: AdminState) -> std::io::Result<AdminServer> {
        let server = Arc::new(Server::http(addr).map_err(std::io::Error::other)?);
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("admin server has no IP address"))?;
        let s = Arc::clone(&server);
        let handle = std::thread::Builder::new()
            .name("tickfan-admin".into())
            .spawn(move || {
                for req in s.incoming_requests() {
                    serve(req, &state);
                }
            })?;
        Ok(AdminServer {
            server,
            addr,
            handle: Some(handle),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.server.unblock();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn header(k: &str, v: &str) -> Header {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("static header")
}

fn query(url: &str, key: &str) -> Option<usize> {
    let q = url.split_once('?')?.1;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// Replays dead-lettered orders (one `id`, or every replayable one, at most
/// [`DLQ_PAGE_MAX`]) by sending `REPLAY` lines to the order port, as any
/// client could: the gateway stays the single owner of admission. Answers
/// how many were accepted again and why the others were refused. Their
/// outcome (fills, `DONE`, `DEAD`) shows in the counters and the DLQ.
fn replay(st: &AdminState, id: Option<String>) -> std::io::Result<serde_json::Value> {
    use std::io::{BufRead, BufReader, Write};
    let ids: Vec<String> = match id {
        Some(i) => vec![i],
        None => st
            .dlq
            .replayable_ids()
            .into_iter()
            .take(DLQ_PAGE_MAX)
            .collect(),
    };
    if ids.is_empty() {
        return Ok(serde_json::json!({"requested": 0, "replayed": 0, "refused": []}));
    }
    let stream =
        std::net::TcpStream::connect_timeout(&st.order_addr, std::time::Duration::from_secs(5))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut w = std::io::BufWriter::new(stream);
    let mut line = String::new();
    if let Some(t) = &st.token {
        w.write_all(b"AUTH ")?;
        w.write_all(t.expose())?;
        w.write_all(b"\n")?;
        w.flush()?;
        reader.read_line(&mut line)?;
        if !line.starts_with("OK") {
            return Err(std::io::Error::other(format!(
                "order port refused the token: {}",
                line.trim()
            )));
        }
    }
    for i in &ids {
        writeln!(w, "REPLAY {i}")?;
    }
    w.flush()?;
    let mut waiting: std::collections::HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut replayed = Vec::new();
    let mut refused = Vec::new();
    while !waiting.is_empty() {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let mut f = line.split_whitespace();
        let (Some(kind), Some(rid)) = (f.next(), f.next()) else {
            continue;
        };
        if !waiting.remove(rid) {
            continue; // a fill or reply of an order replayed just before
        }
        match kind {
            "ACK" => replayed.push(rid.to_string()),
            _ => refused.push(serde_json::json!({"id": rid, "reply": line.trim()})),
        }
    }
    Ok(serde_json::json!({
        "requested": ids.len(),
        "replayed": replayed.len(),
        "replayed_ids": replayed,
        "refused": refused,
    }))
}

/// True when the request carries the bearer token (or none is required).
fn authorized(req: &Request, st: &AdminState) -> bool {
    let Some(token) = &st.token else { return true };
    req.headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .and_then(|h| h.value.as_str().strip_prefix("Bearer "))
        .is_some_and(|t| token.verify(t.trim().as_bytes()))
}

fn serve(req: Request, st: &AdminState) {
    let path = req.url().split('?').next().unwrap_or("").to_string();
    if path != "/health" && !authorized(&req, st) {
        let resp = Response::from_string("unauthorized: send Authorization: Bearer <token>\n")
            .with_status_code(401)
            .with_header(header("WWW-Authenticate", "Bearer"));
        let _ = req.respond(resp);
        return;
    }
    let (code, ctype, body) = match (req.method(), path.as_str()) {
        (Method::Get, "/health") => (200, "text/plain", "ok\n".to_string()),
        (Method::Get, "/metrics") => {
            let counters = st.counters.snapshot();
            let stages = st.totals.summaries();
            let subs = st.subscribers.lock().clone();
            let body = render(&Scrape {
                counters: &counters,
                stages: &stages,
                subscribers: &subs,
                dlq_size: st.dlq.len() as u64,
                alerts: &st.alerts,
                uptime_s: st.started.elapsed().as_secs_f64(),
            });
            (200, "text/plain; version=0.0.4", body)
        }
        (Method::Get, "/report") => {
            let report = serde_json::json!({
                "uptime_s": st.started.elapsed().as_secs_f64(),
                "counters": st.counters.snapshot(),
                "stages": st.totals.summaries(),
                "subscribers": *st.subscribers.lock(),
                "dlq_size": st.dlq.len(),
                "alerts": Alert::ALL.iter().filter(|a| st.alerts.is_active(**a)).map(|a| a.as_str()).collect::<Vec<_>>(),
            });
            (200, "application/json", report.to_string())
        }
        (Method::Get, "/dlq") => {
            let offset = query(req.url(), "offset").unwrap_or(0);
            let limit = query(req.url(), "limit").unwrap_or(100).min(DLQ_PAGE_MAX);
            let all = st.dlq.recent(usize::MAX);
            let page: Vec<_> = all.iter().skip(offset).take(limit).collect();
            let body = serde_json::json!({
                "total_in_memory": all.len(),
                "evicted": st.dlq.evicted(),
                "offset": offset,
                "limit": limit,
                "counts_by_reason": st.dlq.counts_by_reason(),
                "records": page,
            });
            (200, "application/json", body.to_string())
        }
        (Method::Post, "/dlq/replay") => {
            let id = req
                .url()
                .split_once('?')
                .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("id=")))
                .map(str::to_string);
            match replay(st, id) {
                Ok(v) => (200, "application/json", v.to_string()),
                Err(e) => (502, "text/plain", format!("replay failed: {e}\n")),
            }
        }
        (_, "/health" | "/metrics" | "/report" | "/dlq" | "/dlq/replay") => {
            (405, "text/plain", "method not allowed\n".to_string())
        }
        _ => (
            404,
            "text/plain",
            "not found: try /metrics, /report, /health, /dlq\n".to_string(),
        ),
    };
    let resp = Response::from_string(body)
        .with_status_code(code)
        .with_header(header("Content-Type", ctype));
    let _ = req.respond(resp);
}
