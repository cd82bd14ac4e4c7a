//! Counters of TLS on the subscriber, order and admin ports
//! ([`crate::tls`]): handshakes completed and failed, and peers that spoke
//! plaintext to a TLS port (refused with the port's error line).
//!
//! Writers: each port's own event-loop thread writes its port's group (the
//! publisher, the order gateway, the admin I/O thread); the groups sit on
//! their own cache lines. Readers load `Relaxed`.

use crossbeam_utils::CachePadded;

use super::table::counter_group;

use crate::tls::TlsPortName;

counter_group! {
    /// One port's TLS counters (single writer: that port's event loop).
    /// Each is a family labelled `port` in `/metrics`.
    pub struct PortTlsCounters => PortTlsFigures {
        /// Handshakes completed.
        handshakes: Counter, Count => "tickfan_tls_handshakes_total",
            "TLS handshakes completed, by port.";
        /// Handshakes that failed: no common version or cipher, a client
        /// without a certificate (or with one the client CA did not sign)
        /// under mutual TLS, a corrupt record.
        handshake_failures: Counter, Count => "tickfan_tls_handshake_failures_total",
            "TLS handshakes failed (no common version or cipher, a missing or untrusted client certificate, a corrupt record), by port.";
        /// Connections whose first byte was not a TLS handshake record
        /// (plaintext on a TLS port): answered with the port's error line
        /// and closed.
        plaintext_refused: Counter, Count => "tickfan_tls_plaintext_refused_total",
            "Connections that spoke plaintext to a TLS port, answered with the port's error and closed, by port.";
    }
}

/// Every port's TLS counters.
#[derive(Debug, Default)]
pub struct TlsCounters {
    ports: [CachePadded<PortTlsCounters>; 3],
}

impl TlsCounters {
    /// The counters of `port`.
    pub fn port(&self, port: TlsPortName) -> &PortTlsCounters {
        &self.ports[port.index()]
    }

    /// A copy, per port in [`TlsPortName::ALL`] order.
    pub fn snapshot(&self) -> TlsSnapshot {
        TlsSnapshot {
            ports: TlsPortName::ALL.map(|p| PortTlsSnapshot {
                port: p,
                figures: self.port(p).values(),
            }),
        }
    }
}

/// One port's TLS counters at one instant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PortTlsSnapshot {
    /// The port.
    pub port: TlsPortName,
    /// Its figures (flattened: `/report` shows them beside `port`).
    #[serde(flatten)]
    pub figures: PortTlsFigures,
}

/// Every port's TLS counters at one instant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TlsSnapshot {
    /// In [`TlsPortName::ALL`] order.
    pub ports: [PortTlsSnapshot; 3],
}

impl Default for TlsSnapshot {
    fn default() -> Self {
        TlsCounters::default().snapshot()
    }
}

impl TlsSnapshot {
    /// The figures of `port`.
    pub fn port(&self, port: TlsPortName) -> &PortTlsSnapshot {
        &self.ports[port.index()]
    }
}
