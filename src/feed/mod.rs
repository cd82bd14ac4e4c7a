//! The feed path: TCP tick input, split into lines, parsed, validated and
//! written into the symbol slots. Poison lines go to the DLQ.

pub mod ingest;
pub mod lines;
pub mod parse;
