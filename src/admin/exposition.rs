//! A writer of the Prometheus text exposition format (version 0.0.4): one
//! `# HELP` and one `# TYPE` line per metric family, then its samples.
//!
//! The format is line-based; label values are escaped (`\\`, `\"`, `\n`)
//! as the format requires, so no value can break a line.

use std::fmt::{Display, Write};

use crate::metrics::table::Desc;

/// The text of one scrape, built family by family.
#[derive(Debug, Default)]
pub struct Exposition(String);

impl Exposition {
    /// An empty scrape with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Exposition(String::with_capacity(capacity))
    }

    /// The `# HELP` and `# TYPE` lines of a family; its samples follow.
    pub fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// A family of one unlabelled sample.
    pub fn one(&mut self, name: &str, kind: &str, help: &str, v: impl Display) {
        self.head(name, kind, help);
        let _ = writeln!(self.0, "{name} {v}");
    }

    /// One labelled sample (after its family's [`Exposition::head`]).
    pub fn labelled(&mut self, name: &str, labels: &[(&str, &str)], v: impl Display) {
        let _ = write!(self.0, "{name}{{");
        for (i, (k, val)) in labels.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(self.0, "{sep}{k}=\"{}\"", escape(val));
        }
        let _ = writeln!(self.0, "}} {v}");
    }

    /// One family of one sample for each figure of `table` that `/metrics`
    /// shows, read from the group's snapshot `s`, in table order.
    pub fn table<S>(&mut self, table: &[Desc<S>], s: &S) {
        for d in table {
            if let Some(f) = d.family {
                self.one(f.name, d.kind.as_str(), f.help, d.exposed(s));
            }
        }
    }

    /// For each figure of `table` that `/metrics` shows, one family with a
    /// sample per item, labelled `label` with the item's name.
    pub fn table_by<S>(&mut self, table: &[Desc<S>], label: &str, items: &[(&str, &S)]) {
        for d in table {
            let Some(f) = d.family else { continue };
            self.head(f.name, d.kind.as_str(), f.help);
            for (name, s) in items {
                self.labelled(f.name, &[(label, name)], d.exposed(s));
            }
        }
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.0
    }
}

/// Escapes a label value.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_escaped_labels() {
        let mut e = Exposition::default();
        e.one("a_total", "counter", "As.", 3);
        e.head("b", "gauge", "Bs.");
        e.labelled("b", &[("k", "x\"y\\z\nw"), ("j", "2")], 1.5);
        assert_eq!(
            e.finish(),
            "# HELP a_total As.\n# TYPE a_total counter\na_total 3\n\
             # HELP b Bs.\n# TYPE b gauge\nb{k=\"x\\\"y\\\\z\\nw\",j=\"2\"} 1.5\n"
        );
    }
}
