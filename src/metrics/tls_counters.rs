//! Counters of TLS on the subscriber, order and admin ports
//! ([`crate::tls`]): handshakes completed and failed, and peers that spoke
//! plaintext to a TLS port (refused with the port's error line).
//!
//! Writers: each port's own event-loop thread writes its port's group (the
//! publisher, the order gateway, the admin I/O thread); the groups sit on
//! their own cache lines. Readers load `Relaxed`.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::tls::TlsPortName;

/// One port's TLS counters (single writer: that port's event loop).
#[derive(Debug, Default)]
pub struct PortTlsCounters {
    /// Handshakes completed.
    pub handshakes: AtomicU64,
    /// Handshakes that failed: no common version or cipher, a client
    /// without a certificate (or with one the client CA did not sign)
    /// under mutual TLS, a corrupt record.
    pub handshake_failures: AtomicU64,
    /// Connections whose first byte was not a TLS handshake record
    /// (plaintext on a TLS port): answered with the port's error line
    /// and closed.
    pub plaintext_refused: AtomicU64,
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
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TlsSnapshot {
            ports: TlsPortName::ALL.map(|p| {
                let c = self.port(p);
                PortTlsSnapshot {
                    port: p,
                    handshakes: get(&c.handshakes),
                    handshake_failures: get(&c.handshake_failures),
                    plaintext_refused: get(&c.plaintext_refused),
                }
            }),
        }
    }
}

/// One port's TLS counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PortTlsSnapshot {
    /// The port.
    pub port: TlsPortName,
    /// Handshakes completed.
    pub handshakes: u64,
    /// Handshakes failed.
    pub handshake_failures: u64,
    /// Plaintext connections refused.
    pub plaintext_refused: u64,
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
