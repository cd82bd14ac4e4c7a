//! TLS of the serving ports: which ports speak it, and the rustls server
//! configuration built once from the PEM files the flags name (`--tls-cert`,
//! `--tls-key`, `--tls-client-ca`, `--tls-ports`).
//!
//! Loaded and checked once, while the flags become a [`crate::config::Config`]:
//! an unreadable file, a file with no certificate or no key, a key that does
//! not match the certificate or a client CA that is not a certificate is one
//! [`TlsError`] line (exit 2); nothing is read again while the engine runs.
//! The connection side (one stream type for plaintext and TLS, the plaintext
//! refusal) is the connection kit's: `net/stream.rs`.
//!
//! The crypto provider is rustls' `ring` (it builds with a C compiler only;
//! `aws-lc-rs` wants cmake): TLS 1.3 and 1.2, rustls' safe defaults.
//! With a client CA the server asks every client for a certificate signed by
//! it and refuses a client without one (mutual TLS).
//!
//! Which ports: the subscriber, order and admin ports. The feed port stays
//! plaintext: feeds are the engine's own upstream on a trusted segment,
//! and the feed is the one hot path that reads every tick (see
//! `docs/src/tls.md`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A port that can speak TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TlsPortName {
    /// The subscriber port (RESP).
    Subscribers,
    /// The order port (text lines).
    Orders,
    /// The admin endpoint (HTTP, then HTTPS).
    Admin,
}

impl TlsPortName {
    /// Every port that can speak TLS, in counter-index order.
    pub const ALL: [TlsPortName; 3] = [
        TlsPortName::Subscribers,
        TlsPortName::Orders,
        TlsPortName::Admin,
    ];

    /// The name in flags, labels and the banner.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsPortName::Subscribers => "subscribers",
            TlsPortName::Orders => "orders",
            TlsPortName::Admin => "admin",
        }
    }

    /// Index into per-port arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why the TLS files were refused. Each names the file; [`TlsError::flag`]
/// is the flag to fix (the operator reads `{flag}: {error}`).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read (missing, no permission). Fix the path.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file holds no PEM block of the kind the flag needs (a
    /// `CERTIFICATE`, or a `PRIVATE KEY` / `RSA PRIVATE KEY` / `EC PRIVATE KEY`),
    /// or one that does not decode.
    #[error("{path} holds no {what} in PEM form{detail}")]
    NoPem {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: String,
        /// What was looked for.
        what: &'static str,
        /// The PEM decoder's words, if it had any (`: …`).
        detail: String,
    },
    /// The key, the certificate or the client CA was refused by rustls: a
    /// key that is not the certificate's (`--tls-key` for another
    /// `--tls-cert`), an unsupported key type, or a CA that is not one.
    #[error("{why}")]
    Refused {
        /// The flag to fix.
        flag: &'static str,
        /// rustls' words.
        why: String,
    },
}

impl TlsError {
    /// The flag that named the file at fault.
    pub fn flag(&self) -> &'static str {
        match self {
            TlsError::Read { flag, .. }
            | TlsError::NoPem { flag, .. }
            | TlsError::Refused { flag, .. } => flag,
        }
    }
}

/// The TLS settings of `serve`: the files, the ports, and the server
/// configuration built from them.
#[derive(Clone, serde::Serialize)]
pub struct TlsConfig {
    /// `--tls-cert`: the server's certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// `--tls-key`: the certificate's private key (PEM).
    pub key: PathBuf,
    /// `--tls-client-ca`: clients must present a certificate signed by one of these (PEM).
    pub client_ca: Option<PathBuf>,
    /// `--tls-ports`: the ports that speak TLS (the others stay plaintext).
    pub ports: Vec<TlsPortName>,
    /// Built once from the files; shared by every TLS connection.
    #[serde(skip)]
    server: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("client_ca", &self.client_ca)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Reads and checks the files and builds the server configuration;
    /// `ports` empty means all three.
    ///
    /// # Errors
    /// The first file that cannot be read or does not hold what its flag
    /// needs, or a key that does not match the certificate ([`TlsError`]).
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        ports: &[TlsPortName],
    ) -> Result<TlsConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certs("--tls-cert", cert)?;
        let key_der = read_key(key)?;
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Refused {
                flag: "--tls-cert",
                why: e.to_string(),
            })?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in read_certs("--tls-client-ca", ca)? {
                    roots.add(c).map_err(|e| TlsError::Refused {
                        flag: "--tls-client-ca",
                        why: format!("{}: {e}", ca.display()),
                    })?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                )
                .build()
                .map_err(|e| TlsError::Refused {
                    flag: "--tls-client-ca",
                    why: format!("{}: {e}", ca.display()),
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server =
            builder
                .with_single_cert(chain, key_der)
                .map_err(|e| TlsError::Refused {
                    flag: "--tls-key",
                    why: match e {
                        rustls::Error::InconsistentKeys(_) => format!(
                            "the key in {} does not match the certificate in {}",
                            key.display(),
                            cert.display()
                        ),
                        other => format!("{} with {}: {other}", key.display(), cert.display()),
                    },
                })?;
        // HTTP/1.1 for the admin endpoint's clients that ask (curl does);
        // RESP and order clients send no ALPN.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut ports = ports.to_vec();
        if ports.is_empty() {
            ports = TlsPortName::ALL.to_vec();
        }
        ports.sort_by_key(|p| p.index());
        ports.dedup();
        Ok(TlsConfig {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: client_ca.map(Path::to_path_buf),
            ports,
            server: Arc::new(server),
        })
    }

    /// The server configuration when `port` speaks TLS.
    pub fn for_port(&self, port: TlsPortName) -> Option<Arc<ServerConfig>> {
        self.ports.contains(&port).then(|| Arc::clone(&self.server))
    }

    /// Whether clients must present a certificate.
    pub fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }
}

/// Reads every certificate of a PEM file (at least one).
fn read_certs(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(flag, path)?;
    let no_pem = |detail: String| TlsError::NoPem {
        flag,
        path: path.display().to_string(),
        what: "certificate",
        detail,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| no_pem(format!(": {e}")))?;
    if certs.is_empty() {
        return Err(no_pem(String::new()));
    }
    Ok(certs)
}

/// Reads the first private key of a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read("--tls-key", path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::NoPem {
        flag: "--tls-key",
        path: path.display().to_string(),
        what: "private key",
        detail: match e {
            rustls_pki_types::pem::Error::NoItemsFound => String::new(),
            other => format!(": {other}"),
        },
    })
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        flag,
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `localhost` and its key, as PEM.
    fn self_signed() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn loads_a_matching_pair_for_every_port_by_default() {
        let d = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let c = write(d.path(), "c.pem", &cert);
        let k = write(d.path(), "k.pem", &key);
        let t = TlsConfig::load(&c, &k, None, &[]).unwrap();
        assert_eq!(t.ports, TlsPortName::ALL.to_vec());
        assert!(t.for_port(TlsPortName::Admin).is_some() && !t.mutual());
        let t = TlsConfig::load(
            &c,
            &k,
            Some(&c),
            &[TlsPortName::Orders, TlsPortName::Orders],
        )
        .unwrap();
        assert_eq!(t.ports, vec![TlsPortName::Orders]);
        assert!(t.for_port(TlsPortName::Subscribers).is_none() && t.mutual());
    }

    #[test]
    fn refuses_with_one_line_naming_the_flag_and_the_file() {
        let d = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed();
        let (_, other_key) = self_signed();
        let c = write(d.path(), "c.pem", &cert);
        let k = write(d.path(), "k.pem", &key);
        let other = write(d.path(), "other.pem", &other_key);
        let junk = write(d.path(), "junk.pem", "not pem\n");
        let missing = d.path().join("missing.pem");
        let err = |c: &Path, k: &Path, ca: Option<&Path>| {
            let e = TlsConfig::load(c, k, ca, &[]).unwrap_err();
            format!("{}: {e}", e.flag())
        };
        let e = err(&c, &missing, None);
        assert!(
            e.starts_with("--tls-key: cannot read") && e.contains("missing.pem"),
            "{e}"
        );
        let e = err(&junk, &k, None);
        assert!(
            e.starts_with("--tls-cert:") && e.contains("no certificate"),
            "{e}"
        );
        let e = err(&c, &junk, None);
        assert!(
            e.starts_with("--tls-key:") && e.contains("no private key"),
            "{e}"
        );
        let e = err(&c, &other, None);
        assert!(e.contains("does not match the certificate"), "{e}");
        let e = err(&c, &k, Some(&junk));
        assert!(e.starts_with("--tls-client-ca:"), "{e}");
        for e in [err(&c, &other, None), err(&junk, &k, None)] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
