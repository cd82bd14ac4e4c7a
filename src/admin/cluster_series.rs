//! The NATS backbone's families in `/metrics` (`tickfan_cluster_*` and
//! `tickfan_symbols_stale`), rendered from [`ClusterSnapshot`] by the
//! group's counter table ([`ClusterCounters::TABLE`]). Every role
//! shows them (zeros on a single node), so dashboards and the rules in
//! `deploy/` need no role switch.

use super::exposition::Exposition;
use crate::metrics::cluster_counters::{ClusterCounters, ClusterSnapshot};

/// Appends the backbone's families: the table's, then the drops by reason.
pub(crate) fn render(o: &mut Exposition, c: &ClusterSnapshot) {
    o.table(ClusterCounters::TABLE, c);
    o.head(
        "tickfan_cluster_dropped_total",
        "counter",
        "Backbone input dropped before the slots, by reason.",
    );
    for (reason, n) in &c.dropped {
        o.labelled("tickfan_cluster_dropped_total", &[("reason", reason)], n);
    }
}
