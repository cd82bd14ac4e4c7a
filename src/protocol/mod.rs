//! Wire codecs the engine speaks on its server side.
//!
//! [`resp`]: the Redis serialization protocol of the subscriber connections
//! (request parser, reply encoder, Redis's error texts and command table,
//! RESP2/RESP3 framing). The client side, which tools and tests use to read
//! the engine's replies, is [`crate::client`].
//!
//! [`glob`]: Redis's pattern matcher (`PSUBSCRIBE`), which the publisher's
//! routes and an edge's interest board both use. [`encode`]: the message
//! payload of one update, encoded once and shared by every subscriber and
//! by the backbone's update messages.
//!
//! Pure byte codecs: this folder imports only the vocabulary ([`crate::model`]).

pub mod encode;
pub mod glob;
pub mod resp;
