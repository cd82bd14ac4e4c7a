//! The timer loop: owns a [`DelayQueue`], takes new items from a bounded
//! inbox, and fires due items from its own tick, so a due item fires even
//! when nothing else happens (no new traffic, no other event).
//!
//! ```text
//!  workers ──(due, item)──▶ inbox ──▶ ┌────────────┐  due  ┌──────────┐
//!                                     │ DelayQueue │ ────▶ │ Fire<T>  │ ──▶ back to the workers
//!            clock tick (≤ tick) ───▶ └────────────┘       └──────────┘
//! ```
//!
//! It waits on the inbox with a timeout of `min(tick, time to the next due
//! item)`: on a real clock a retry fires on time, on a simulated clock within
//! one real `tick` of the simulated time passing its due time. It never fires
//! an item early (property-tested in `delay_queue`).
//!
//! Single owner: the timer thread owns the queue; the inbox is its only input.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::clock::SharedClock;
use super::delay_queue::{DelayQueue, Full};

/// How long an empty timer waits for input before checking its stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// What the timer does with items.
pub(crate) trait Fire<T> {
    /// A due item. `Err(item)` means "cannot take it now" (e.g. the workers'
    /// channel is full): the timer keeps it, due as before, and offers it
    /// again on its next tick.
    ///
    /// # Errors
    /// The item handed back, as above.
    fn fire(&mut self, item: T, due_ns: u64, now_ns: u64) -> Result<(), T>;

    /// An item that arrived while the queue was full (cannot happen when the
    /// producers hold permits for the queue's capacity; handled anyway).
    fn overflow(&mut self, item: T, now_ns: u64);

    /// Every item still waiting when the loop stops, and every item that
    /// arrives after that until the inbox closes.
    fn abandon(&mut self, item: T, now_ns: u64);

    /// The loop is stopping: release whatever the consumers of fired items
    /// wait on (so they can finish and close the inbox).
    fn close(&mut self) {}

    /// Called once per loop turn with the queue length and the earliest due
    /// time (gauges).
    fn observe(&mut self, _len: usize, _next_due_ns: Option<u64>, _now_ns: u64) {}
}

/// The loop's state.
#[derive(Debug)]
pub(crate) struct TimerLoop<T, F> {
    queue: DelayQueue<T>,
    inbox: Receiver<(u64, T)>,
    clock: SharedClock,
    fire: F,
    tick: Duration,
    stop: Arc<AtomicBool>,
}

impl<T, F: Fire<T>> TimerLoop<T, F> {
    /// A loop over a queue of `capacity`, ticking at least every `tick` of real time.
    pub(crate) fn new(
        capacity: usize,
        inbox: Receiver<(u64, T)>,
        clock: SharedClock,
        fire: F,
        tick: Duration,
        stop: Arc<AtomicBool>,
    ) -> Self {
        TimerLoop {
            queue: DelayQueue::with_capacity(capacity),
            inbox,
            clock,
            fire,
            tick: tick.max(Duration::from_micros(100)),
            stop,
        }
    }

    /// One turn: take what the inbox holds (waiting at most `wait`), then
    /// fire what is due. Returns false once the loop should end.
    pub(crate) fn turn(&mut self, wait: Duration) -> bool {
        match self.inbox.recv_timeout(wait) {
            Ok((due, item)) => {
                self.admit(due, item);
                while let Ok((due, item)) = self.inbox.try_recv() {
                    self.admit(due, item);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
        }
        self.fire_due();
        true
    }

    fn admit(&mut self, due: u64, item: T) {
        if let Err(Full(item)) = self.queue.push(due, item) {
            let now = self.clock.now_ns();
            self.fire.overflow(item, now);
        }
    }

    /// Fires every due item; returns how many fired.
    pub(crate) fn fire_due(&mut self) -> usize {
        let now = self.clock.now_ns();
        let mut fired = 0;
        while let Some((due, item)) = self.queue.pop_due(now) {
            match self.fire.fire(item, due, now) {
                Ok(()) => fired += 1,
                Err(item) => {
                    // Room is certain: we just popped it.
                    let _ = self.queue.push_front(due, item);
                    break;
                }
            }
        }
        self.fire
            .observe(self.queue.len(), self.queue.next_due(), now);
        fired
    }

    /// Runs until the stop flag is set or the inbox disconnects. Then calls
    /// [`Fire::close`], hands every waiting item to [`Fire::abandon`], and
    /// keeps abandoning what still arrives until every producer has gone, so
    /// no item is left in a channel when it is dropped. Returns the handler.
    pub(crate) fn run(mut self) -> F {
        while !self.stop.load(Ordering::Acquire) {
            let now = self.clock.now_ns();
            let wait = match self.queue.next_due() {
                Some(due) => Duration::from_nanos(due.saturating_sub(now)).min(self.tick),
                None => IDLE_WAIT,
            };
            if !self.turn(wait) {
                break;
            }
        }
        self.fire.close();
        let now = self.clock.now_ns();
        for (_, item) in self.queue.drain_all() {
            self.fire.abandon(item, now);
        }
        self.fire.observe(0, None, now);
        while let Ok((_, item)) = self.inbox.recv() {
            let now = self.clock.now_ns();
            self.fire.abandon(item, now);
        }
        self.fire
    }

    /// The handler (tests).
    #[cfg(test)]
    pub(crate) fn handler(&self) -> &F {
        &self.fire
    }

    /// Items waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::clock::SimClock;

    #[derive(Debug, Default)]
    struct Log {
        fired: Vec<(u32, u64, u64)>,
        refuse: bool,
        abandoned: Vec<u32>,
        overflow: Vec<u32>,
    }

    impl Fire<u32> for Log {
        fn fire(&mut self, item: u32, due: u64, now: u64) -> Result<(), u32> {
            if self.refuse {
                return Err(item);
            }
            self.fired.push((item, due, now));
            Ok(())
        }
        fn overflow(&mut self, item: u32, _: u64) {
            self.overflow.push(item);
        }
        fn abandon(&mut self, item: u32, _: u64) {
            self.abandoned.push(item);
        }
    }

    fn setup(
        cap: usize,
    ) -> (
        TimerLoop<u32, Log>,
        crossbeam_channel::Sender<(u64, u32)>,
        SimClock,
    ) {
        let clock = SimClock::new();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let t = TimerLoop::new(
            cap,
            rx,
            Arc::new(clock.clone()),
            Log::default(),
            Duration::from_millis(1),
            Arc::new(AtomicBool::new(false)),
        );
        (t, tx, clock)
    }

    #[test]
    fn fires_on_its_own_tick_with_no_new_input() {
        let (mut t, tx, clock) = setup(4);
        tx.send((100, 1)).unwrap();
        assert!(t.turn(Duration::ZERO));
        assert!(t.handler().fired.is_empty());
        clock.set(99);
        assert_eq!(t.fire_due(), 0);
        clock.set(100);
        // Nothing arrives: the turn times out and still fires.
        assert!(t.turn(Duration::ZERO));
        assert_eq!(t.handler().fired, vec![(1, 100, 100)]);
    }

    #[test]
    fn refused_items_stay_and_fire_later() {
        let (mut t, tx, clock) = setup(4);
        tx.send((5, 1)).unwrap();
        tx.send((5, 2)).unwrap();
        t.turn(Duration::ZERO);
        clock.set(10);
        t.fire.refuse = true;
        assert_eq!(t.fire_due(), 0);
        assert_eq!(t.len(), 2);
        t.fire.refuse = false;
        assert_eq!(t.fire_due(), 2);
        assert_eq!(
            t.handler().fired.iter().map(|f| f.0).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[test]
    fn full_queue_overflows_and_stop_abandons() {
        let (mut t, tx, _clock) = setup(1);
        tx.send((5, 1)).unwrap();
        tx.send((6, 2)).unwrap();
        t.turn(Duration::ZERO);
        assert_eq!(t.handler().overflow, [2]);
        tx.send((7, 3)).unwrap();
        t.stop.store(true, Ordering::Release);
        let late = std::thread::spawn(move || {
            // Arrives after the stop: abandoned too, never lost.
            tx.send((8, 4)).unwrap();
        });
        let log = t.run();
        late.join().unwrap();
        assert_eq!(log.abandoned, [1, 3, 4]);
    }
}
