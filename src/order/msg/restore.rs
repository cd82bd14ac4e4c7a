//! A journaled order as the gateway takes it back at start. Recovery
//! (`order/journal/startup.rs`) reads the journal and tells the gateway's
//! side of a restart what it found, through [`Restore`]; the gateway
//! implements it (`order/gateway/restore.rs`: the dedup store, each order's
//! `STATUS`, the reading of a `NEW` line), and the wiring hands one to the
//! other. So the journal names no gateway type.
//!
//! Single owner: the wiring thread at start, before the gateway runs.

use std::sync::Arc;

use crate::model::units::Lots;

use super::order::Resumed;
use super::record::Record;

/// The gateway's side of a restart (see the module docs).
pub(crate) trait Restore {
    /// Remembers `id`, accepted `age_ns` before `now_ns` (within the dedup
    /// retention), unless it is remembered already: a `NEW` with it is a
    /// `DUPLICATE` again, and its `STATUS` is rebuilt from its quantity,
    /// its `Terminal` record (`end`, `None`: re-queued) and what its client
    /// was sent (`resumed`).
    fn restore_id(
        &mut self,
        id: &str,
        now_ns: u64,
        age_ns: u64,
        qty: Lots,
        end: Option<&Record>,
        resumed: &Resumed,
    );

    /// The ordering key (`<acct> <symbol>`) of a journaled `NEW` line, if
    /// it has `acct=`.
    fn acct_key(&self, raw: &str) -> Option<Arc<str>>;
}
