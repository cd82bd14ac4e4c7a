//! Wire codecs shared by the stages, the tools and the tests.

pub mod resp;
