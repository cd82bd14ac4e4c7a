//! Thread-to-core pinning that degrades gracefully.
//!
//! On a dedicated host each hot thread gets its own core. On a small host
//! (this project's CI has 2 cores) a requested core may not exist: the thread
//! then runs unpinned and the engine says so once, instead of failing.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
