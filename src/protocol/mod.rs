//! Wire codecs the engine speaks on its server side.
//!
//! [`resp`]: the Redis serialization protocol of the subscriber connections
//! (request parser, reply encoder, Redis's error texts and command table,
//! RESP2/RESP3 framing). The client side, which tools and tests use to read
//! the engine's replies, is [`crate::client`].

pub mod resp;
