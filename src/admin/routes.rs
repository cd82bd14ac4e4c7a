//! What each route answers: the pure step between a parsed request and its
//! response (no socket here). Runs on the admin workers.

use std::sync::atomic::Ordering;

use super::http::{Request, Response};
use super::latency_buckets::LatencyBuckets;
use super::orders_switch;
use super::prometheus::{render, Scrape};
use super::replay::DLQ_PAGE_MAX;
use super::server::Shared;
use crate::metrics::alerts::Alert;
use crate::metrics::Stage;
use crate::sys::process::ProcessStats;

/// Where a request is answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Routed {
    /// Answered now.
    Now(Response),
    /// `POST /dlq/replay[?id=ID]`: for the replay thread.
    Replay(Option<String>),
}

/// Content type of `/metrics` (text exposition format 0.0.4).
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// True when the request carries the bearer token (or none is required).
fn authorized(req: &Request, sh: &Shared) -> bool {
    let Some(token) = &sh.state.token else {
        return true;
    };
    req.authorization
        .as_deref()
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| token.verify(t.trim().as_bytes()))
}

/// Why the engine is degraded: it serves, but its order journal refuses
/// new orders (read from the gauges the order gateway keeps).
fn degraded(st: &super::server::AdminState) -> Option<&'static str> {
    let o = &st.counters.orders;
    if o.journal_failed.load(Ordering::Relaxed) == 1 {
        Some("journal_error: the order journal cannot be written; new orders get SYSTEM_BUSY journal_error until a restart")
    } else if o.journal_disk_full.load(Ordering::Relaxed) == 1 {
        Some("journal_full: the order journal's disk is full; new orders get SYSTEM_BUSY journal_full until it has room")
    } else {
        None
    }
}

/// Answers one request.
pub(crate) fn route(req: &Request, sh: &Shared) -> Routed {
    let st = &sh.state;
    let path = req.path();
    if path != "/health" && !authorized(req, sh) {
        return Routed::Now(
            Response::text(401, "unauthorized: send Authorization: Bearer <token>\n")
                .and_header("WWW-Authenticate", "Bearer"),
        );
    }
    let json = |v: serde_json::Value| Response::with_type(200, "application/json", v.to_string());
    Routed::Now(match (req.method.as_str(), path) {
        ("GET", "/health") if req.query("format") == Some("json") => {
            let halted = st.orders.as_ref().is_some_and(|o| o.is_halted());
            let (code, v) = match st.watch.health() {
                Ok(()) => match degraded(st) {
                    None => (
                        200,
                        serde_json::json!({"status": "ok", "orders_halted": halted}),
                    ),
                    Some(why) => (
                        200,
                        serde_json::json!({"status": "degraded", "why": why, "orders_halted": halted}),
                    ),
                },
                Err(why) => (
                    503,
                    serde_json::json!({"status": "unhealthy", "why": why.to_string(), "orders_halted": halted}),
                ),
            };
            Response::with_type(code, "application/json", v.to_string())
        }
        ("GET", "/health") => {
            // A halted order path is healthy (the operator chose it) and
            // said on a second line, so a check that reads the body sees it.
            let halted = st.orders.as_ref().is_some_and(|o| o.is_halted());
            let note = if halted { "orders: halted\n" } else { "" };
            match (st.watch.health(), degraded(st)) {
                (Ok(()), None) => Response::text(200, format!("ok\n{note}")),
                // Serving, orders refused: a restart would not help (a
                // full disk), so not a 503 that invites one.
                (Ok(()), Some(why)) => Response::text(200, format!("degraded: {why}\n{note}")),
                (Err(why), _) => Response::text(503, format!("unhealthy: {why}\n{note}")),
            }
        }
        ("POST", "/orders/halt" | "/orders/resume") => {
            orders_switch::answer(req, path, st.orders.as_deref())
        }
        ("GET", "/metrics") => {
            let counters = st.counters.snapshot();
            let stages: Vec<(Stage, LatencyBuckets)> = Stage::ALL
                .iter()
                .map(|s| (*s, LatencyBuckets::of(&st.totals.histogram(*s))))
                .collect();
            let subs = st.subscribers.lock().clone();
            let process = ProcessStats::read()
                .map_err(|e| log::debug!("no process_* figures: {e}"))
                .ok();
            let body = render(&Scrape {
                counters: &counters,
                stages: &stages,
                subscribers: &subs,
                dlq_size: st.dlq.len() as u64,
                alerts: &st.alerts,
                uptime_s: st.started.elapsed().as_secs_f64(),
                process,
                admin: &sh.counters,
                warnings: crate::logging::repeat::totals(),
            });
            Response::with_type(200, METRICS_TYPE, body)
        }
        ("GET", "/report") => json(serde_json::json!({
            "uptime_s": st.started.elapsed().as_secs_f64(),
            "counters": st.counters.snapshot(),
            "stages": st.totals.summaries(),
            "subscribers": *st.subscribers.lock(),
            "dlq_size": st.dlq.len(),
            "alerts": Alert::ALL.iter().filter(|a| st.alerts.is_active(**a)).map(|a| a.as_str()).collect::<Vec<_>>(),
        })),
        ("GET", "/dlq") => {
            let num = |k| req.query(k).and_then(|v| v.parse::<usize>().ok());
            let offset = num("offset").unwrap_or(0);
            let limit = num("limit").unwrap_or(100).min(DLQ_PAGE_MAX);
            let all = st.dlq.recent(usize::MAX);
            let page: Vec<_> = all.iter().skip(offset).take(limit).collect();
            json(serde_json::json!({
                "total_in_memory": all.len(),
                "evicted": st.dlq.evicted(),
                "offset": offset,
                "limit": limit,
                "counts_by_reason": st.dlq.counts_by_reason(),
                "records": page,
            }))
        }
        ("POST", "/dlq/replay") if st.order_addr.is_none() => {
            Response::text(404, "not found: no order path\n")
        }
        ("POST", "/dlq/replay") => return Routed::Replay(req.query("id").map(str::to_string)),
        (
            _,
            "/health" | "/metrics" | "/report" | "/dlq" | "/dlq/replay" | "/orders/halt"
            | "/orders/resume",
        ) => Response::text(405, "method not allowed\n"),
        _ => Response::text(404, "not found: try /metrics, /report, /health, /dlq\n"),
    })
}

/// Runs a replay and answers it (on the replay thread).
pub(crate) fn replay(id: Option<String>, sh: &Shared) -> Response {
    match super::replay::replay(&sh.state, id) {
        Ok(v) => Response::with_type(200, "application/json", v.to_string()),
        Err(e) => Response::text(502, format!("replay failed: {e}\n")),
    }
}
