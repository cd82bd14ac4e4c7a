//! The counter table: each counter and gauge declared once, with its kind,
//! its unit, and (when `/metrics` shows it) its Prometheus name and help.
//!
//! The pattern is Agrona's `CountersManager`: a fixed registry of
//! descriptors, and what reads every counter (the snapshot, `/report`'s
//! JSON, the Prometheus rendering) walks the registry instead of naming
//! each counter again; the snapshots ([`super::CountersSnapshot`],
//! [`super::order_counters::OrderSnapshot`]) hold the groups' snapshots as
//! they are, with only labelled and derived figures beside them. [`counter_group!`] turns ONE list of entries into
//!
//! * the group's struct of `AtomicU64`s (the writers' access paths, e.g.
//!   `counters.cluster.applied`, are the field names of the list),
//! * its snapshot struct (same field names, `u64`, `serde::Serialize`) and
//!   the `values()` copy that fills it,
//! * `TABLE`, a `const` slice of [`Desc`], one per entry, in list order,
//!   which `admin::prometheus` renders (`# HELP`, `# TYPE`, the sample).
//!
//! Groups on the table: feed, publisher, dead letters ([`super::counters`]), order
//! gateway, retry timer, fill thread ([`super::order_counters`]), NATS
//! backbone ([`super::cluster_counters`]), TLS per port
//! ([`super::tls_counters`]). Off the table: the order lanes' capacity
//! view ([`super::capacity_counters`]), per-lane estimates in seconds
//! (`f64`), not counters.
//!
//! # Adding a counter
//!
//! 1. One entry in its group's list:
//!    `field: Counter, Count => "tickfan_…_total", "Help.";`
//!    (without `=> …` for a figure the reports show but `/metrics` does
//!    not). `Gauge` for a level; `Bytes`, `Micros` (shown in seconds) or
//!    `Flag` for the unit.
//! 2. The code that writes it (`bump(&counters.group.field, 1)`).
//!
//! That is all: its atomic, its snapshot field (and so `/report`'s JSON,
//! `counters.<group>.<field>`, and what the reports and alerts read) and
//! its `/metrics` family follow from the entry; the test
//! `every_table_figure_is_one_family_with_its_own_value` in
//! `admin::prometheus` checks the family. Beyond that:
//!
//! * A figure with labels (by reason, by lane, by retry number) is an
//!   array in the group's `extra` or `copied` section and keeps a small
//!   renderer of its own in `admin::prometheus`.
//! * A line of the human-readable reports (interval line, final report)
//!   names the figures it prints: those lines are prose, not tables.

/// What a figure is, in Prometheus's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (until a restart); its name ends in `_total`.
    Counter,
    /// Goes up and down: a level now.
    Gauge,
}

impl Kind {
    /// The word on the `# TYPE` line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// The unit a figure is stored in, and so how `/metrics` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A number of things; shown as stored.
    Count,
    /// Bytes; shown as stored (the family's name ends in `_bytes`).
    Bytes,
    /// Microseconds; shown in seconds (the family's name ends in `_seconds`).
    Micros,
    /// 1 or 0; shown as stored.
    Flag,
}

/// How `/metrics` shows one figure: its family's name and help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The family's name (`tickfan_` prefix; `_total` on counters only).
    pub name: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
}

/// One figure of a group, read from the group's snapshot `S`.
#[derive(Debug, Clone, Copy)]
pub struct Desc<S> {
    /// The field's name in the group (atomics and snapshot alike).
    pub field: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// What the stored value counts.
    pub unit: Unit,
    /// Its `/metrics` family; `None`: reports only.
    pub family: Option<Family>,
    /// Reads the figure from a snapshot of the group.
    pub get: fn(&S) -> u64,
}

impl<S> Desc<S> {
    /// The figure in `s`, in the unit `/metrics` shows it in.
    pub fn exposed(&self, s: &S) -> Exposed {
        let v = (self.get)(s);
        match self.unit {
            Unit::Micros => Exposed::Float(v as f64 / 1e6),
            Unit::Count | Unit::Bytes | Unit::Flag => Exposed::Int(v),
        }
    }
}

/// A value as `/metrics` prints it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Exposed {
    /// Printed as an integer.
    Int(u64),
    /// Printed as a float (seconds from microseconds).
    Float(f64),
}

impl std::fmt::Display for Exposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exposed::Int(v) => v.fmt(f),
            Exposed::Float(v) => v.fmt(f),
        }
    }
}

/// Declares a group of counters and gauges from one list (see the module
/// doc). Fields, `TABLE` and `values` have the group's visibility; the group derives `Debug` and `Default`, the
/// snapshot `Debug, Clone, Default, PartialEq, Eq, serde::Serialize`. The
/// `extra` fields (labelled arrays) follow the plain ones in the group
/// only; the `copied` ones also in the snapshot, copied by the function
/// after `=`.
///
/// ```ignore
/// counter_group! {
///     /// Written by the X thread.
///     pub struct XCounters => XSnapshot {
///         /// Things done.
///         done: Counter, Count => "tickfan_x_done_total", "Things done.";
///         /// Gauge: things waiting (reports only).
///         waiting: Gauge, Count;
///     }
///     extra {
///         /// By reason (rendered by hand; not in the snapshot).
///         by_reason: [AtomicU64; 3],
///     }
///     copied {
///         /// By lane, copied into the snapshot by the function after `=`.
///         by_lane: [AtomicU64; 2] => Vec<u64> = |g: &XCounters| lanes(&g.by_lane),
///     }
/// }
/// ```
macro_rules! counter_group {
    (
        $(#[$meta:meta])*
        $vis:vis struct $Group:ident => $Snap:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $kind:ident, $unit:ident $(=> $name:literal, $help:literal)?;
            )*
        }
        $(extra {
            $(
                $(#[$xmeta:meta])*
                $xfield:ident : $xty:ty,
            )*
        })?
        $(copied {
            $(
                $(#[$cmeta:meta])*
                $cfield:ident : $cty:ty => $sty:ty = $init:expr,
            )*
        })?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $Group {
            $(
                $(#[$fmeta])*
                $vis $field: ::std::sync::atomic::AtomicU64,
            )*
            $($(
                $(#[$xmeta])*
                $vis $xfield: $xty,
            )*)?
            $($(
                $(#[$cmeta])*
                $vis $cfield: $cty,
            )*)?
        }

        #[doc = concat!("A copy of the plain figures of [`", stringify!($Group), "`] (same names).")]
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
        $vis struct $Snap {
            $(
                $(#[$fmeta])*
                $vis $field: u64,
            )*
            $($(
                $(#[$cmeta])*
                $vis $cfield: $sty,
            )*)?
        }

        impl $Group {
            /// One descriptor per plain figure, in declaration order.
            $vis const TABLE: &'static [$crate::metrics::table::Desc<$Snap>] = &[
                $(
                    $crate::metrics::table::Desc {
                        field: stringify!($field),
                        kind: $crate::metrics::table::Kind::$kind,
                        unit: $crate::metrics::table::Unit::$unit,
                        family: counter_group!(@family $($name, $help)?),
                        get: |s: &$Snap| s.$field,
                    },
                )*
            ];

            /// Stores `next`, `next + 1`, … into every field, plain and
            /// labelled, in declaration order (tests: each figure tells
            /// where it went).
            #[cfg(test)]
            pub(crate) fn fill_distinct(&self, next: &mut u64) {
                let mut put = |a: &::std::sync::atomic::AtomicU64| {
                    a.store(*next, ::std::sync::atomic::Ordering::Relaxed);
                    *next += 1;
                };
                $( put(&self.$field); )*
                $($( self.$xfield.iter().for_each(&mut put); )*)?
                $($( self.$cfield.iter().for_each(&mut put); )*)?
            }

            /// Copies the plain figures and the `copied` ones (`Relaxed`
            /// loads: statistics only).
            $vis fn values(&self) -> $Snap {
                $Snap {
                    $(
                        $field: self.$field.load(::std::sync::atomic::Ordering::Relaxed),
                    )*
                    $($(
                        $cfield: ($init)(self),
                    )*)?
                }
            }
        }
    };
    (@family) => { None };
    (@family $name:literal, $help:literal) => {
        Some($crate::metrics::table::Family { name: $name, help: $help })
    };
}

pub(crate) use counter_group;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    counter_group! {
        /// A test group.
        pub(super) struct TestCounters => TestSnapshot {
            /// Done.
            done: Counter, Count => "tickfan_test_done_total", "Things done.";
            /// Waiting, µs.
            age_us: Gauge, Micros => "tickfan_test_age_seconds", "Age.";
            /// Reports only.
            quiet: Counter, Count;
        }
        extra {
            /// By reason.
            by_reason: [AtomicU64; 2],
        }
        copied {
            /// By lane, copied.
            by_lane: [AtomicU64; 2] => [u64; 2] = |g: &TestCounters| {
                [0, 1].map(|i| g.by_lane[i].load(Ordering::Relaxed))
            },
        }
    }

    #[test]
    fn one_list_gives_atomics_snapshot_and_table() {
        let c = TestCounters::default();
        c.done.store(3, Ordering::Relaxed);
        c.age_us.store(1_500_000, Ordering::Relaxed);
        c.by_reason[1].store(9, Ordering::Relaxed);
        c.by_lane[1].store(4, Ordering::Relaxed);
        let s = c.values();
        assert_eq!((s.done, s.age_us, s.quiet), (3, 1_500_000, 0));
        assert_eq!(s.by_lane, [0, 4]);
        let fields: Vec<&str> = TestCounters::TABLE.iter().map(|d| d.field).collect();
        assert_eq!(fields, ["done", "age_us", "quiet"]);
        let t = TestCounters::TABLE;
        assert_eq!(t[0].exposed(&s).to_string(), "3");
        assert_eq!(t[1].exposed(&s).to_string(), "1.5");
        assert_eq!(t[1].kind.as_str(), "gauge");
        assert_eq!(t[2].family, None);
        let mut n = 10;
        c.fill_distinct(&mut n);
        let s = c.values();
        assert_eq!(
            (s.done, s.age_us, s.quiet, s.by_lane),
            (10, 11, 12, [15, 16])
        );
        assert_eq!(c.by_reason[1].load(Ordering::Relaxed), 14);
    }
}
