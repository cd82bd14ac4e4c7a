//! The measured stages of the engine, one latency histogram each.

/// A measured stage. Values are recorded in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Parse + validate + slot write of one tick (feed thread; averaged over
    /// each read batch so the clock is read twice per batch, not per tick).
    FeedParse,
    /// From the tick's receive time to the publisher taking it from its slot.
    SlotWait,
    /// Take one update from its slot, encode it and append it to every
    /// subscriber buffer (publisher; one clock read per update).
    Publish,
    /// One non-blocking `write` to one subscriber socket.
    SocketWrite,
    /// Inside the engine: tick received → its frame handed to the kernel for
    /// the subscribers it was appended to.
    EngineE2e,
    /// Order line received → its `REJECT` handed to the kernel (order gateway).
    OrderReject,
    /// Order offered to its lane's queue → taken by a worker (both lanes).
    OrderQueueWait,
    /// One attempt of one order in a worker: deadline check, bridge call,
    /// outcome handling (fills, DLQ hand-off or hand-off to the retry timer).
    OrderProcess,
    /// Order line received → its terminal reply handed to the kernel
    /// (retries and their delays included).
    OrderE2e,
    /// [`Stage::OrderQueueWait`] of the small-order lane.
    OrderQueueWaitSmall,
    /// [`Stage::OrderQueueWait`] of the large-order lane (parent order
    /// offered → taken by a large-lane worker to be split).
    OrderQueueWaitLarge,
    /// [`Stage::OrderProcess`] of the small-order lane.
    OrderProcessSmall,
    /// [`Stage::OrderProcess`] of the large-order lane: one attempt of one chunk.
    OrderProcessLarge,
    /// [`Stage::OrderE2e`] of small orders.
    OrderE2eSmall,
    /// [`Stage::OrderE2e`] of large orders (received → the parent's terminal reply).
    OrderE2eLarge,
    /// Order line received → its `ACK` written to the connection's buffer
    /// (order gateway); with the journal on, the wait for the `fdatasync`
    /// that makes the order durable is inside it.
    OrderAck,
    /// The journal's wait before a commit that an `ACK` waits for: the
    /// first urgent record of a batch appended → its commit starts
    /// (journal thread, one sample per such commit): the commit in
    /// progress, then the journal thread's wake-up.
    JournalWait,
    /// One commit of the order journal: its batch's `write` and `fdatasync`
    /// (journal thread, one sample per commit). The disk's sync latency
    /// under the engine's own load, beside [`Stage::OrderAck`], which waits
    /// for it.
    JournalSync,
    /// A commit ended → the gateway writes the first `ACK` it made durable
    /// (gateway, one sample per commit it releases `ACK`s after): the
    /// gateway's wake-up and the rest of its turn. With
    /// [`Stage::JournalWait`] and [`Stage::JournalSync`] it makes up most
    /// of [`Stage::OrderAck`] with the journal on.
    AckRelease,
    /// A due retry waiting for a worker: its due time (retry timer) → taken
    /// by a worker of its lane (engine clock; the retry quota's measure).
    OrderRetryWait,
    /// On an edge: a live update's receipt at the ingest (the wall-clock
    /// time it carries) → written to the edge's slot (wall clock), so the
    /// ingest's publish, NATS and the edge's intake. Across hosts it also
    /// holds their clock offset (keep them synchronised, e.g. chrony/PTP).
    Backbone,
}

impl Stage {
    /// Number of stages.
    pub const COUNT: usize = 21;
    /// Every stage, in index order.
    pub const ALL: [Stage; Stage::COUNT] = [
        Stage::FeedParse,
        Stage::SlotWait,
        Stage::Publish,
        Stage::SocketWrite,
        Stage::EngineE2e,
        Stage::OrderReject,
        Stage::OrderQueueWait,
        Stage::OrderProcess,
        Stage::OrderE2e,
        Stage::OrderQueueWaitSmall,
        Stage::OrderQueueWaitLarge,
        Stage::OrderProcessSmall,
        Stage::OrderProcessLarge,
        Stage::OrderE2eSmall,
        Stage::OrderE2eLarge,
        Stage::OrderAck,
        Stage::JournalWait,
        Stage::JournalSync,
        Stage::AckRelease,
        Stage::OrderRetryWait,
        Stage::Backbone,
    ];

    /// Stable snake-case name (reports, files, metric labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::FeedParse => "feed_parse",
            Stage::SlotWait => "slot_wait",
            Stage::Publish => "publish",
            Stage::SocketWrite => "socket_write",
            Stage::EngineE2e => "engine_e2e",
            Stage::OrderReject => "order_reject",
            Stage::OrderQueueWait => "order_queue_wait",
            Stage::OrderProcess => "order_process",
            Stage::OrderE2e => "order_e2e",
            Stage::OrderQueueWaitSmall => "order_queue_wait_small",
            Stage::OrderQueueWaitLarge => "order_queue_wait_large",
            Stage::OrderProcessSmall => "order_process_small",
            Stage::OrderProcessLarge => "order_process_large",
            Stage::OrderE2eSmall => "order_e2e_small",
            Stage::OrderE2eLarge => "order_e2e_large",
            Stage::OrderAck => "order_ack",
            Stage::JournalWait => "journal_wait",
            Stage::JournalSync => "journal_sync",
            Stage::AckRelease => "ack_release",
            Stage::OrderRetryWait => "order_retry_wait",
            Stage::Backbone => "backbone",
        }
    }

    /// Index into per-stage arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// A fresh histogram with the engine's bounds: 1 ns to 60 s, 3 significant digits.
pub(crate) fn new_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds are valid")
}
