//! The client-side tools, subcommands of the one `tickfan` binary. They use
//! only the engine's public library API.

pub mod demo;
pub mod orders;
pub mod replay;
