//! `tickfan_warnings_total{kind}` in `/metrics`: every occurrence of a
//! repeating warning, by kind, whether or not its log line was written
//! (`crate::logging::repeat` writes at most one line per kind per 10 s).
//! Every kind is listed, zeros included, so a rule can `rate()` one before
//! it first happens.

use super::exposition::Exposition;
use crate::model::warning::WarnKind;

/// The family's name.
pub(crate) const NAME: &str = "tickfan_warnings_total";

/// Appends the family from `totals` (by [`WarnKind::index`]).
pub(crate) fn render(o: &mut Exposition, totals: &[u64; WarnKind::COUNT]) {
    o.head(
        NAME,
        "counter",
        "Repeating warnings by kind, each counted whether or not its log line was written (a kind writes at most one line per 10 s).",
    );
    for k in WarnKind::ALL {
        o.labelled(NAME, &[("kind", k.as_str())], totals[k.index()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_a_sample_of_one_counter_family() {
        let mut totals = [0; WarnKind::COUNT];
        totals[WarnKind::NatsEventsDropped.index()] = 1000;
        let mut o = Exposition::default();
        render(&mut o, &totals);
        let text = o.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# HELP tickfan_warnings_total Repeating warnings by kind, each counted whether or not its log line was written (a kind writes at most one line per 10 s).");
        assert_eq!(lines[1], "# TYPE tickfan_warnings_total counter");
        assert_eq!(lines.len(), 2 + WarnKind::COUNT);
        assert!(lines.contains(&"tickfan_warnings_total{kind=\"nats_events_dropped\"} 1000"));
        assert!(lines.contains(&"tickfan_warnings_total{kind=\"auth_refused\"} 0"));
    }
}
