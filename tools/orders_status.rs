//! `tickfan orders --status`: after the run, ask the engine `STATUS <id>` for
//! every id the run sent, on one new connection, and tally the answers by
//! state. It is how a client that lost replies (its connection, or the
//! engine, went away) learns every order's outcome; the tally is printed
//! whether or not the run itself passed.
//!
//! ```text
//!  one connection:  STATUS <id> × batch ──▶ engine order port
//!                   ◀── STATUS <id> <state> … × batch       (repeat)
//! ```
//!
//! Requests go in batches, each read back before the next is written, so
//! neither side's buffers grow with the number of ids.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tickfan::auth::Token;
use tickfan::client::orders::{status_line, OrderState, Reply};
use tickfan::error::Failure;

use super::auth;

/// Requests written before their answers are read.
const BATCH: usize = 1_000;
/// Longest wait for one answer (the engine answers at once).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The answers, counted by state (`DONE FILLED`, `DEAD retries_exhausted`, `QUEUED`, …).
pub type Tally = BTreeMap<String, u64>;

fn name(s: &OrderState) -> String {
    match s {
        OrderState::Queued => "QUEUED".into(),
        OrderState::AtBridge => "AT_BRIDGE".into(),
        OrderState::RetryWait => "RETRY_WAIT".into(),
        OrderState::Done(d) => format!("DONE {}", d.as_str()),
        OrderState::Dead(r) => format!("DEAD {r}"),
        OrderState::Expired => "EXPIRED".into(),
        OrderState::Unknown => "UNKNOWN".into(),
    }
}

/// Asks `STATUS` for each of `ids` at `to`; returns the answers by state.
///
/// # Errors
/// [`Failure::Runtime`] when the port cannot be reached, refuses the
/// token, closes, or answers something other than `STATUS` for an id.
pub fn query(to: SocketAddr, token: Option<&Token>, ids: &[String]) -> Result<Tally, Failure> {
    let io = |e: std::io::Error| Failure::Runtime(format!("status query to {to}: {e}"));
    let stream = TcpStream::connect(to).map_err(io)?;
    let _ = stream.set_nodelay(true);
    if let Some(t) = token {
        auth::line_handshake(&stream, t, "order port")?;
    }
    stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(io)?;
    let mut out = std::io::BufWriter::new(stream.try_clone().map_err(io)?);
    let mut reader = BufReader::new(stream);
    let mut tally = Tally::new();
    let mut line = String::new();
    for batch in ids.chunks(BATCH) {
        for id in batch {
            out.write_all(status_line(id).as_bytes()).map_err(io)?;
        }
        out.flush().map_err(io)?;
        for id in batch {
            line.clear();
            if reader.read_line(&mut line).map_err(io)? == 0 {
                return Err(Failure::Runtime(format!(
                    "status query to {to}: connection closed"
                )));
            }
            match Reply::parse(line.trim_end()) {
                Some(Reply::Status { id: got, state, .. }) if &got == id => {
                    *tally.entry(name(&state)).or_default() += 1;
                }
                _ => {
                    return Err(Failure::Runtime(format!(
                        "status query to {to}: for {id}, got: {}",
                        line.trim_end()
                    )))
                }
            }
        }
    }
    Ok(tally)
}

/// Prints the tally as one line.
pub fn print(tally: &Tally) {
    let parts: Vec<String> = tally.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("  STATUS of every id sent: {}", parts.join(", "));
}
