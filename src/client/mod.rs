//! What a client of tickfan needs to talk to it and read its replies: the
//! tools and the tests use these codecs to speak to the engine as its
//! clients do. The engine itself never uses them.
//!
//! * [`resp`]: a blocking RESP2/RESP3 codec for the subscriber port;
//! * [`orders`]: the order protocol's client side (the line a client sends,
//!   the replies it reads);
//! * [`tls`]: a rustls client trusting a CA file, and a non-blocking client
//!   stream for mio loops (`tickfan subscribe --tls-ca`).

pub mod orders;
pub mod resp;
pub mod tls;
