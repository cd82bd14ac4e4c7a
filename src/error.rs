//! Typed errors of the engine, one enum per operation. The binary turns each
//! into one line for the operator and an exit code.

use std::net::SocketAddr;

/// How a command of the binary failed, and so which exit code it gets: the
/// one line the operator reads (`tickfan: <line>`). `serve` and every tool
/// end in this, so exit codes mean the same everywhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The operator asked for something invalid (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Something failed while running (exit 1).
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    /// The process exit code: 2 for a usage error, 1 for a runtime failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}

/// A configuration value is invalid. Fix the named flag.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A number outside its allowed range.
    #[error("{flag} must be between {lo} and {hi}, got {value}")]
    OutOfRange {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: u64,
        /// Smallest allowed.
        lo: u64,
        /// Largest allowed.
        hi: u64,
    },
    /// A value that does not make sense.
    #[error("{flag}: {why}")]
    Invalid {
        /// The flag.
        flag: &'static str,
        /// Why it is refused.
        why: String,
    },
}

impl ConfigError {
    /// `Ok` when `lo <= value <= hi`, else [`ConfigError::OutOfRange`] naming `flag`.
    ///
    /// # Errors
    /// The value is outside the range.
    pub fn check_range(
        flag: &'static str,
        value: u64,
        lo: u64,
        hi: u64,
    ) -> Result<(), ConfigError> {
        if value < lo || value > hi {
            Err(ConfigError::OutOfRange {
                flag,
                value,
                lo,
                hi,
            })
        } else {
            Ok(())
        }
    }
}

/// The engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A listener could not bind (address in use, not local, no permission).
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The data directory is held by another engine, or cannot be locked
    /// (see [`crate::sys::dir_lock`]). A held directory is the operator's
    /// to fix (another `--data-dir`): the binary exits 2 for it.
    #[error(transparent)]
    DataDir(#[from] crate::sys::dir_lock::DirLockError),
    /// The dead-letter file cannot be opened.
    #[error("cannot open dead-letter file {path}: {source}")]
    DlqFile {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The histogram log in `--log-dir` cannot be created.
    #[error(transparent)]
    HistogramLog(#[from] crate::metrics::hlog::HistogramLogError),
    /// A thread, poller or waker could not be created.
    #[error("cannot start {what}: {source}")]
    Os {
        /// What failed.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}
