//! Wire codecs shared by the stages, the tools and the tests.

pub mod client;
pub mod resp;
pub mod resp3;
