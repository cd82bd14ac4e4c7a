//! Gauges of other threads' state that the gateway publishes on its loop
//! turn. The floor owns the trait; the state's owner implements it (the
//! venue side's `BridgeCalls`), so the gateway imports no sibling folder.

use std::fmt::Debug;

use crate::metrics::order_counters::OrderCounters;
use crate::retry::Clock;

/// Bridge calls in progress, as gauges (`bridge_calls_in_progress`,
/// `bridge_call_oldest_age_us`). Written by the workers, read here by the
/// gateway thread.
pub(crate) trait CallGauges: Debug + Send + Sync {
    /// Sets the gauges in `o` from the calls in progress at `clock`'s now.
    fn publish_gauges(&self, o: &OrderCounters, clock: &dyn Clock);
}
