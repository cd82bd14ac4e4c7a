//! The feed path: TCP tick input (a handler over the [`crate::net`] kit,
//! which splits it into lines), parsed, validated and written into the
//! symbol slots. Poison lines go to the DLQ.

mod batch;
pub mod conflate;
pub(crate) mod ingest;
pub mod parse;
