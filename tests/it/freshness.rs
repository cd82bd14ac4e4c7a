//! A reader with a small receive buffer reading at a fixed byte rate: the
//! engine paces it (`--sub-max-lag`) — what it commits for it stays within
//! its budget (+ one frame), the rest is conflated into pending marks, it
//! never gets an older value after a newer, and once the feed stops it
//! holds every symbol's last value after at most a budget's worth of
//! queued frames — while a normal subscriber receives every update.
//! The same with a reader at the OS-default receive buffer: its own kernel
//! would hold a buffer's worth of acknowledged, unread frames; the budget
//! counts what its advertised window says it holds, so what its kernel
//! holds (read from /proc/net/tcp) stays well under its buffer.
//! (The drain-rate estimator, the budget and the held-bytes estimate are
//! unit-tested with injected times and windows in `publish::commit_budget`
//! and `publish::peer_window`.)

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickfan::client::resp::{as_message, command, read_frame};
use tickfan::metrics::report::SubscriberStats;
use tickfan::runtime::Engine;

use crate::util::{engine_with, payload_seq, send_round, wait_until, Feed, Sub, DEADLINE};

const SYMBOLS: u64 = 200;
/// The reader's byte rate.
const RATE: u64 = 32 * 1024;
/// Largest frame of this test (`pmessage`, pattern `*`, `SYMnnn`, payload).
const FRAME_MAX: u64 = 160;

/// A reader that takes at most `rate` bytes/s (its own pace, not a wait
/// for the engine). Allowance it did not use beyond `burst` bytes is
/// forfeited, so after the test's machine descheduled it for a while it
/// does not read at many times its rate (a drain rate the engine would
/// rightly measure).
struct Paced {
    inner: TcpStream,
    start: Instant,
    taken: u64,
    rate: u64,
    burst: u64,
    forfeited: u64,
}

impl Read for Paced {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let earned = 512 + (self.start.elapsed().as_secs_f64() * self.rate as f64) as u64;
            self.forfeited = self
                .forfeited
                .max(earned.saturating_sub(self.taken.saturating_add(self.burst)));
            let allowed = earned - self.forfeited;
            let room = allowed.saturating_sub(self.taken).min(buf.len() as u64) as usize;
            if room > 0 {
                let n = self.inner.read(&mut buf[..room])?;
                self.taken += n as u64;
                return Ok(n);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn small_rcvbuf_reader(addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s
}

/// The slow reader's thread: reads `slow` at `rate` bytes/s, checks that
/// no value is older than one it had, and once `final_round` is set
/// returns (messages read, messages read after it was set) when it holds
/// every symbol's value of that round.
fn spawn_paced_reader(
    slow: &TcpStream,
    rate: u64,
    burst: u64,
    final_round: &Arc<AtomicU64>,
) -> std::thread::JoinHandle<(u64, u64)> {
    let final_round = Arc::clone(final_round);
    let inner = slow.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut r = BufReader::with_capacity(
            256,
            Paced {
                inner,
                start: Instant::now(),
                taken: 0,
                rate,
                burst,
                forfeited: 0,
            },
        );
        let mut last: HashMap<Vec<u8>, u64> = HashMap::new();
        let (mut messages, mut after_final) = (0u64, None::<u64>);
        loop {
            let f = read_frame(&mut r).expect("a frame before the deadline");
            let Some((ch, payload)) = as_message(&f) else {
                continue;
            };
            messages += 1;
            let seq = payload_seq(payload);
            let prev = last.insert(ch.to_vec(), seq);
            assert!(
                prev.is_none_or(|p| p < seq),
                "an older or repeated value on {ch:?}"
            );
            let fin = final_round.load(Ordering::Acquire);
            if fin != u64::MAX {
                let since = after_final.get_or_insert(messages);
                if last.len() as u64 == SYMBOLS && last.values().all(|&s| s >= fin) {
                    return (messages, messages - *since);
                }
            }
        }
    })
}

/// Sends round `round` (one tick per symbol), waits until the normal
/// subscriber holds every value of it, and returns the slow reader's
/// (subscriber 1's) figures once the engine lists it.
fn one_round(
    e: &Engine,
    feed: &mut Feed,
    healthy: &mut Sub,
    names: &[String],
    round: u64,
) -> Option<SubscriberStats> {
    send_round(feed, names, round);
    let got = healthy.until_round(names, round);
    assert!(
        got.values().all(|m| m.seq() == round),
        "the normal subscriber missed an update"
    );
    e.subscribers().into_iter().find(|s| s.id == 1)
}

#[test]
fn a_slow_reader_is_paced_by_its_drain_rate_and_a_normal_one_gets_everything() {
    let e = engine_with(|c| {
        c.sub_max_lag = Duration::from_millis(50);
        c.report_interval = Duration::from_millis(20);
    });
    let mut slow = small_rcvbuf_reader(e.subscriber_addr());
    slow.write_all(&command(&[b"PSUBSCRIBE", b"*"])).unwrap();
    let final_round = Arc::new(AtomicU64::new(u64::MAX));
    // At most 4 KiB of unused allowance: its drain rate stays its own.
    let reader = spawn_paced_reader(&slow, RATE, 4 * 1024, &final_round);
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    wait_until("both subscribed", || e.subscribers().len() == 2);
    let mut feed = Feed::connect(e.feed_addr());
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();

    // Rounds of one tick per symbol (so a symbol's sequence number is the
    // round), the normal subscriber holding every value of each round,
    // until the slow reader has read 64 KiB more since it was paced.
    let mut round = 0u64;
    let mut paced_at: Option<u64> = None;
    let mut budgets = Vec::new();
    loop {
        round += 1;
        assert!(round < 1_000_000, "the reader was never paced");
        let Some(st) = one_round(&e, &mut feed, &mut healthy, &names, round) else {
            continue;
        };
        if st.paced {
            budgets.push(st.commit_budget_bytes);
            let at = *paced_at.get_or_insert(st.bytes_written);
            if st.bytes_written > at + 64 * 1024 {
                break;
            }
        }
    }
    final_round.store(round, Ordering::Release);
    let (messages, after_final) = reader.join().expect("the reader holds every last value");

    let st = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    let normal = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    // Commit little: never more than the budget + one frame committed.
    assert!(
        st.max_commit_excess_bytes <= FRAME_MAX,
        "committed {} over the budget",
        st.max_commit_excess_bytes
    );
    // The budget follows the drain rate (~32 KiB/s × 50 ms → the floor;
    // a window in which the reader's receive buffer took a burst raises it
    // for a while), far under the 256 KiB mark.
    let mut settled = budgets[budgets.len() / 2..].to_vec();
    settled.sort_unstable();
    assert!(
        settled[settled.len() - 1] <= 16 * 1024 && settled[settled.len() / 2] <= 4 * 1024,
        "budgets {settled:?}"
    );
    // Conflate the rest: far fewer messages than updates.
    assert!(st.conflations > 0 && messages < round * SYMBOLS / 2);
    // Bounded freshness: once the feed stopped, the reader held every last
    // value after at most the frames committed then (budget + its 4 KiB
    // receive buffer, doubled by the kernel) plus one per symbol.
    let committed_frames = (2 * 8 * 1024 + 8 * 1024) / 90;
    assert!(
        after_final <= SYMBOLS + committed_frames,
        "{after_final} messages after the last round"
    );
    // The normal subscriber held every round's values (one_round checks)
    // and is not paced. (It reads each round only once it is sent: the
    // watch may pace it for a few ms at its first rounds, conflating
    // meanwhile — docs/src/decisions.md, "the watch".)
    assert!(!normal.paced, "{normal:?}");
}

/// Bytes the engine's socket at `server` toward `peer` has sent and not
/// had acknowledged (its `tx_queue` in /proc/net/tcp), if listed.
fn unacked_bytes(server: SocketAddr, peer: SocketAddr) -> Option<u64> {
    let (l, r) = (
        format!("0100007F:{:04X}", server.port()),
        format!("0100007F:{:04X}", peer.port()),
    );
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1) == Some(&l.as_str()) && f.get(2) == Some(&r.as_str()))
            .then(|| u64::from_str_radix(f.get(4)?.split(':').next()?, 16).ok())
            .flatten()
    })
}

/// Bytes the kernel holds unread for the local TCP socket `local` (its
/// `rx_queue` in /proc/net/tcp), if listed.
fn unread_bytes(local: SocketAddr) -> Option<u64> {
    let want = format!("0100007F:{:04X}", local.port());
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&want.as_str()))
            .then(|| u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok())
            .flatten()
    })
}

/// An engine (lag 50 ms) with a reader at 64 KiB/s on the OS-default
/// receive buffer (at most `burst` bytes of unused allowance) and a healthy
/// subscriber, both on `*`, and a feed; `None` (skipped) without
/// /proc/net/tcp to read the reader's kernel from.
struct DefaultBufferRun {
    e: Engine,
    local: SocketAddr,
    reader: std::thread::JoinHandle<(u64, u64)>,
    final_round: Arc<AtomicU64>,
    healthy: Sub,
    feed: Feed,
    names: Vec<String>,
}

fn default_buffer_run(burst: u64) -> Option<DefaultBufferRun> {
    // Its default receive buffer (128 KiB here, on Linux's default
    // tcp_rmem) is 2 s of it.
    const SLOW: u64 = 64 * 1024;
    if std::fs::metadata("/proc/net/tcp").is_err() {
        eprintln!("skipped: no /proc/net/tcp to read the reader's kernel from");
        return None;
    }
    let e = engine_with(|c| {
        c.sub_max_lag = Duration::from_millis(50);
        c.report_interval = Duration::from_millis(20);
    });
    // The OS-default receive buffer: nothing set.
    let mut slow = TcpStream::connect(e.subscriber_addr()).unwrap();
    slow.set_read_timeout(Some(DEADLINE)).unwrap();
    let local = slow.local_addr().unwrap();
    slow.write_all(&command(&[b"PSUBSCRIBE", b"*"])).unwrap();
    let final_round = Arc::new(AtomicU64::new(u64::MAX));
    let reader = spawn_paced_reader(&slow, SLOW, burst, &final_round);
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    wait_until("both subscribed", || e.subscribers().len() == 2);
    let feed = Feed::connect(e.feed_addr());
    let names = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();
    Some(DefaultBufferRun {
        e,
        local,
        reader,
        final_round,
        healthy,
        feed,
        names,
    })
}

#[test]
fn a_default_buffer_reader_holds_far_less_than_its_buffer_in_its_own_kernel() {
    let Some(DefaultBufferRun {
        e,
        local,
        reader,
        final_round,
        mut healthy,
        mut feed,
        names,
    }) = default_buffer_run(u64::MAX)
    else {
        return;
    };

    // Rounds until the reader has taken 256 KiB since it was paced: the
    // first 128 KiB empty the buffer it filled before (those frames were
    // acknowledged before the engine knew it was slow), then what its
    // kernel holds is sampled once per round.
    let (mut round, mut paced_at, mut held, mut estimated) = (0u64, None::<u64>, Vec::new(), 0u64);
    loop {
        round += 1;
        assert!(round < 1_000_000, "the reader was never paced");
        let Some(st) = one_round(&e, &mut feed, &mut healthy, &names, round) else {
            continue;
        };
        if !st.paced {
            continue;
        }
        let at = *paced_at.get_or_insert(st.bytes_written);
        if st.bytes_written > at + 128 * 1024 {
            held.push(unread_bytes(local).expect("the reader's socket is listed"));
            estimated = estimated.max(st.reader_held_bytes);
        }
        if st.bytes_written > at + 256 * 1024 {
            break;
        }
    }
    final_round.store(round, Ordering::Release);
    let (_, after_final) = reader.join().expect("the reader holds every last value");

    // Its kernel held far less than its buffer: a few KiB while its window
    // tells what it holds, up to about half its 128 KiB when the receiver
    // caps its window below its free space and the first tens of KiB it
    // holds do not show (docs/src/decisions.md) — not its whole buffer, as it
    // does when the window is not counted (p90 ≥ 100 KiB then).
    held.sort_unstable();
    let p90 = held[held.len() * 9 / 10];
    assert!(
        p90 <= 80 * 1024,
        "the reader's kernel held p90 {p90} bytes ({} samples, median {})",
        held.len(),
        held[held.len() / 2]
    );
    assert!(
        estimated > 0,
        "the engine never saw the reader hold anything"
    );
    // Bounded freshness: once the feed stopped, it held every last value
    // after the frames committed then (budget, send queue, its own kernel's
    // bytes) plus one per symbol.
    assert!(
        after_final <= SYMBOLS + 80 * 1024 / 90,
        "{after_final} messages after the last round"
    );
    let st = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    assert!(st.max_commit_excess_bytes <= FRAME_MAX, "{st:?}");
    let normal = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    assert!(!normal.paced, "{normal:?}");
}

#[test]
fn a_reader_slow_from_its_first_message_is_paced_before_it_fills_its_default_buffer() {
    // 64 KiB/s from its first byte (at most 4 KiB of unused allowance):
    // its default receive buffer (128 KiB here) is 2 s of it. Before the
    // watch, the engine paced it only once a write blocked — with that
    // whole buffer full of frames it would read before anything newer.
    let Some(DefaultBufferRun {
        e,
        local,
        reader,
        final_round,
        mut healthy,
        mut feed,
        names,
    }) = default_buffer_run(4 * 1024)
    else {
        return;
    };

    // What its kernel holds, sampled after every round from the first,
    // until 256 KiB have been written to it (twice its buffer).
    let (mut round, mut most) = (0u64, 0u64);
    loop {
        round += 1;
        assert!(round < 1_000_000, "256 KiB never written to the reader");
        let st = one_round(&e, &mut feed, &mut healthy, &names, round);
        // A feed, not a flood: the next round once the reader's kernel has
        // acknowledged this one (the engine then has its window).
        wait_until("the round acknowledged", || {
            unacked_bytes(e.subscriber_addr(), local).is_some_and(|n| n == 0)
        });
        let h = unread_bytes(local).expect("the reader's socket is listed");
        most = most.max(h);
        if st.is_some_and(|s| s.bytes_written > 256 * 1024) {
            break;
        }
    }
    final_round.store(round, Ordering::Release);
    reader.join().expect("the reader holds every last value");
    eprintln!("the reader's kernel held at most {most} bytes over {round} rounds");
    // Paced by its whole buffer (118 KB measured on main before the watch)
    // and ~82 KB now: rounds of 20 KiB go out faster than its window can
    // tell, and a watched reader can be let go once by its trial when its
    // window is at the receiver's lowered cap (docs/src/decisions.md, "the watch").
    assert!(
        most <= 104 * 1024,
        "the reader's kernel held up to {most} bytes: filled before it was paced"
    );
    let st = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    assert!(st.paced, "{st:?}");
    let normal = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    assert!(!normal.paced, "{normal:?}");
}
