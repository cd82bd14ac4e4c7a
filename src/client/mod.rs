//! What a client of tickfan needs to read its replies: the order protocol's
//! client side ([`orders`]), used by the tools and the tests.

pub mod orders;
