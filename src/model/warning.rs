//! The kinds of log line that can repeat under load: each is logged at most
//! once per interval and counted in `tickfan_warnings_total{kind}` (see
//! `crate::logging::repeat`).
//!
//! A kind groups lines that say the same thing about the same cause, from
//! whichever thread or port: one `auth_refused` kind for the three ports,
//! not one per port (the port is in the line itself).

/// A kind of repeating warning (or error). Each variant is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WarnKind {
    /// The NATS client's events arrived faster than the NATS thread took
    /// them (or while it was stopping) and were dropped.
    NatsEventsDropped = 0,
    /// An update or a snapshot reply could not be handed to the NATS client.
    NatsSendFailed,
    /// A subscription on NATS could not be made (an edge's subject, an
    /// ingest's snapshot requests).
    NatsSubscribeFailed,
    /// The NATS client dropped messages for a subscription (slow consumer).
    NatsSlowConsumer,
    /// `accept` failed on a listener (file descriptors exhausted, …).
    AcceptFailed,
    /// A connection was refused: its port was at `--max-conns`.
    ConnectionRefused,
    /// An accepted connection could not be registered with the poller.
    RegisterFailed,
    /// A connection presented a wrong or missing token.
    AuthRefused,
    /// A connection did not authenticate within `--auth-timeout`.
    AuthTimeout,
    /// An attempt or a cancel could not be journaled (or synced).
    NotJournaled,
    /// Fills that never came were skipped (a sequencing gap closed by its
    /// timer, or missing at an order's end).
    FillsSkipped,
    /// Chunks of a large order failed.
    ChunksFailed,
    /// An order worker could not be started.
    WorkerStartFailed,
    /// A bridge call's thread could not be started.
    CallThreadFailed,
    /// A journal segment could not be retired.
    JournalRetireFailed,
    /// The dead-letter file could not be written or synced.
    DlqFileFailed,
    /// An order's dead letter could not be recorded.
    DeadLetterFailed,
    /// A venue simulator's execution log could not be written.
    ExecLogFailed,
    /// A TLS handshake failed (no common version or cipher, a client
    /// certificate missing or not signed by `--tls-client-ca`, a corrupt record).
    TlsHandshakeFailed,
    /// A peer spoke plaintext to a TLS port (refused with the port's error line).
    TlsPlaintext,
}

impl WarnKind {
    /// Number of kinds (size of a per-kind counter array).
    pub const COUNT: usize = 20;

    /// Every kind, in counter-index order.
    pub const ALL: [WarnKind; Self::COUNT] = [
        WarnKind::NatsEventsDropped,
        WarnKind::NatsSendFailed,
        WarnKind::NatsSubscribeFailed,
        WarnKind::NatsSlowConsumer,
        WarnKind::AcceptFailed,
        WarnKind::ConnectionRefused,
        WarnKind::RegisterFailed,
        WarnKind::AuthRefused,
        WarnKind::AuthTimeout,
        WarnKind::NotJournaled,
        WarnKind::FillsSkipped,
        WarnKind::ChunksFailed,
        WarnKind::WorkerStartFailed,
        WarnKind::CallThreadFailed,
        WarnKind::JournalRetireFailed,
        WarnKind::DlqFileFailed,
        WarnKind::DeadLetterFailed,
        WarnKind::ExecLogFailed,
        WarnKind::TlsHandshakeFailed,
        WarnKind::TlsPlaintext,
    ];

    /// Stable snake-case name: the `kind` label and the name in log lines.
    pub const fn as_str(self) -> &'static str {
        match self {
            WarnKind::NatsEventsDropped => "nats_events_dropped",
            WarnKind::NatsSendFailed => "nats_send_failed",
            WarnKind::NatsSubscribeFailed => "nats_subscribe_failed",
            WarnKind::NatsSlowConsumer => "nats_slow_consumer",
            WarnKind::AcceptFailed => "accept_failed",
            WarnKind::ConnectionRefused => "connection_refused",
            WarnKind::RegisterFailed => "register_failed",
            WarnKind::AuthRefused => "auth_refused",
            WarnKind::AuthTimeout => "auth_timeout",
            WarnKind::NotJournaled => "not_journaled",
            WarnKind::FillsSkipped => "fills_skipped",
            WarnKind::ChunksFailed => "chunks_failed",
            WarnKind::WorkerStartFailed => "worker_start_failed",
            WarnKind::CallThreadFailed => "call_thread_failed",
            WarnKind::JournalRetireFailed => "journal_retire_failed",
            WarnKind::DlqFileFailed => "dlq_file_failed",
            WarnKind::DeadLetterFailed => "dead_letter_failed",
            WarnKind::ExecLogFailed => "exec_log_failed",
            WarnKind::TlsHandshakeFailed => "tls_handshake_failed",
            WarnKind::TlsPlaintext => "tls_plaintext",
        }
    }

    /// Index into a per-kind counter array.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for WarnKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_and_names_are_distinct() {
        let mut names = std::collections::HashSet::new();
        for (i, k) in WarnKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert!(names.insert(k.as_str()), "{k} twice");
            assert!(k
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }
}
