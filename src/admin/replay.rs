//! `POST /dlq/replay`: dead-lettered orders sent back through the order
//! port, on a thread of its own.
//!
//! A replay talks to the order port and waits for one reply per order (up
//! to 10 s a line), so it runs on one dedicated thread fed by a bounded
//! queue, never on the threads that answer `/health` and `/metrics`.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use super::server::AdminState;

/// Most dead letters one `/dlq` page returns, and one replay sends.
pub(crate) const DLQ_PAGE_MAX: usize = 1_000;

/// Replays dead-lettered orders (one `id`, or every replayable one, at most
/// [`DLQ_PAGE_MAX`]) by sending `REPLAY` lines to the order port, as any
/// client could: the gateway stays the single owner of admission. Answers
/// how many were accepted again and why the others were refused. Their
/// outcome (fills, `DONE`, `DEAD`) shows in the counters and the DLQ.
///
/// # Errors
/// When the order port cannot be reached, refuses the token, or a reply
/// takes over 10 s.
pub(crate) fn replay(st: &AdminState, id: Option<String>) -> std::io::Result<serde_json::Value> {
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
    let Some(order_addr) = st.order_addr else {
        return Err(std::io::Error::other("no order path"));
    };
    let stream = std::net::TcpStream::connect_timeout(&order_addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
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
