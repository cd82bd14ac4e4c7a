//! The NATS backbone: several tickfan nodes meet on a NATS cluster.
//!
//! An **ingest** node publishes every conflated update of its publisher on
//! `<prefix>.md.<symbol>` and answers snapshot requests on
//! `<prefix>.snap.<symbol>`; an **edge** node has no feed port, subscribes
//! on NATS only to what its clients want, seeds cold symbols by
//! request-reply and writes its own slots, so its publisher serves RESP
//! subscribers exactly as a single node does. See `docs/src/scale-out.md`.
//!
//! ```text
//!  feeds ─▶ ingest (slots → publisher ─▶ outbox) ─▶ tickfan-nats ─▶ NATS cluster
//!                                                                     │ md.<sym>, snap.<sym>
//!  subscribers ◀─ publisher ◀─ slots ◀─ edge_in ◀─ tickfan-nats (edge) ◀┘
//!                    └─ routes: first/last subscriber ─▶ interest board ─┘
//! ```
//!
//! | file | owns |
//! |---|---|
//! | [`role`] | `--role`, `--nats`, `--nats-prefix` and their checks |
//! | [`subjects`] | symbol ⇄ subject token, glob → NATS wildcard |
//! | [`wire`] | update and snapshot-reply formats, their checks |
//! | [`nats_thread`] | the client's thread and runtime, link events |
//! | [`ingest_out`], [`ingest_node`] | publisher → outbox → NATS; snapshot replies |
//! | [`interest`], [`edge_node`], [`seed`], [`edge_in`], [`order_guard`] | an edge's subjects, seeds, the slot writes, never older after newer |
//! | [`crate::stale`] (beside the stages, not here) | stale flags (silent source, lost backbone) and `__tickfan.stale` notices |
//!
//! Invariants: an edge's slots have one writer (its NATS thread); nothing
//! from the backbone reaches a slot unchecked or older than what it holds;
//! the publisher never waits on the backbone.

pub(crate) mod edge_in;
pub(crate) mod edge_node;
pub(crate) mod ingest_node;
pub(crate) mod ingest_out;
pub(crate) mod interest;
pub(crate) mod nats_thread;
pub(crate) mod order_guard;
pub mod role;
pub(crate) mod seed;
pub(crate) mod subjects;
pub(crate) mod wire;

use std::sync::Arc;

use tokio::sync::Notify;

use self::edge_in::EdgeIn;
pub(crate) use self::edge_in::EdgeParts;
use self::edge_node::EdgeNode;
use self::ingest_node::IngestNode;
use self::ingest_out::Outbox;
use self::interest::InterestBoard;
use self::nats_thread::{Job, NatsThread};
use self::role::{ClusterConfig, Role};
use crate::metrics::Counters;
use crate::stale::StaleLink;
use crate::symbols::SymbolTable;
use crate::sys::clock::wall_ns;
use crate::sys::watch::Beat;

/// The hand-offs between the engine's threads and the NATS thread, made
/// before either starts.
#[derive(Debug)]
pub(crate) struct Backbone {
    cfg: ClusterConfig,
    wake: Arc<Notify>,
    /// An ingest's publisher → NATS.
    pub outbox: Option<Arc<Outbox>>,
    /// An edge's routes → NATS.
    pub interest: Option<Arc<InterestBoard>>,
    /// An edge's NATS thread → the publisher's stale board.
    pub stale_link: Option<Arc<StaleLink>>,
}

impl Backbone {
    /// The hand-offs `cfg`'s role needs (none for a single node).
    pub(crate) fn new(cfg: &ClusterConfig, max_symbols: usize, counters: &Arc<Counters>) -> Self {
        let wake = Arc::new(Notify::new());
        Backbone {
            outbox: (cfg.role == Role::Ingest).then(|| {
                Arc::new(Outbox::new(
                    max_symbols,
                    Arc::clone(&wake),
                    Arc::clone(counters),
                ))
            }),
            interest: (cfg.role == Role::Edge)
                .then(|| Arc::new(InterestBoard::new(Arc::clone(&wake)))),
            stale_link: (cfg.role == Role::Edge).then(|| Arc::new(StaleLink::new(max_symbols))),
            cfg: cfg.clone(),
            wake,
        }
    }

    /// Starts an ingest's NATS thread (`None` on the other roles).
    ///
    /// # Errors
    /// When the OS refuses the thread.
    pub(crate) fn start_ingest(
        &self,
        table: &Arc<SymbolTable>,
        counters: &Arc<Counters>,
        beat: Beat,
    ) -> std::io::Result<Option<NatsThread>> {
        let Some(outbox) = &self.outbox else {
            return Ok(None);
        };
        let job = Job::Ingest(Box::new(IngestNode::new(
            self.cfg.prefix.clone(),
            wall_ns(),
            Arc::clone(outbox),
            Arc::clone(table),
            Arc::clone(counters),
        )));
        self.spawn(job, counters, beat).map(Some)
    }

    /// Starts an edge's NATS thread, the writer of its slots.
    ///
    /// # Errors
    /// When the OS refuses the thread.
    pub(crate) fn start_edge(
        &self,
        parts: EdgeParts,
        counters: &Arc<Counters>,
        beat: Beat,
    ) -> std::io::Result<NatsThread> {
        let board = self
            .interest
            .clone()
            .unwrap_or_else(|| Arc::new(InterestBoard::new(Arc::clone(&self.wake))));
        let edge = EdgeIn::new(parts, Arc::clone(counters));
        let stale = self
            .stale_link
            .clone()
            .unwrap_or_else(|| Arc::new(StaleLink::new(edge.capacity())));
        let job = Job::Edge(Box::new(EdgeNode::new(
            self.cfg.prefix.clone(),
            edge,
            board,
            stale,
            Arc::clone(counters),
        )));
        self.spawn(job, counters, beat)
    }

    fn spawn(&self, job: Job, counters: &Arc<Counters>, beat: Beat) -> std::io::Result<NatsThread> {
        NatsThread::spawn(
            &self.cfg,
            job,
            Arc::clone(&self.wake),
            Arc::clone(counters),
            beat,
        )
    }
}
