//! Seeding a cold symbol by request-reply: the edge asks
//! `<prefix>.snap.<symbol>` on a fresh inbox and takes the first reply
//! carrying a value. Several ingests may answer (each one of a disjoint
//! set says `none` for the others' symbols; both halves of an A/B pair
//! answer with a value): replies are read for up to [`SEED_WINDOW`], the
//! first value ends the wait, `none` replies and bad ones (counted by the
//! caller with their reason) do not. No value within the window — no
//! ingest has the symbol yet — ends the seed without one; the symbol's
//! first update is then the first value.
//!
//! Runs as a task on the NATS thread's runtime; the outcome goes back to
//! the loop through the edge's bounded input channel.

use std::time::Duration;

use async_nats::Client;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::nats_thread::Input;
use super::subjects::snap_subject;
use super::wire::{parse_snap, SnapReply, Update};
use crate::metrics::cluster_counters::BackboneDrop;

/// How long a seed waits for a reply with a value.
pub(crate) const SEED_WINDOW: Duration = Duration::from_millis(500);

/// What a seed found.
#[derive(Debug)]
pub(crate) struct SeedOutcome {
    /// The symbol asked for.
    pub symbol: Vec<u8>,
    /// The first value any ingest replied with.
    pub value: Option<Update>,
    /// Replies dropped, with their reasons.
    pub bad: Vec<BackboneDrop>,
}

/// Starts a seed of `symbol`; its outcome arrives as [`Input::Seed`] on `tx`.
pub(crate) fn spawn(client: &Client, prefix: &str, symbol: Vec<u8>, tx: mpsc::Sender<Input>) {
    let client = client.clone();
    let subject = snap_subject(prefix, &symbol);
    tokio::spawn(async move {
        let mut bad = Vec::new();
        let value = ask(&client, subject, &symbol, &mut bad).await;
        let _ = tx
            .send(Input::Seed(SeedOutcome { symbol, value, bad }))
            .await;
    });
}

async fn ask(
    client: &Client,
    subject: String,
    symbol: &[u8],
    bad: &mut Vec<BackboneDrop>,
) -> Option<Update> {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.ok()?;
    client
        .publish_with_reply(subject, inbox, bytes::Bytes::new())
        .await
        .ok()?;
    let deadline = tokio::time::sleep(SEED_WINDOW);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            m = sub.next() => {
                let m = m?;
                if m.status.is_some() {
                    return None; // "no responders": no ingest is up
                }
                match parse_snap(symbol, &m.payload) {
                    Ok(SnapReply::Value(u)) => return Some(u),
                    Ok(SnapReply::None) => {}
                    Err(r) => bad.push(r),
                }
            }
            _ = &mut deadline => return None,
        }
    }
}
