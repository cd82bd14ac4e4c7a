//! RESP, the Redis serialization protocol, as tickfan's subscriber
//! connections speak it ("RESP protocol specification" on redis.io), so that
//! `redis-cli` and stock Redis client libraries work unchanged.
//!
//! This folder owns every byte that crosses that boundary. Requests arrive as
//! multibulk frames or inline lines; replies leave in RESP2, or in RESP3 after
//! `HELLO 3`. Every reply and error text was compared byte for byte with a
//! live `redis-server` 7.0.15: the captured bytes are the expected values of
//! the unit tests beside each file, and `tests/it/protocol.rs` keeps checking
//! them against a running server.
//!
//! | file          | owns |
//! |---------------|------|
//! | `parse.rs`    | the request parser ([`parse_command`]), the engine's one RESP reader: multibulk frames, [`Limits`], resynchronisation after an error; Redis's [`string2ll`] |
//! | `inline.rs`   | inline requests: the port of Redis's `sdssplitargs()` |
//! | `errors.rs`   | Redis 7.0's error texts: [`ProtocolError`](errors::ProtocolError), unknown command or subcommand, wrong arity, the subscribed-context refusal |
//! | `commands.rs` | tickfan's [`Verb`]s and Redis 7.0.15's command table (generated from `COMMAND`) |
//! | `encode.rs`   | the RESP2 reply encoder: generic types, confirmations, PING/QUIT/RESET, pub/sub message frames |
//! | [`framing`]   | per-connection RESP2/RESP3 framing: the replies whose bytes depend on the protocol version |
//!
//! A request goes `parse` (and `inline`) → the publisher's command dispatch
//! ([`classify`], then [`check_redis_command`](commands::check_redis_command) for what tickfan does not
//! execute) → a reply from `encode`, `errors` or `framing`.
//!
//! The items the rest of the engine, the benches and the fuzz targets use are
//! re-exported here (`resp::parse_command`, `resp::append_error`). [`framing`]
//! is reached by its own path: its functions take the connection's protocol
//! version and share their names with the RESP2 encoder's.

mod commands;
mod encode;
mod errors;
pub mod framing;
mod inline;
mod parse;
#[cfg(test)]
mod test_support;

pub(crate) use commands::{classify, eq_ignore_case, Verb};
#[cfg(test)]
pub(crate) use encode::append_simple_string;
pub(crate) use encode::{
    append_array_header, append_bulk, append_error, append_integer, append_null_bulk, append_ok,
    append_ping_reply, append_pmessage_prefix, append_reset_reply, append_subscription_reply,
    SubscriptionKind,
};
pub use encode::{append_message_tail, message_tail_len, RespBuf, MESSAGE_PREFIX};
#[cfg(test)]
pub(crate) use errors::ProtocolError;
pub(crate) use errors::{
    append_subscribed_context_rejection, append_unknown_command, append_unknown_subcommand,
    append_wrong_arity,
};
pub(crate) use parse::string2ll;
pub use parse::{parse_command, Limits, Parsed};
