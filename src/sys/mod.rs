//! The only code that touches the operating system directly: thread pinning,
//! clocks and signals. Everything above it is portable Rust.

pub mod affinity;
pub mod clock;
pub mod net;
pub mod signals;
