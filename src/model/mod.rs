//! The vocabulary every stage speaks, at the bottom of the crate: the tick
//! and its fixed-point decimal, the order path's units, the reasons a line
//! or an order is refused or ends, and the lanes.
//!
//! Pure data with its text forms and indexes: nothing here imports another
//! engine module (only `std` and crates), so the stages, the metrics and the
//! clients can all use it without depending on each other. A test
//! (`crate::layering`) keeps it that way.
//!
//! * [`decimal`]: [`decimal::Decimal`], an exact fixed-point number;
//! * [`tick`]: the quote as received and as stored in its slot;
//! * [`poison`]: why a feed line was dead-lettered;
//! * [`units`]: side, lots, price, amount;
//! * [`order_reasons`]: invalid, reject, done and dead reasons;
//! * [`lane`]: small or large;
//! * [`warning`]: the kinds of log line that can repeat under load.

pub mod decimal;
pub mod lane;
pub mod order_reasons;
pub mod poison;
pub mod tick;
pub mod units;
pub mod warning;
