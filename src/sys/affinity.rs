//! Thread-to-core pinning that degrades gracefully.
//!
//! On a dedicated host each hot thread gets its own core. On a small host
//! (this project's CI has 2 cores) a requested core may not exist: the thread
//! then runs unpinned and the engine says so once, instead of failing.
//! `--pin auto` picks cores only on a host with enough of them
//! ([`auto_layout`]).

/// Which core each hot thread is pinned to (none = unpinned): what
/// `--pin` asks for, resolved at start by [`resolve`]. Lives beside the
/// code that applies it, so the OS layer imports no config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PinPlan {
    /// Core of the feed thread.
    pub feed: Option<usize>,
    /// Core of the publisher thread.
    pub publish: Option<usize>,
    /// `--pin auto`: the engine chooses at start (see
    /// [`auto_layout`]); `feed` and `publish` are then unset.
    pub auto: bool,
}

/// What happened when a thread asked for a core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PinOutcome {
    /// No core was requested for this thread.
    NotRequested,
    /// The thread now runs on the requested core only.
    Pinned(usize),
    /// The core does not exist or the OS refused; the thread runs unpinned.
    Unpinned {
        /// The core that was asked for.
        requested: usize,
        /// Cores the OS reports as usable.
        available: usize,
    },
}

/// The fewest usable cores for `--pin auto` to pin: the feed and the
/// publisher each get one, and at least two stay for everything else (the
/// order path, the reporter, the kernel's network work, the OS).
pub(crate) const AUTO_MIN_CORES: usize = 4;

/// `--pin auto`'s layout on a host whose usable cores are `cores`: the
/// feed on the second-to-last, the publisher on the last (core 0, where
/// the OS and most interrupts land by default, stays unpinned), or `None`
/// with fewer than [`AUTO_MIN_CORES`] (pinning two busy threads on a small
/// host would take cores the rest of the engine needs).
pub(crate) fn auto_layout(cores: &[usize]) -> Option<(usize, usize)> {
    let mut sorted = cores.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    match sorted[..] {
        [.., feed, publish] if sorted.len() >= AUTO_MIN_CORES => Some((feed, publish)),
        _ => None,
    }
}

/// Resolves `--pin auto` on this host, logging the choice in one line;
/// an explicit plan is returned as given.
pub(crate) fn resolve(plan: PinPlan) -> PinPlan {
    if !plan.auto {
        return plan;
    }
    let cores = usable_core_ids();
    match auto_layout(&cores) {
        Some((feed, publish)) => {
            log::info!(
                "pin auto: feed on core {feed}, publish on core {publish} ({} usable cores; the others unpinned)",
                cores.len()
            );
            PinPlan {
                feed: Some(feed),
                publish: Some(publish),
                auto: true,
            }
        }
        None => {
            log::info!(
                "pin auto: {} usable cores (fewer than {AUTO_MIN_CORES}): feed and publish run unpinned",
                cores.len()
            );
            plan
        }
    }
}

/// Pins the calling thread to `core` if given and possible.
pub(crate) fn pin_current_thread(core: Option<usize>) -> PinOutcome {
    let Some(requested) = core else {
        return PinOutcome::NotRequested;
    };
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    match ids.iter().find(|c| c.id == requested) {
        Some(id) if core_affinity::set_for_current(*id) => PinOutcome::Pinned(requested),
        _ => PinOutcome::Unpinned {
            requested,
            available: ids.len(),
        },
    }
}

/// Pins the calling thread and logs the outcome in one line.
pub(crate) fn pin_and_log(thread: &str, core: Option<usize>) -> PinOutcome {
    let outcome = pin_current_thread(core);
    match &outcome {
        PinOutcome::NotRequested => {}
        PinOutcome::Pinned(c) => log::info!("{thread} thread pinned to core {c}"),
        PinOutcome::Unpinned {
            requested,
            available,
        } => log::warn!(
            "{thread} thread: core {requested} not available ({available} usable cores); running unpinned"
        ),
    }
    outcome
}

/// Where the feed's loop runs (`--feed-thread`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedThread {
    /// `shared` when the engine may use one core only, else `own`.
    #[default]
    Auto,
    /// A thread of its own, woken by the network, waking the publisher.
    Own,
    /// Turns inside the publisher's thread (`net::GuestLoop`): no wake-up
    /// between the two, as one core would have to switch between them.
    Shared,
}

impl FeedThread {
    /// Whether the feed runs in the publisher's thread, on a host where the
    /// engine may use `usable_cores` cores with the pinning `pin`: `auto`
    /// shares with one usable core and no thread pinned.
    pub(crate) fn shares_publisher(self, usable_cores: usize, pin: PinPlan) -> bool {
        match self {
            FeedThread::Own => false,
            FeedThread::Shared => true,
            FeedThread::Auto => usable_cores <= 1 && pin.feed.is_none() && pin.publish.is_none(),
        }
    }
}

/// The cores this process may run on (its affinity mask).
fn usable_core_ids() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect()
}

/// How many cores this process may run on (its affinity mask), at least 1.
pub(crate) fn usable_cores() -> usize {
    usable_core_ids().len().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_pins_the_last_two_cores_from_four_and_nothing_below() {
        assert_eq!(auto_layout(&[0, 1, 2, 3]), Some((2, 3)));
        assert_eq!(auto_layout(&[3, 1, 0, 2, 5, 4, 7, 6]), Some((6, 7)));
        // A cpuset with gaps: the highest two usable.
        assert_eq!(auto_layout(&[0, 2, 4, 9]), Some((4, 9)));
        assert_eq!(auto_layout(&[0, 1, 2]), None);
        assert_eq!(auto_layout(&[0, 1]), None);
        assert_eq!(auto_layout(&[]), None);
        assert_eq!(auto_layout(&[1, 1, 1, 1]), None, "duplicates are one core");
        // An explicit plan is not touched.
        let explicit = PinPlan {
            feed: Some(7),
            ..PinPlan::default()
        };
        assert_eq!(resolve(explicit), explicit);
    }

    #[test]
    fn missing_core_degrades_to_unpinned() {
        let out = std::thread::spawn(|| pin_current_thread(Some(100_000)))
            .join()
            .unwrap();
        assert!(matches!(
            out,
            PinOutcome::Unpinned {
                requested: 100_000,
                ..
            }
        ));
    }

    #[test]
    fn existing_core_pins() {
        let out = std::thread::spawn(|| pin_current_thread(Some(0)))
            .join()
            .unwrap();
        // Core 0 exists on every machine; a sandbox may still refuse.
        assert!(matches!(
            out,
            PinOutcome::Pinned(0) | PinOutcome::Unpinned { .. }
        ));
        assert_eq!(pin_current_thread(None), PinOutcome::NotRequested);
    }

    #[test]
    fn the_feed_shares_the_publisher_s_thread_on_one_core_unless_told_or_pinned() {
        let none = PinPlan::default();
        assert!(FeedThread::Auto.shares_publisher(1, none));
        assert!(!FeedThread::Auto.shares_publisher(2, none));
        let pinned = PinPlan {
            feed: Some(0),
            ..PinPlan::default()
        };
        assert!(!FeedThread::Auto.shares_publisher(1, pinned));
        assert!(FeedThread::Shared.shares_publisher(8, none));
        assert!(!FeedThread::Own.shares_publisher(1, none));
    }
}
