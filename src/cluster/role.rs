//! A node's role on the NATS backbone and its validated backbone settings.
//!
//! - `single`: today's engine, no backbone (the default);
//! - `ingest`: feed port as `single`; its publisher also publishes every
//!   conflated update on `<prefix>.md.<symbol>` and it answers snapshot
//!   requests on `<prefix>.snap.<symbol>`;
//! - `edge`: no feed port and no order path; its slots are written from
//!   the backbone, only for what its subscribers want.

use crate::error::ConfigError;

/// What a node does on the backbone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// One node, no backbone.
    #[default]
    Single,
    /// Feeds in; conflated updates out to NATS; snapshot replies.
    Ingest,
    /// Updates in from NATS; subscribers out.
    Edge,
}

impl Role {
    /// Does this role run the order path (order port, journal, venues)?
    ///
    /// A single node and an ingest do; an edge does not. Edges are the
    /// fan-out tier, many per backbone and added for subscriber load: each
    /// taking orders would mean one journal, one dedup store and one set of
    /// venue sessions per edge, with a client's orders split across them.
    /// So an edge binds no order port, opens no journal and, writing
    /// nothing into `--data-dir`, takes no lock on it: it can share a
    /// working directory with an ingest (the one-host example in docs/src/scale-out.md).
    pub fn takes_orders(self) -> bool {
        match self {
            Role::Single | Role::Ingest => true,
            Role::Edge => false,
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Single => "single",
            Role::Ingest => "ingest",
            Role::Edge => "edge",
        }
    }
}

/// The backbone part of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterConfig {
    /// The node's role.
    pub role: Role,
    /// NATS server URLs (`nats://host:port`), tried in turn.
    pub nats: Vec<String>,
    /// First token(s) of every subject.
    pub prefix: String,
    /// A symbol silent this long is flagged stale (`--stale-after`; `None` = off).
    pub stale_after: Option<std::time::Duration>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            role: Role::Single,
            nats: Vec::new(),
            prefix: "tickfan".into(),
            stale_after: None,
        }
    }
}

impl ClusterConfig {
    /// Checks the combination of role and backbone flags.
    ///
    /// # Errors
    /// An ingest or edge without `--nats`, `--nats` on a single node, or a
    /// prefix that is not a plain NATS subject (no wildcard, no empty token).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |flag, why: &str| ConfigError::Invalid {
            flag,
            why: why.to_string(),
        };
        match (self.role, self.nats.is_empty()) {
            (Role::Single, false) => {
                return Err(invalid(
                    "--nats",
                    "needs --role ingest or --role edge (a single node has no backbone)",
                ))
            }
            (Role::Ingest | Role::Edge, true) => {
                return Err(invalid(
                    "--nats",
                    &format!(
                        "--role {} needs --nats URL[,URL…] (the NATS cluster to meet on)",
                        self.role.as_str()
                    ),
                ))
            }
            _ => {}
        }
        for u in &self.nats {
            if let Err(e) = u.trim().parse::<async_nats::ServerAddr>() {
                return Err(invalid("--nats", &format!("bad server URL {u:?}: {e}")));
            }
        }
        if self
            .stale_after
            .is_some_and(|d| d < std::time::Duration::from_millis(10))
        {
            return Err(invalid("--stale-after", "must be at least 10ms"));
        }
        let p = &self.prefix;
        let plain = !p.is_empty()
            && p.split('.').all(|t| {
                !t.is_empty()
                    && t.bytes()
                        .all(|b| b.is_ascii_graphic() && b != b'*' && b != b'>')
            });
        if !plain {
            return Err(invalid(
                "--nats-prefix",
                "must be dot-separated non-empty tokens without '*', '>' or spaces",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(role: Role, nats: &[&str], prefix: &str) -> ClusterConfig {
        ClusterConfig {
            role,
            nats: nats.iter().map(|s| s.to_string()).collect(),
            prefix: prefix.into(),
            stale_after: None,
        }
    }

    #[test]
    fn roles_and_backbone_flags_must_agree() {
        assert!(cfg(Role::Single, &[], "tickfan").validate().is_ok());
        assert!(cfg(Role::Edge, &["nats://127.0.0.1:4222"], "a.b")
            .validate()
            .is_ok());
        let e = cfg(Role::Edge, &[], "tickfan").validate().unwrap_err();
        assert!(e.to_string().contains("--role edge needs --nats"), "{e}");
        let e = cfg(Role::Ingest, &[], "tickfan").validate().unwrap_err();
        assert!(e.to_string().contains("--role ingest needs --nats"), "{e}");
        assert!(cfg(Role::Single, &["nats://x:1"], "tickfan")
            .validate()
            .is_err());
        for bad in ["", "a..b", "a.*", "md.>", "a b"] {
            assert!(
                cfg(Role::Ingest, &["nats://x:1"], bad).validate().is_err(),
                "{bad}"
            );
        }
    }
}
