//! `replay`'s vendor readers allocate nothing per record once warmed up
//! (issue 28, item 4: "one quote at a time into a reused buffer"): with a
//! counting global allocator, decoding a DBN `.dbn.zst` stream and a Tardis
//! `.csv.gz` stream to quote lines allocates only while the first records
//! fill the caches (the symbol of each instrument), then nothing.
//!
//! Its own test binary, with a counting allocator that counts per thread
//! (the tools' unit tests, compiled in with them, run on other threads).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Cursor, Write};

#[allow(dead_code, unused_imports)]
// reason: only the replay source and the DBN generator are used here; the tools' test modules are built without their tests
#[path = "../tools/mod.rs"]
mod tools;

use tools::gen::{GenSpec, Limit};
use tools::replay::{DecodeOptions, InputFormat, Source, Step};

struct Counting;

thread_local! {
    /// Allocations made by this thread (const-initialised: reading it
    /// never allocates, so the allocator may touch it).
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Counts one allocation of the calling thread.
fn count() {
    // A thread being torn down has no counter left: not ours to count.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// This thread's allocations so far.
fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

// SAFETY: forwards every call unchanged to the system allocator; it only
// counts allocations on the side, in a thread-local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Reads `bytes` as a replay file: the allocations of the quotes after
/// the first `warm`, and the number of quotes.
fn allocations_after(bytes: Vec<u8>, warm: u64) -> (u64, u64) {
    let mut src = Source::from_reader(
        "t",
        Box::new(Cursor::new(bytes)),
        InputFormat::Auto,
        &DecodeOptions::default(),
    )
    .expect("a replay file");
    let mut line = Vec::with_capacity(256);
    let (mut n, mut before) = (0u64, 0u64);
    loop {
        match src.next_line(&mut line) {
            Step::Line => {
                n += 1;
                if n == warm {
                    before = allocs();
                }
            }
            Step::Skipped(s) => panic!("{s}"),
            Step::End => break,
        }
    }
    (allocs() - before, n)
}

#[test]
fn dbn_zst_quotes_allocate_nothing_once_every_symbol_was_seen() {
    let mut zst = Vec::new();
    // 50 symbols: all of them appear within the first 20,000 quotes.
    tools::gen_dbn::write_dbn(&GenSpec::steady(50, 3), Limit::Ticks(200_000), &mut zst).unwrap();
    let (allocs, n) = allocations_after(zst, 20_000);
    assert_eq!(n, 200_000);
    assert_eq!(allocs, 0, "allocations over 180,000 quotes");
}

#[test]
fn tardis_gz_rows_allocate_nothing_once_warm() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(
        b"exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n",
    )
    .unwrap();
    for i in 0..100_000u64 {
        let sym = ["BTCUSDT", "ETHUSDT", "SOLUSDT"][(i % 3) as usize];
        writeln!(
            gz,
            "binance,{sym},{},{},0.{},6423.{},6422.{},1.{}",
            1_585_699_201_147_000 + i,
            1_585_699_201_270_777 + i,
            i % 97 + 1,
            i % 10,
            i % 10,
            i % 13
        )
        .unwrap();
    }
    let (allocs, n) = allocations_after(gz.finish().unwrap(), 1_000);
    assert_eq!(n, 100_000);
    assert_eq!(allocs, 0, "allocations over 99,000 rows");
}
