//! RESP, the Redis serialization protocol, as tickfan's subscribers speak it.

pub mod framing;
mod parse;

pub use parse::*;
