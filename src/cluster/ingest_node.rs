//! The ingest's side of the NATS thread: sends the outbox's updates on
//! `<prefix>.md.<symbol>` with the source epoch in the `Tickfan-Epoch`
//! header, and answers snapshot requests on `<prefix>.snap.*` from the
//! outbox's latest values (`snap …`, or `none <symbol>` for a symbol this
//! ingest holds nothing of).
//!
//! The source epoch is this incarnation's start time in wall-clock ns: a
//! restarted ingest has a new one (see [`super::order_guard`] for how an
//! edge uses it).
//!
//! Single owner: the NATS thread of an ingest.

use std::collections::HashMap;
use std::sync::Arc;

use async_nats::{Client, HeaderMap, Subscriber};
use futures_util::StreamExt;

use super::ingest_out::Outbox;
use super::nats_thread::{Input, Link};
use super::subjects::{md_subject, snap_wildcard, symbol_of};
use super::wire::{encode_none, encode_snap, EPOCH_HEADER};
use crate::logging::repeat::{error_repeating, warn_repeating};
use crate::metrics::counters::bump;
use crate::metrics::Counters;
use crate::model::warning::WarnKind;
use crate::symbols::{SymbolId, SymbolTable};

/// An ingest's job.
#[derive(Debug)]
pub(crate) struct IngestNode {
    prefix: String,
    epoch: u64,
    outbox: Arc<Outbox>,
    table: Arc<SymbolTable>,
    counters: Arc<Counters>,
    /// Subject per symbol id, built once.
    subjects: Vec<String>,
    /// Symbol name → id, learnt from the table as snapshot requests need it.
    ids: HashMap<Box<[u8]>, SymbolId>,
    snaps: Option<Subscriber>,
    headers: HeaderMap,
    reply: Vec<u8>,
}

impl IngestNode {
    /// The job of an ingest whose epoch is `epoch`.
    pub(crate) fn new(
        prefix: String,
        epoch: u64,
        outbox: Arc<Outbox>,
        table: Arc<SymbolTable>,
        counters: Arc<Counters>,
    ) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(EPOCH_HEADER, epoch.to_string().as_str());
        IngestNode {
            prefix,
            epoch,
            outbox,
            table,
            counters,
            subjects: Vec::new(),
            ids: HashMap::new(),
            snaps: None,
            headers,
            reply: Vec::with_capacity(256),
        }
    }

    /// Subscribes to the snapshot requests.
    pub(crate) async fn start(&mut self, client: &Client) {
        match client.subscribe(snap_wildcard(&self.prefix)).await {
            Ok(s) => self.snaps = Some(s),
            Err(e) => error_repeating!(
                WarnKind::NatsSubscribeFailed,
                "nats: cannot subscribe to snapshot requests: {e}"
            ),
        }
    }

    /// The next snapshot request.
    pub(crate) async fn next_input(&mut self) -> Input {
        match &mut self.snaps {
            Some(s) => match s.next().await {
                Some(m) => Input::Snap(m),
                None => {
                    self.snaps = None;
                    Input::Idle
                }
            },
            None => std::future::pending().await,
        }
    }

    /// Answers one snapshot request.
    pub(crate) async fn handle(&mut self, client: &Client, input: Input) {
        let Input::Snap(m) = input else {
            return;
        };
        let Some(reply_to) = m.reply else {
            return; // a publish without a reply subject: nothing to answer
        };
        self.reply.clear();
        match symbol_of(&self.prefix, "snap", &m.subject) {
            Some(sym) => {
                let mut payload = Vec::new();
                match self
                    .id(&sym)
                    .and_then(|id| self.outbox.latest(id, &mut payload))
                {
                    Some(seq) => encode_snap(&mut self.reply, &sym, self.epoch, seq, &payload),
                    None => encode_none(&mut self.reply, &sym),
                }
            }
            None => self.reply.extend_from_slice(b"none"),
        }
        let body = bytes::Bytes::copy_from_slice(&self.reply);
        if let Err(e) = client.publish(reply_to, body).await {
            warn_repeating!(
                WarnKind::NatsSendFailed,
                "nats: snapshot reply not sent: {e}"
            );
        }
        bump(&self.counters.cluster.snapshots_served, 1);
    }

    fn id(&mut self, sym: &[u8]) -> Option<SymbolId> {
        if let Some(&id) = self.ids.get(sym) {
            return Some(id);
        }
        while self.ids.len() < self.table.len() {
            let id = self.ids.len() as SymbolId;
            let name = self.table.name(id)?;
            self.ids.insert(name.into(), id);
        }
        self.ids.get(sym).copied()
    }

    /// Sends everything in the outbox; re-subscribes to requests if lost.
    pub(crate) async fn turn(&mut self, client: &Client, _link: Option<Link>) {
        if self.snaps.is_none() {
            self.start(client).await;
        }
        while let Some((id, payload, _seq)) = self.outbox.take() {
            while self.subjects.len() <= id as usize {
                let next = self.subjects.len() as SymbolId;
                let name = self.table.name(next).unwrap_or_default();
                self.subjects.push(md_subject(&self.prefix, name));
            }
            let subject = self.subjects[id as usize].clone();
            match client
                .publish_with_headers(subject, self.headers.clone(), payload)
                .await
            {
                Ok(()) => bump(&self.counters.cluster.published, 1),
                Err(e) => warn_repeating!(WarnKind::NatsSendFailed, "nats: update not sent: {e}"),
            }
        }
    }
}
