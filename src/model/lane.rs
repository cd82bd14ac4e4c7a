//! Lanes: the two ways through the order path, small and large, named once
//! for the workers, the queues and the per-lane metrics.
//!
//! The routing by size and the chunking of large orders stay with the lanes'
//! workers (`crate::order::lanes`); this is only the name of a lane.

/// Which lane an order travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// At most the threshold: executed whole.
    Small,
    /// Above the threshold: split into chunks.
    Large,
}

impl Lane {
    /// Both lanes, in index order.
    pub const ALL: [Lane; 2] = [Lane::Small, Lane::Large];

    /// Index into per-lane arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable name (reports, labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            Lane::Small => "small",
            Lane::Large => "large",
        }
    }
}
