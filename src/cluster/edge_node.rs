//! The edge's side of the NATS thread: follows its clients' interest on
//! NATS, seeds cold symbols, writes what passes the checks into its slots,
//! and flags symbols stale while the backbone is lost.
//!
//! Per wanted symbol a [`SymState`]: a cold symbol (first interest, first
//! update seen behind a wildcard, or every symbol after a reconnect or a
//! slow-consumer event) is seeded ([`super::seed`]); live updates that
//! arrive meanwhile are held, the newest only (bounded: one per symbol),
//! and applied after the seed's value, both through the order guard. So
//! a symbol's first value forwarded is the snapshot's (or, when no ingest
//! has one yet, its first update), and never an older one after a newer.
//!
//! Stale: a lost link is told to the publisher's stale board
//! ([`crate::stale`]), which flags every known symbol; last values keep
//! being served; a symbol turns live on its next value, or when its
//! re-seed after the link returned finds the value held is still the
//! newest (a confirmation).
//!
//! Bounds: the input channel holds [`INBOX`] messages (a full one makes
//! the subscription tasks wait, and the client library's own bounded
//! buffer then reports a slow consumer, which re-seeds); states exist only
//! for wanted symbols (≤ `--max-symbols` are ever written).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_nats::Client;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::edge_in::EdgeIn;
use super::interest::{InterestBoard, InterestView};
use super::nats_thread::{Input, Link};
use super::seed::{self, SeedOutcome};
use super::subjects::symbol_of;
use super::wire::{parse_update, Update, EPOCH_HEADER};
use crate::logging::repeat::warn_repeating;
use crate::metrics::cluster_counters::BackboneDrop;
use crate::metrics::counters::{bump, set};
use crate::metrics::Counters;
use crate::model::warning::WarnKind;
use crate::stale::StaleLink;

/// Messages (updates and seed outcomes) waiting for the loop.
pub(crate) const INBOX: usize = 4096;
/// Most inputs handled in one turn before the publisher is woken.
const BATCH: usize = 256;

#[derive(Debug, Default)]
struct SymState {
    /// A seed is in flight.
    seeding: bool,
    /// Seeded since the last interest, reconnect or slow-consumer event.
    seeded: bool,
    /// The newest update that arrived while seeding.
    held: Option<Update>,
}

/// An edge's job.
#[derive(Debug)]
pub(crate) struct EdgeNode {
    prefix: String,
    edge: EdgeIn,
    board: Arc<InterestBoard>,
    stale: Arc<StaleLink>,
    view: InterestView,
    counters: Arc<Counters>,
    /// Subject → (how many interests map to it, the task forwarding it).
    subs: BTreeMap<String, (usize, JoinHandle<()>)>,
    states: HashMap<Vec<u8>, SymState>,
    tx: mpsc::Sender<Input>,
    rx: mpsc::Receiver<Input>,
    /// The link went down since the last (re)connect.
    lost: bool,
}

impl EdgeNode {
    /// The job of an edge writing through `edge`.
    pub(crate) fn new(
        prefix: String,
        edge: EdgeIn,
        board: Arc<InterestBoard>,
        stale: Arc<StaleLink>,
        counters: Arc<Counters>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(INBOX);
        EdgeNode {
            prefix,
            edge,
            board,
            stale,
            view: InterestView::default(),
            counters,
            subs: BTreeMap::new(),
            states: HashMap::new(),
            tx,
            rx,
            lost: false,
        }
    }

    /// Nothing to do before the first turn: interest comes from clients.
    pub(crate) async fn start(&mut self, client: &Client) {
        self.follow_interest(client).await;
    }

    /// The next update or seed outcome.
    pub(crate) async fn next_input(&mut self) -> Input {
        self.rx.recv().await.unwrap_or(Input::Idle)
    }

    /// Handles `first` and whatever else is waiting, up to a batch.
    pub(crate) async fn handle(&mut self, client: &Client, first: Input) {
        let mut input = Some(first);
        let mut n = 0;
        while let Some(i) = input.take() {
            match i {
                Input::Md(m) => self.on_update(client, m),
                Input::Seed(s) => self.on_seed(s),
                Input::Snap(_) | Input::Idle => {}
            }
            n += 1;
            if n < BATCH {
                input = self.rx.try_recv().ok();
            }
        }
        self.edge.wake();
    }

    fn drop_for(&self, r: BackboneDrop) {
        bump(&self.counters.cluster.dropped[r.index()], 1);
    }

    fn on_update(&mut self, client: &Client, m: async_nats::Message) {
        let Some(symbol) = symbol_of(&self.prefix, "md", &m.subject) else {
            return self.drop_for(BackboneDrop::Malformed);
        };
        if !self.view.wants(&symbol) {
            return self.drop_for(BackboneDrop::Unwanted);
        }
        let epoch = m
            .headers
            .as_ref()
            .and_then(|h| h.get(EPOCH_HEADER))
            .map(|v| v.as_str());
        let u = match parse_update(&symbol, epoch, &m.payload) {
            Ok(u) => u,
            Err(r) => return self.drop_for(r),
        };
        let st = self.states.entry(symbol.clone()).or_default();
        if st.seeded {
            self.apply(&symbol, &u);
            return;
        }
        if st.held.is_none_or(|h| h.seq < u.seq) {
            st.held = Some(u);
        }
        if !st.seeding {
            self.seed(client, symbol);
        }
    }

    fn on_seed(&mut self, s: SeedOutcome) {
        for r in &s.bad {
            self.drop_for(*r);
        }
        let Some(st) = self.states.get_mut(&s.symbol) else {
            return; // no longer wanted
        };
        st.seeding = false;
        st.seeded = true;
        let held = st.held.take();
        if let Some(v) = s.value {
            match self.edge.apply(&s.symbol, &v, false) {
                // The value held is the newest: confirmed live.
                Err(BackboneDrop::Duplicate) => {
                    self.drop_for(BackboneDrop::Duplicate);
                    if let Some(id) = self.edge.id(&s.symbol) {
                        self.stale.confirm(id);
                    }
                }
                Err(r) => self.drop_for(r),
                Ok(_) => {}
            }
        }
        if let Some(h) = held {
            // Held while seeding: it waited here, not on the backbone.
            if let Err(r) = self.edge.apply(&s.symbol, &h, false) {
                self.drop_for(r);
            }
        }
    }

    fn apply(&mut self, symbol: &[u8], u: &Update) {
        if let Err(r) = self.edge.apply(symbol, u, true) {
            self.drop_for(r);
        }
    }

    fn seed(&mut self, client: &Client, symbol: Vec<u8>) {
        if let Some(st) = self.states.get_mut(&symbol) {
            st.seeding = true;
        }
        bump(&self.counters.cluster.seeds, 1);
        seed::spawn(client, &self.prefix, symbol, self.tx.clone());
    }

    /// Subscribes and unsubscribes to match the board; seeds newly wanted channels.
    async fn follow_interest(&mut self, client: &Client) {
        let Some(view) = self.board.view_since(self.view.generation) else {
            return;
        };
        self.view = view;
        let wanted = self.view.subjects(&self.prefix);
        let gone: Vec<String> = self
            .subs
            .keys()
            .filter(|s| !wanted.contains_key(*s))
            .cloned()
            .collect();
        for s in gone {
            if let Some((_, task)) = self.subs.remove(&s) {
                task.abort(); // drops the subscriber: UNSUB
            }
        }
        for (subject, count) in wanted {
            if let Some(e) = self.subs.get_mut(&subject) {
                e.0 = count;
                continue;
            }
            match client.subscribe(subject.clone()).await {
                Ok(mut sub) => {
                    let tx = self.tx.clone();
                    let task = tokio::spawn(async move {
                        while let Some(m) = sub.next().await {
                            if tx.send(Input::Md(m)).await.is_err() {
                                break;
                            }
                        }
                    });
                    self.subs.insert(subject, (count, task));
                }
                Err(e) => warn_repeating!(
                    WarnKind::NatsSubscribeFailed,
                    "nats: cannot subscribe to {subject}: {e}"
                ),
            }
        }
        set(&self.counters.cluster.subjects, self.subs.len() as u64);
        let view = &self.view;
        self.states.retain(|sym, _| view.wants(sym));
        let cold: Vec<Vec<u8>> = self
            .view
            .channels()
            .filter(|c| !self.states.contains_key(*c))
            .map(<[u8]>::to_vec)
            .collect();
        for c in cold {
            self.states.insert(c.clone(), SymState::default());
            self.seed(client, c);
        }
    }

    /// Hands off the `backbone` stage's interval when it ended.
    pub(crate) fn flush_stats(&mut self) {
        self.edge.flush_stats();
    }

    /// The last hand-off of the `backbone` stage.
    pub(crate) fn finish_stats(&mut self) {
        self.edge.finish_stats();
    }

    /// Follows interest changes and reacts to the link.
    pub(crate) async fn turn(&mut self, client: &Client, link: Option<Link>) {
        match link {
            Some(Link::Down) => {
                self.lost = true;
                self.stale.lost(self.edge.now_ns());
            }
            Some(Link::Up) if self.lost => {
                self.lost = false;
                self.reseed(client);
            }
            Some(Link::SlowConsumer) => self.reseed(client),
            _ => {}
        }
        self.follow_interest(client).await;
    }

    fn reseed(&mut self, client: &Client) {
        bump(&self.counters.cluster.reseeds, 1);
        let all: Vec<Vec<u8>> = self.states.keys().cloned().collect();
        for sym in all {
            if let Some(st) = self.states.get_mut(&sym) {
                st.seeded = false;
                if st.seeding {
                    continue;
                }
            }
            self.seed(client, sym);
        }
    }
}
