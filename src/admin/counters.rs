//! The admin endpoint's own counters: answers by status code, connections
//! refused over the bound, connections open.
//!
//! Writers: the admin event loop (connections, and every answer it writes);
//! reader: `/metrics`. `Relaxed` everywhere: each figure is independent and
//! only read for display.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Every status code the admin endpoint answers with (a fixed registry).
pub(crate) const STATUS_CODES: [u16; 14] = [
    200, 400, 401, 404, 405, 408, 409, 411, 413, 431, 500, 502, 503, 505,
];

/// Counters of the admin endpoint.
#[derive(Debug, Default)]
pub(crate) struct AdminCounters {
    /// Answers written, per [`STATUS_CODES`] entry.
    answers: [AtomicU64; STATUS_CODES.len()],
    /// Connections closed at once because the bound was reached.
    refused: AtomicU64,
    /// Connections open now.
    open: AtomicU64,
}

impl AdminCounters {
    /// Counts one answer with `status`.
    pub(crate) fn answered(&self, status: u16) {
        if let Some(i) = STATUS_CODES.iter().position(|c| *c == status) {
            self.answers[i].fetch_add(1, Relaxed);
        } else {
            debug_assert!(false, "status {status} missing from STATUS_CODES");
        }
    }

    /// Counts one connection refused over the bound.
    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Relaxed);
    }

    /// Sets the number of open connections.
    pub(crate) fn set_open(&self, n: usize) {
        self.open.store(n as u64, Relaxed);
    }

    /// Answers with `status` so far.
    pub(crate) fn answers(&self, status: u16) -> u64 {
        STATUS_CODES
            .iter()
            .position(|c| *c == status)
            .map_or(0, |i| self.answers[i].load(Relaxed))
    }

    /// Connections refused so far.
    pub(crate) fn refused_total(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> u64 {
        self.open.load(Relaxed)
    }
}
