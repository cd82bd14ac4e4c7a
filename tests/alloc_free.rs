//! No allocation per tick: with a counting global allocator, a steady flow
//! of ticks through feed → slot → publisher → subscriber buffer → socket
//! allocates nothing once warmed up.
//!
//! Its own test binary, so the counting allocator sees only this test. The
//! client side of the test allocates nothing during the measured window
//! either (pre-built buffers, raw reads, counters read as atomics), so every
//! counted allocation would be the engine's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickfan::config::Config;
use tickfan::runtime::Engine;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator; it only
// counts allocations on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SYMBOLS: usize = 50;
const ROUNDS: usize = 200;

fn wait_until(mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < end, "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One batch: ROUNDS ticks of each of SYMBOLS symbols, built up front.
fn batch(first_round: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for r in first_round..first_round + ROUNDS {
        for s in 0..SYMBOLS {
            out.extend_from_slice(format!("{r},S{s:02},1.{r:05},2.{r:05},1000000,5\n").as_bytes());
        }
    }
    out
}

#[test]
fn steady_ticks_allocate_nothing() {
    let config = Config {
        // No periodic work inside the measured window.
        report_interval: Duration::from_secs(3600),
        ..Config::ephemeral()
    };
    let engine = Engine::start(&config).unwrap();
    let c = Arc::clone(engine.counters());
    let published = move || c.publish.published.load(Ordering::Relaxed);
    let c = Arc::clone(engine.counters());
    let valid = move || c.feed.ticks_valid.load(Ordering::Relaxed);

    let mut sub = TcpStream::connect(engine.subscriber_addr()).unwrap();
    sub.write_all(b"PSUBSCRIBE *\r\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, received) = (Arc::clone(&stop), Arc::clone(&received));
        let mut sub = sub.try_clone().unwrap();
        sub.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = sub.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        })
    };
    wait_until(|| received.load(Ordering::Relaxed) > 0); // the confirmation
    let mut feed = TcpStream::connect(engine.feed_addr()).unwrap();

    // Warm-up: symbols interned, buffers at their working size.
    let warm = batch(1);
    let steady = batch(1 + ROUNDS);
    feed.write_all(&warm).unwrap();
    let n = (SYMBOLS * ROUNDS) as u64;
    wait_until(|| valid() == n && published() > 0);
    wait_until(|| {
        let p = published();
        std::thread::sleep(Duration::from_millis(20));
        p == published()
    });

    let before = ALLOCS.load(Ordering::Relaxed);
    let published_before = published();
    feed.write_all(&steady).unwrap();
    wait_until(|| valid() == 2 * n);
    wait_until(|| {
        let p = published();
        std::thread::sleep(Duration::from_millis(20));
        p == published()
    });
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let updates = published() - published_before;

    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    drop(engine);
    assert!(updates > 0, "nothing was published in the window");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations for {n} ticks ({updates} published updates)"
    );
}
