//! A reader that keeps up is never held back by the slow-reader pacing for
//! long: one that stops reading (its client thread not scheduled) is paced
//! like a slow reader, and once it reads at full speed again the engine
//! lets it go — it then receives every update, none conflated. (That it
//! happens within 100 ms of resuming is unit-tested with injected times in
//! `publish::commit_budget`; this checks the whole path over loopback with
//! the default `--sub-max-lag`.) Readers of one client whose thread stops
//! (all at once) are spared the pacing altogether: a stall they share is
//! their client away, not each of them slow.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickfan::client::resp::{as_message, command, read_frame};
use tickfan::config::Config;
use tickfan::metrics::report::SubscriberStats;

use tickfan::publish::shared_stall::CROWD;

use crate::util::{engine_with, payload_seq, send_round, wait_until, Feed, DEADLINE};

const SYMBOLS: usize = 500;
/// How long the reader stops reading (the 200 ms stall).
const STALL: Duration = Duration::from_millis(200);

/// A reader at full speed that can be told to stop: the highest sequence
/// number it holds per symbol (`SYMnnn` → index), the messages it read and
/// the updates it never saw (a sequence number that jumps: conflated).
struct Reader {
    hold: Arc<AtomicBool>,
    held: Arc<Vec<AtomicU64>>,
    messages: Arc<AtomicU64>,
    skipped: Arc<AtomicU64>,
}

impl Reader {
    fn spawn(stream: TcpStream) -> Reader {
        Reader::spawn_held(stream, Arc::new(AtomicBool::new(false)))
    }

    /// A reader that stops while `hold` is set (one flag for the readers
    /// of one client thread).
    fn spawn_held(stream: TcpStream, hold: Arc<AtomicBool>) -> Reader {
        let held: Arc<Vec<AtomicU64>> = Arc::new((0..SYMBOLS).map(|_| AtomicU64::new(0)).collect());
        let (messages, skipped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (h, v) = (Arc::clone(&hold), Arc::clone(&held));
        let (m, k) = (Arc::clone(&messages), Arc::clone(&skipped));
        std::thread::spawn(move || {
            stream
                .set_read_timeout(Some(Duration::from_millis(1)))
                .unwrap();
            let held = Held { stream, hold: h };
            let mut r = BufReader::with_capacity(64 * 1024, held);
            loop {
                let Ok(f) = read_frame(&mut r) else { return };
                let Some((ch, payload)) = as_message(&f) else {
                    continue;
                };
                let i: usize = std::str::from_utf8(&ch[3..]).unwrap().parse().unwrap();
                let seq = payload_seq(payload);
                let prev = v[i].swap(seq, Ordering::AcqRel);
                assert!(prev < seq, "an older or repeated value on SYM{i:03}");
                k.fetch_add(seq - prev - 1, Ordering::AcqRel);
                m.fetch_add(1, Ordering::AcqRel);
            }
        });
        Reader {
            hold,
            held,
            messages,
            skipped,
        }
    }

    fn holds_round(&self, round: u64) -> bool {
        self.held.iter().all(|s| s.load(Ordering::Acquire) >= round)
    }
}

/// The socket of a client thread that can be stopped: while `hold` is set
/// it does not read the socket (it polls its own flag, as a descheduled
/// thread would resume), though it may still handle what it already read.
/// Its reads wait at most 1 ms, so a stop takes effect without a read in
/// flight (one blocked in the kernel would return with the next bytes).
struct Held {
    stream: TcpStream,
    hold: Arc<AtomicBool>,
}

impl Read for Held {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.hold.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            match self.stream.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                r => return r,
            }
        }
    }
}

/// An engine with the default pacing, its figures handed off every
/// 20 ms, for [`SYMBOLS`] symbols.
fn paced_engine() -> tickfan::runtime::Engine {
    engine_with(|c| {
        c.report_interval = Duration::from_millis(20);
        c.max_symbols = c.max_symbols.max(SYMBOLS);
    })
}

/// [`CLIENT_READERS`] readers of every symbol on sockets from `connect`,
/// stopped together by the flag returned (one client thread's readers),
/// subscribed.
fn client_readers(
    e: &tickfan::runtime::Engine,
    connect: impl Fn(std::net::SocketAddr) -> TcpStream,
) -> (Arc<AtomicBool>, Vec<Reader>) {
    let hold = Arc::new(AtomicBool::new(false));
    let readers: Vec<Reader> = (0..CLIENT_READERS)
        .map(|_| {
            let mut s = connect(e.subscriber_addr());
            s.write_all(&command(&[b"PSUBSCRIBE", b"*"])).unwrap();
            Reader::spawn_held(s.try_clone().unwrap(), Arc::clone(&hold))
        })
        .collect();
    wait_until("subscribed", || all_stats(e).len() == CLIENT_READERS);
    (hold, readers)
}

fn stats(e: &tickfan::runtime::Engine) -> SubscriberStats {
    e.subscribers()
        .into_iter()
        .next()
        .expect("the reader is listed")
}

#[test]
fn a_reader_that_stops_for_200ms_then_reads_at_full_speed_is_let_go_and_gets_every_update() {
    let e = paced_engine();
    assert_eq!(
        Config::ephemeral().sub_max_lag,
        Duration::from_millis(50),
        "this checks the default pacing"
    );
    let mut s = TcpStream::connect(e.subscriber_addr()).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(&command(&[b"PSUBSCRIBE", b"*"])).unwrap();
    let reader = Reader::spawn(s.try_clone().unwrap());
    wait_until("subscribed", || e.subscribers().len() == 1);
    let mut feed = Feed::connect(e.feed_addr());
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();

    // Keeping up: each round held before the next is sent.
    let mut round = 0;
    for _ in 0..20 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("the reader holds the round", || reader.holds_round(round));
    }

    // It stops reading while the feed goes on; the engine paces it.
    reader.hold.store(true, Ordering::Release);
    let stopped = Instant::now();
    loop {
        round += 1;
        send_round(&mut feed, &names, round);
        if stats(&e).paced && stopped.elapsed() >= STALL {
            break;
        }
        assert!(
            stopped.elapsed() < DEADLINE,
            "never paced while it did not read"
        );
    }

    // It reads at full speed again: the engine lets it go…
    reader.hold.store(false, Ordering::Release);
    let paced_at = stats(&e).bytes_written;
    let end = Instant::now() + DEADLINE;
    let mut rounds_paced = 0;
    while stats(&e).paced {
        assert!(
            Instant::now() < end,
            "still paced {rounds_paced} rounds after it read again: {:?}",
            stats(&e)
        );
        round += 1;
        rounds_paced += 1;
        send_round(&mut feed, &names, round);
        wait_until("the resumed reader holds the round", || {
            reader.holds_round(round)
        });
    }
    let freed = stats(&e);
    assert!(
        freed.bytes_written > paced_at,
        "it was let go after reading again, not before"
    );
    assert!(
        reader.skipped.load(Ordering::Acquire) > 0,
        "it was conflated while it did not read (else this checks nothing)"
    );

    // …and from then on it gets every update of every round, none
    // conflated, and stays unpaced.
    let (messages, skipped) = (
        reader.messages.load(Ordering::Acquire),
        reader.skipped.load(Ordering::Acquire),
    );
    for _ in 0..30 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("the freed reader holds the round", || {
            reader.holds_round(round)
        });
    }
    assert_eq!(
        reader.skipped.load(Ordering::Acquire),
        skipped,
        "updates conflated for a reader that keeps up"
    );
    assert_eq!(
        reader.messages.load(Ordering::Acquire) - messages,
        30 * SYMBOLS as u64,
        "one message per update of the last 30 rounds"
    );
    // The engine's figures as of after the last round (handed off every
    // report interval): still unpaced.
    let want = freed.frames + 30 * SYMBOLS as u64;
    wait_until("the figures of the last round", || stats(&e).frames >= want);
    let after = stats(&e);
    assert!(!after.paced, "paced again: {after:?}");
}

/// Readers on one client thread: more than a crowd of them.
const CLIENT_READERS: usize = 2 * CROWD;

/// A reader with a 64 KiB receive buffer (no auto-tuning): the kernels of
/// readers that stop together fill within a round of each other, so their
/// writes block together, as those of one client thread's readers do.
fn small_buffer_reader(addr: std::net::SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    s.set_recv_buffer_size(64 * 1024).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s
}

fn all_stats(e: &tickfan::runtime::Engine) -> Vec<SubscriberStats> {
    e.subscribers()
        .into_iter()
        .filter(|s| s.connected)
        .collect()
}

#[test]
fn readers_of_one_client_that_stop_together_are_spared_the_pacing_and_get_every_update_once_back() {
    let e = paced_engine();
    let (hold, readers) = client_readers(&e, small_buffer_reader);
    let mut feed = Feed::connect(e.feed_addr());
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();
    let all_hold = |round: u64| readers.iter().all(|r| r.holds_round(round));

    let mut round = 0;
    for _ in 0..20 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("every reader holds the round", || all_hold(round));
    }

    // The client's thread stops: every reader at once, while the feed goes
    // on. Their writes block within a few lags of each other (how soon
    // depends on what each socket still took: on a busy host one filled
    // 100 ms after the others); the ones whose would-be starts come close
    // together are a crowd and are spared, the few paced before it was
    // seen at their next write. A straggler past the stall is paced as any
    // lone reader and let go once it reads again.
    hold.store(true, Ordering::Release);
    let stopped = Instant::now();
    let spared_or_paced = || {
        let st = all_stats(&e);
        let spared = st.iter().filter(|s| s.spared > 0).count();
        (st.iter().all(|s| s.spared > 0 || s.paced), spared)
    };
    loop {
        round += 1;
        send_round(&mut feed, &names, round);
        let (all_caught, spared) = spared_or_paced();
        if all_caught && spared >= CROWD && stopped.elapsed() >= STALL {
            break;
        }
        assert!(
            stopped.elapsed() < DEADLINE,
            "not spared while their client was away: {:?}",
            all_stats(&e)
        );
    }

    // Back: none stays paced, and each holds every round.
    hold.store(false, Ordering::Release);
    loop {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("every resumed reader holds the round", || all_hold(round));
        let st = all_stats(&e);
        if st.iter().all(|s| !s.paced) {
            break;
        }
        assert!(
            stopped.elapsed() < DEADLINE,
            "still paced after their client came back: {st:?}"
        );
    }
    assert!(
        readers
            .iter()
            .any(|r| r.skipped.load(Ordering::Acquire) > 0),
        "conflated while they did not read (else this checks nothing)"
    );

    // From then on every update of every round, none conflated, none paced.
    let before: Vec<(u64, u64)> = readers
        .iter()
        .map(|r| {
            (
                r.messages.load(Ordering::Acquire),
                r.skipped.load(Ordering::Acquire),
            )
        })
        .collect();
    let frames: u64 = all_stats(&e).iter().map(|s| s.frames).sum();
    for _ in 0..30 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("every reader holds the round", || all_hold(round));
    }
    for (r, (m, k)) in readers.iter().zip(before) {
        assert_eq!(r.skipped.load(Ordering::Acquire), k, "conflated after");
        assert_eq!(
            r.messages.load(Ordering::Acquire) - m,
            30 * SYMBOLS as u64,
            "one message per update of the last 30 rounds"
        );
    }
    let want = frames + (30 * SYMBOLS * CLIENT_READERS) as u64;
    wait_until("the figures of the last round", || {
        all_stats(&e).iter().map(|s| s.frames).sum::<u64>() >= want
    });
    let st = all_stats(&e);
    assert!(st.iter().all(|s| !s.paced), "paced again: {st:?}");
}
