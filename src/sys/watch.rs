//! Thread watch: which engine threads are alive, which have died and which
//! have stopped heart-beating, so a failed thread is loud instead of a
//! silent hole in the pipeline.
//!
//! Each watched thread holds a [`Beat`]. A loop thread calls
//! [`Beat::beat`] once per turn (its loop wakes at least every `MAX_PARK`,
//! 100 ms at most, so an idle loop still beats); a thread that blocks on a
//! channel holds a *guard* ([`Watch::guard`]) that never beats and is only
//! watched for death. A `Beat` dropped while its thread panics marks the
//! thread dead ([`std::thread::panicking`]); dropped normally, it marks the
//! thread ended (a clean stop is not a failure).
//!
//! Readers: the admin endpoint's `/health` ([`Watch::health`]) and the
//! binary's main thread ([`Watch::fatal`]), which then runs the registered
//! *on-fatal* hooks ([`Watch::on_fatal`]: each makes what is durable
//! durable, e.g. the dead-letter file's `sync_data`; the order journal
//! registers its own) and exits with [`FATAL_EXIT`].
//!
//! Writers: each `Beat` is written by its own thread only (one relaxed
//! store per turn: readers only compare ages, nothing is published through
//! it). The list of beats is appended to at start and read by `/health`.
//!
//! Test-only faults ([`Fault`]) make one named thread panic or stall at
//! its next beat; the binary takes one from `TICKFAN_FAULT`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::sys::clock::MonoClock;

/// Exit status of the binary when an engine thread has died.
pub const FATAL_EXIT: i32 = 3;

/// A thread that has not beaten for this long is reported stalled.
pub const STALL_AFTER: Duration = Duration::from_secs(5);

/// A hook run once on the fatal path, before the process exits.
type FatalHook = Box<dyn Fn() + Send + Sync>;

const ALIVE: u8 = 0;
const ENDED: u8 = 1;
const DIED: u8 = 2;

/// A fault a test puts into one thread (by its full name, e.g.
/// `tickfan-feed`); it strikes at the thread's next [`Beat::beat`].
#[derive(Debug, Clone)]
pub enum Fault {
    /// The thread panics.
    Panic(String),
    /// The thread stops beating until `release` is set.
    Stall {
        /// The thread's name.
        thread: String,
        /// Set to let the thread go on.
        release: Arc<AtomicBool>,
    },
}

impl Fault {
    /// Parses `panic:<thread>` or `stall:<thread>` (a stall the binary
    /// never releases).
    ///
    /// # Errors
    /// Names the accepted forms when `s` is neither.
    pub fn parse(s: &str) -> Result<Fault, String> {
        match s.split_once(':') {
            Some(("panic", t)) if !t.is_empty() => Ok(Fault::Panic(t.to_string())),
            Some(("stall", t)) if !t.is_empty() => Ok(Fault::Stall {
                thread: t.to_string(),
                release: Arc::default(),
            }),
            _ => Err(format!(
                "fault {s:?}: expected panic:<thread> or stall:<thread>"
            )),
        }
    }

    fn thread(&self) -> &str {
        match self {
            Fault::Panic(t) | Fault::Stall { thread: t, .. } => t,
        }
    }
}

#[derive(Debug)]
struct Cell {
    name: String,
    /// Checked for stalls (a loop thread), or only for death (a guard).
    beating: bool,
    /// Engine-clock ns of the last beat (single writer: the thread).
    last_ns: AtomicU64,
    state: AtomicU8,
}

/// The watch of one engine's threads. Shared by the runtime, the threads
/// and the admin endpoint.
pub struct Watch {
    clock: MonoClock,
    stall_after_ns: u64,
    fault: Option<Fault>,
    cells: Mutex<Vec<Arc<Cell>>>,
    dead: AtomicBool,
    hooks: Mutex<Vec<FatalHook>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("cells", &*self.cells.lock())
            .field("dead", &self.dead)
            .field("hooks", &self.hooks.lock().len())
            .finish()
    }
}

impl Default for Watch {
    fn default() -> Self {
        Watch::new(MonoClock::new(), None)
    }
}

impl Watch {
    /// A watch on `clock` (the engine's), with an optional test fault.
    pub(crate) fn new(clock: MonoClock, fault: Option<Fault>) -> Watch {
        Watch {
            clock,
            stall_after_ns: STALL_AFTER.as_nanos() as u64,
            fault,
            cells: Mutex::new(Vec::new()),
            dead: AtomicBool::new(false),
            hooks: Mutex::new(Vec::new()),
        }
    }

    fn register(self: &Arc<Self>, name: String, beating: bool) -> Beat {
        let fault = self.fault.clone().filter(|f| f.thread() == name);
        let cell = Arc::new(Cell {
            name,
            beating,
            last_ns: AtomicU64::new(self.clock.now_ns()),
            state: AtomicU8::new(ALIVE),
        });
        let mut cells = self.cells.lock();
        // Threads that ended cleanly leave: bounded by the threads alive
        // (call threads come and go with abandoned calls), plus the dead.
        cells.retain(|c| c.state.load(Ordering::Acquire) != ENDED);
        cells.push(Arc::clone(&cell));
        drop(cells);
        Beat {
            cell,
            watch: Arc::clone(self),
            fault,
        }
    }

    /// The heartbeat of loop thread `name` (created before it starts).
    pub(crate) fn beat(self: &Arc<Self>, name: &str) -> Beat {
        self.register(name.to_string(), true)
    }

    /// A death-only guard for the calling thread (named by its thread
    /// name): create it first thing in the thread and keep it to the end.
    pub(crate) fn guard(self: &Arc<Self>) -> Beat {
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        self.register(name, false)
    }

    /// Registers a hook the fatal path runs before the process exits
    /// (make durable what must be: sync a file, a journal).
    pub fn on_fatal(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.hooks.lock().push(Box::new(hook));
    }

    /// `Some("thread tickfan-x died")` once a watched thread has panicked.
    pub fn fatal(&self) -> Option<String> {
        if !self.dead.load(Ordering::Acquire) {
            return None;
        }
        let cells = self.cells.lock();
        let mut dead: Vec<&str> = Vec::new();
        for c in cells.iter() {
            // A thread started again under the same name (a venue call
            // thread per attempt) that died again is named once.
            if c.state.load(Ordering::Acquire) == DIED && !dead.contains(&c.name.as_str()) {
                dead.push(c.name.as_str());
            }
        }
        Some(format!("thread {} died (panicked)", dead.join(", ")))
    }

    /// Runs every on-fatal hook, in registration order.
    pub fn run_fatal_hooks(&self) {
        for hook in self.hooks.lock().iter() {
            hook();
        }
    }

    /// `Ok` when every watched thread is alive and beating; otherwise one
    /// line naming each thread that died or stalled.
    ///
    /// # Errors
    /// The line, for a `503`.
    pub fn health(&self) -> Result<(), String> {
        let now = self.clock.now_ns();
        let mut bad = Vec::new();
        for c in self.cells.lock().iter() {
            match c.state.load(Ordering::Acquire) {
                DIED => {
                    // Named once, however many threads of that name died.
                    let line = format!("{} died", c.name);
                    if !bad.contains(&line) {
                        bad.push(line);
                    }
                }
                ALIVE if c.beating => {
                    let age = now.saturating_sub(c.last_ns.load(Ordering::Relaxed));
                    if age > self.stall_after_ns {
                        bad.push(format!(
                            "{} stalled (no heartbeat for {:.1} s)",
                            c.name,
                            age as f64 / 1e9
                        ));
                    }
                }
                _ => {}
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }
}

/// One thread's entry in the [`Watch`]: beats on request, reports the
/// thread's death when dropped by a panic.
#[derive(Debug)]
pub(crate) struct Beat {
    cell: Arc<Cell>,
    watch: Arc<Watch>,
    fault: Option<Fault>,
}

impl Beat {
    /// Records a turn of the loop (and lets a test fault strike).
    #[inline]
    pub(crate) fn beat(&self) {
        self.cell
            .last_ns
            .store(self.watch.clock.now_ns(), Ordering::Relaxed);
        if let Some(f) = &self.fault {
            strike(f);
        }
    }
}

#[cold]
fn strike(f: &Fault) {
    match f {
        Fault::Panic(t) => panic!("injected fault: {t} panics"),
        Fault::Stall { release, .. } => {
            // Not synchronisation: the stalled thread polls its release.
            while !release.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.cell.state.store(DIED, Ordering::Release);
            self.watch.dead.store(true, Ordering::Release);
            log::error!("thread {} died (panicked)", self.cell.name);
        } else {
            self.cell.state.store(ENDED, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_until(mut cond: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(std::time::Instant::now() < deadline, "condition not met");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_panicking_thread_is_dead_and_the_hooks_run() {
        let w = Arc::new(Watch::default());
        let synced = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&synced);
        w.on_fatal(move || s.store(true, Ordering::Release));
        assert_eq!(w.health(), Ok(()));
        let w2 = Arc::clone(&w);
        let h = std::thread::Builder::new()
            .name("tickfan-test-x".into())
            .spawn(move || {
                let _g = w2.guard();
                panic!("boom");
            })
            .unwrap();
        assert!(h.join().is_err());
        assert_eq!(w.health(), Err("tickfan-test-x died".to_string()));
        assert_eq!(w.fatal().unwrap(), "thread tickfan-test-x died (panicked)");
        w.run_fatal_hooks();
        assert!(synced.load(Ordering::Acquire));
    }

    #[test]
    fn threads_of_one_name_that_died_are_named_once() {
        let w = Arc::new(Watch::default());
        for _ in 0..2 {
            let w2 = Arc::clone(&w);
            let h = std::thread::Builder::new()
                .name("tickfan-test-call".into())
                .spawn(move || {
                    let _g = w2.guard();
                    panic!("boom");
                })
                .unwrap();
            assert!(h.join().is_err());
        }
        assert_eq!(w.health(), Err("tickfan-test-call died".to_string()));
        assert_eq!(
            w.fatal().unwrap(),
            "thread tickfan-test-call died (panicked)"
        );
    }

    #[test]
    fn a_clean_stop_is_not_a_failure() {
        let w = Arc::new(Watch::default());
        let b = w.beat("tickfan-test-loop");
        b.beat();
        drop(b);
        assert_eq!(w.health(), Ok(()));
        assert_eq!(w.fatal(), None);
    }

    #[test]
    fn a_loop_that_stops_beating_is_stalled_until_it_beats_again() {
        let w = Arc::new(Watch {
            stall_after_ns: 1_000_000,
            ..Watch::default()
        });
        let b = w.beat("tickfan-test-loop");
        wait_until(|| w.health().is_err());
        assert!(w
            .health()
            .unwrap_err()
            .starts_with("tickfan-test-loop stalled"));
        b.beat();
        // The beat is fresh: healthy again (the threshold is 1 ms, so allow
        // for a slow machine by beating until it shows).
        wait_until(|| {
            b.beat();
            w.health().is_ok()
        });
    }

    #[test]
    fn faults_parse_and_strike_their_thread_only() {
        assert!(
            matches!(Fault::parse("panic:tickfan-feed"), Ok(Fault::Panic(t)) if t == "tickfan-feed")
        );
        assert!(Fault::parse("explode:x").is_err());
        assert!(Fault::parse("panic:").is_err());
        let w = Arc::new(Watch::new(
            MonoClock::new(),
            Some(Fault::Panic("tickfan-other".into())),
        ));
        w.beat("tickfan-feed").beat();
        let b = w.beat("tickfan-other");
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.beat())).is_err());
    }
}
