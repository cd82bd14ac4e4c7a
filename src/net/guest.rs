//! A loop that runs inside another loop's thread: its host.
//!
//! Two busy threads on one core hand work over by waking each other: on
//! this project's machine, with the engine held to one core, the feed and
//! the publisher made 20k context switches a second at 50k ticks/s where
//! Redis, one thread, made 1.4k (perf/RESULTS.md). When the engine may use
//! one core only, the feed's loop is therefore run as a *guest* of the
//! publisher's: the host registers the guest's poller in its own (an epoll
//! instance is itself pollable, so an event for the guest wakes the host)
//! and gives it one turn, without waiting, in each of its own turns, as
//! Redis reads its clients and writes its subscribers in one event loop.
//!
//! The host owns this trait; the guest's stage implements it (as with
//! `admin::orders_switch`), so neither stage imports the other.

use mio::{Registry, Token};

/// A loop that can take its turns inside a host's.
///
/// Invariants the host keeps: it calls the guest from one thread only; in
/// each of its turns it calls [`GuestLoop::turn`] when the guest's poller
/// reported an event, when the guest's last turn did work or when
/// [`GuestLoop::has_ready`] holds (the poller is registered
/// edge-triggered, so an event is reported once), and
/// [`GuestLoop::skipped`] otherwise; it waits no longer than
/// [`GuestLoop::max_park_ns`]; it calls [`GuestLoop::finish`] once, after
/// the last turn.
pub(crate) trait GuestLoop: Send + std::fmt::Debug {
    /// Registers the guest's poller in the host's under `token`.
    ///
    /// # Errors
    /// When the host's poller refuses the registration.
    fn register_in(&self, host: &Registry, token: Token) -> std::io::Result<()>;

    /// One turn without waiting: what the guest's own thread would do after
    /// its wait. Returns the work done (0 when there was nothing), or
    /// `None` when its poller failed (the guest is then finished).
    fn turn(&mut self) -> Option<usize>;

    /// A turn of the host's in which the guest had nothing due: the guest
    /// is alive all the same (its heartbeat, `sys::watch`).
    fn skipped(&self);

    /// Work is waiting that no new event will report (a connection left
    /// readable by the fairness limit).
    fn has_ready(&self) -> bool;

    /// The guest was told to stop.
    fn stopping(&self) -> bool;

    /// How long the guest may go without a turn (its next timer).
    fn max_park_ns(&self) -> u64;

    /// The guest's last act: its final report figures, and telling whoever
    /// waits for it that it is gone.
    fn finish(&mut self);
}
