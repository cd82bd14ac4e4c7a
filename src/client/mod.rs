//! What a client of tickfan needs to read its replies: the tools and the
//! tests use these codecs to talk to the engine as its clients do. The
//! engine itself never uses them.

pub mod resp;
