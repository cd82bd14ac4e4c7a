//! The only code that touches the operating system directly: thread pinning,
//! clocks, signals, reserving file space (`fallocate`), the data directory's
//! lock (`flock`), the process's own
//! figures (`/proc/self`) and the
//! thread watch (heartbeats, deaths), the
//! non-blocking socket idioms (`accept_one`, `poll_events`) the connection
//! kit, the admin endpoint and the tools share. Everything above it is
//! portable Rust.

pub mod affinity;
pub mod clock;
pub mod dir_lock;
pub(crate) mod fs;
pub mod net;
pub(crate) mod process;
pub mod signals;
pub mod tcp_signals;
pub mod watch;
