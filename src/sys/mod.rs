//! The only code that touches the operating system directly: thread pinning,
//! clocks, signals and the process's own figures (`/proc/self`). Everything above it is portable Rust.

pub(crate) mod affinity;
pub mod clock;
pub mod net;
pub(crate) mod process;
pub mod signals;
