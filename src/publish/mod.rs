//! The publish path: the publisher event loop that drains the slots, the
//! subscription registry, the subscriber sessions with their bounded buffers
//! and slow-subscriber conflation, and the payload encoding.

pub mod client_cmd;
pub mod commands;
pub mod encode;
pub mod glob;
pub mod housekeeping;
pub mod outbuf;
pub mod publisher;
pub mod routes;
pub mod session;
