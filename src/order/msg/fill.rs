//! What the workers (and the retry timer) tell the fill thread: a
//! [`FillMsg`] per order begun, venue fill and chunk ended. Senders: the
//! lane workers and the retry timer; receiver: the fill thread
//! (`order/fills/`), through a bounded channel the wiring builds.

use crate::bridge::VenueFill;
use crate::dlq::AttemptRecord;
use crate::model::order_reasons::DeadReason;
use crate::model::units::Lots;

use super::order::Order;

/// What the workers (and the retry timer) tell the fill thread.
#[derive(Debug)]
pub(crate) enum FillMsg {
    /// An order whose fills will follow, split into chunks of these sizes
    /// (one chunk for a small order). Sent before any of its fills.
    Begin {
        /// The parent order (its id, connection, timing, raw line).
        order: Box<Order>,
        /// Chunk sizes, adding up to the order's quantity.
        chunks: Vec<Lots>,
    },
    /// One venue fill of one chunk, as delivered.
    Fill {
        /// Parent admission number.
        parent: u64,
        /// Chunk index.
        chunk: u32,
        /// The fill, absolute values.
        fill: VenueFill,
    },
    /// A chunk ended; no fill of it follows.
    End {
        /// Parent admission number.
        parent: u64,
        /// Chunk index.
        chunk: u32,
        /// How.
        end: ChunkEnd,
    },
}

/// How a chunk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChunkEnd {
    /// A bridge executed it; its fills were sent before this.
    Executed {
        /// Highest fill number delivered (0: none).
        last_fill: u32,
        /// Attempts it took.
        attempts: u32,
    },
    /// Refused permanently, retries exhausted, or the engine stopped.
    Dead {
        /// Why.
        reason: DeadReason,
        /// Its attempts.
        history: Vec<AttemptRecord>,
    },
    /// Its TTL passed before it could be sent.
    Expired {
        /// Attempts made.
        attempts: u32,
    },
    /// Its order was cancelled (`CANCEL`) before it started: never sent.
    Cancelled,
}
