//! `order_burst`: the client of `perf/order_burst.sh` (issue 26, item 6):
//! is the order port still answering while one connection floods it?
//!
//! ```text
//!  burst:  A ──25,000 NEW lines in one write──▶ ┐
//!          B ──PING every 1 ms, one at a time──▶ ├─ engine order port
//!          A's replies counted (first answers, terminal replies)
//!
//!  busy:   F ──NEW × fill in one write──▶ queue full (the venue does not answer)
//!          F ──25,000 NEW in one write every 250 ms (all refused)──▶ ┐
//!          C ──NEW one at a time: REJECT … SYSTEM_BUSY; then PING──▶ ├─ every 1 ms
//! ```
//!
//! Each probe is one request and its one reply on its own connection,
//! timed with the monotonic clock from just before the write to the reply
//! line read (a client round trip), into an HDR histogram (ns, 3
//! significant digits). Probes are paced at `--every` and never pipelined:
//! a slow reply delays the next probe (no correction for coordinated
//! omission: each figure is one request's wait, as an order client sees it).
//!
//! `burst`: `--bursts` bursts one after the other, each once the last has
//! had every terminal reply. B's pings are kept in two series by when they
//! were sent: `ping` while a burst is being taken in (from A's write until
//! every order of it has its first answer, `ACK` or `REJECT`), `ping_drain`
//! after that, while the workers execute the accepted orders, until every
//! order has its terminal reply. Each burst is reported as `burst …` (its
//! write, its first and last answers).
//!
//! `busy`: F first sends `--fill` orders at once and reads their first
//! answers (with a venue that does not answer, the small lane's queue is
//! then full and stays full); then, for `--probes` probes, C sends one
//! order at a time (`busy`: every reply must be `REJECT … SYSTEM_BUSY`)
//! and one `PING` after each (`ping_busy`), while F sends a burst of
//! `--burst` orders (0: none) every `--burst-every`, or as soon as the last
//! was answered when that takes longer.
//!
//! The burst connections' replies are counted by their first word, without
//! a parser or an allocation: on a 2-core machine the client runs on one
//! core, and a probe must not wait for the burst's reader.
//!
//! Output: one `key=value` line per series and per burst on stdout; any
//! broken expectation (a reply that is not the one expected, a timeout)
//! ends the run with exit 1 and a line on stderr.
//!
//! Usage:
//! `order_burst burst ADDR [--orders 25000] [--bursts 10] [--every 1ms] [--prefix p]`
//! `order_burst busy ADDR [--fill 10100] [--probes 2000] [--burst 25000]
//! [--burst-every 250ms] [--every 1ms] [--prefix p]`
//! (built by `cargo build --release --example order_burst`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::RejectReason;

/// Longest wait for any reply: past it the run fails instead of hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Args {
    mode: String,
    addr: SocketAddr,
    orders: u64,
    bursts: u64,
    fill: u64,
    probes: u64,
    burst: u64,
    burst_every: Duration,
    every: Duration,
    prefix: String,
}

fn parse_args() -> Args {
    let usage = "usage: order_burst burst|busy ADDR [--orders N] [--bursts N] [--fill N] [--probes N] [--burst N] [--burst-every DURATION] [--every DURATION] [--prefix P]";
    let mut it = std::env::args().skip(1);
    let mode = it.next().unwrap_or_else(|| fail(usage));
    let addr = it
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| fail(usage));
    let mut a = Args {
        mode,
        addr,
        orders: 25_000,
        bursts: 10,
        fill: 10_100,
        probes: 2_000,
        burst: 25_000,
        burst_every: Duration::from_millis(250),
        every: Duration::from_millis(1),
        prefix: "p".into(),
    };
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| fail(usage));
        let n = || v.parse::<u64>().unwrap_or_else(|_| fail(usage));
        let duration = |v: &str| humantime::parse_duration(v).unwrap_or_else(|_| fail(usage));
        match flag.as_str() {
            "--orders" => a.orders = n(),
            "--bursts" => a.bursts = n(),
            "--fill" => a.fill = n(),
            "--probes" => a.probes = n(),
            "--burst" => a.burst = n(),
            "--every" => a.every = duration(&v),
            "--burst-every" => a.burst_every = duration(&v),
            "--prefix" => a.prefix = v,
            _ => fail(usage),
        }
    }
    if !matches!(a.mode.as_str(), "burst" | "busy") {
        fail(usage);
    }
    a
}

fn fail(msg: &str) -> ! {
    eprintln!("order_burst: {msg}");
    std::process::exit(1)
}

fn connect(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(addr).unwrap_or_else(|e| fail(&format!("connect {addr}: {e}")));
    s.set_nodelay(true).expect("TCP_NODELAY");
    s.set_read_timeout(Some(REPLY_TIMEOUT))
        .expect("read timeout");
    let r = BufReader::new(s.try_clone().expect("clone socket"));
    (s, r)
}

fn read_reply(r: &mut BufReader<TcpStream>, line: &mut String) -> Reply {
    line.clear();
    match r.read_line(line) {
        Ok(0) => fail("the engine closed the connection"),
        Ok(_) => {}
        Err(e) => fail(&format!("read: {e}")),
    }
    Reply::parse(line.trim_end()).unwrap_or_else(|| fail(&format!("unparsable reply {line:?}")))
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("histogram bounds")
}

fn print_series(name: &str, h: &Histogram<u64>) {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    if h.is_empty() {
        println!("{name} n=0");
        return;
    }
    println!(
        "{name} n={} p50_us={:.1} p99_us={:.1} p999_us={:.1} max_us={:.1}",
        h.len(),
        us(0.5),
        us(0.99),
        us(0.999),
        h.max() as f64 / 1000.0
    );
}

/// `n` `NEW` lines of one lot, ids `<prefix><i>`, in one buffer.
fn orders(prefix: &str, n: u64) -> Vec<u8> {
    let mut buf = Vec::with_capacity(n as usize * 32);
    for i in 0..n {
        let _ = writeln!(buf, "NEW {prefix}{i} EURUSD BUY 1");
    }
    buf
}

/// What the reader of a burst connection has seen.
#[derive(Debug, Default)]
struct Seen {
    acks: AtomicU64,
    busy: AtomicU64,
    /// ns after the burst's start: last first answer, last terminal reply.
    first_done_ns: AtomicU64,
    terminal_done_ns: AtomicU64,
}

/// Reads the replies of `n` orders from `s` until each has its first
/// answer (`ACK`/`REJECT`) or, with `until_terminal`, its terminal reply.
/// Lines are classified by their first word (and `SYSTEM_BUSY` in a
/// `REJECT`), with no allocation.
fn read_burst(s: &mut TcpStream, n: u64, start: Instant, until_terminal: bool, seen: &Seen) {
    let mut buf = vec![0u8; 1 << 16];
    let (mut filled, mut first, mut terminal) = (0usize, 0u64, 0u64);
    while (until_terminal && terminal < n) || first < n {
        let got = match s.read(&mut buf[filled..]) {
            Ok(0) => fail("the engine closed the burst connection"),
            Ok(k) => k,
            Err(e) => fail(&format!("burst read: {e}")),
        };
        filled += got;
        let mut at = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[at..filled]) {
            let line = &buf[at..at + nl];
            at += nl + 1;
            if line.starts_with(b"ACK ") {
                first += 1;
                seen.acks.fetch_add(1, Ordering::Relaxed);
            } else if line.starts_with(b"REJECT ") {
                first += 1;
                terminal += 1;
                if memchr::memmem::find(line, b" SYSTEM_BUSY ").is_some() {
                    seen.busy.fetch_add(1, Ordering::Relaxed);
                }
            } else if line.starts_with(b"DONE ") || line.starts_with(b"DEAD ") {
                terminal += 1;
            } else if !line.starts_with(b"FILL ") {
                fail(&format!(
                    "unexpected reply on the burst connection: {:?}",
                    String::from_utf8_lossy(line)
                ));
            }
        }
        buf.copy_within(at..filled, 0);
        filled -= at;
        let now = start.elapsed().as_nanos() as u64;
        if first >= n && seen.first_done_ns.load(Ordering::Relaxed) == 0 {
            seen.first_done_ns.store(now, Ordering::Release);
        }
        if terminal >= n {
            seen.terminal_done_ns.store(now, Ordering::Release);
        }
    }
}

/// Sleeps until `next`, then moves it on by `every` (never into the past).
fn pace(next: &mut Instant, every: Duration) {
    let now = Instant::now();
    if *next > now {
        thread::sleep(*next - now);
    }
    *next = (*next + every).max(Instant::now());
}

/// One request and its reply: the round trip in ns.
fn round_trip(
    s: &mut TcpStream,
    r: &mut BufReader<TcpStream>,
    req: &[u8],
    line: &mut String,
    want: impl Fn(&Reply) -> bool,
) -> u64 {
    let t = Instant::now();
    s.write_all(req)
        .unwrap_or_else(|e| fail(&format!("write: {e}")));
    let reply = read_reply(r, line);
    let ns = t.elapsed().as_nanos() as u64;
    if !want(&reply) {
        fail(&format!(
            "unexpected reply {reply:?} to {:?}",
            String::from_utf8_lossy(req)
        ));
    }
    ns.max(1)
}

/// Writes `PING` on a connection read without a buffer and reads `PONG`.
fn ping_raw(s: &mut TcpStream) {
    s.write_all(b"PING\n")
        .unwrap_or_else(|e| fail(&format!("write: {e}")));
    let mut pong = [0u8; 5];
    s.read_exact(&mut pong)
        .unwrap_or_else(|e| fail(&format!("read: {e}")));
    if &pong != b"PONG\n" {
        fail(&format!(
            "expected PONG, read {:?}",
            String::from_utf8_lossy(&pong)
        ));
    }
}

fn burst(a: &Args) {
    let (mut sa, _) = connect(a.addr);
    let (mut sb, mut rb) = connect(a.addr);
    let mut line = String::new();
    // Both connections accepted and answering before the first burst.
    for _ in 0..10 {
        round_trip(&mut sb, &mut rb, b"PING\n", &mut line, |r| {
            *r == Reply::Pong
        });
    }
    ping_raw(&mut sa);
    let (mut intake, mut drain) = (histogram(), histogram());
    let n = a.orders;
    for k in 0..a.bursts {
        let buf = orders(&format!("{}a{k}-", a.prefix), n);
        let seen = Seen::default();
        let mut ra = sa.try_clone().expect("clone socket");
        let start = Instant::now();
        let write_ns = thread::scope(|scope| {
            scope.spawn(|| read_burst(&mut ra, n, start, true, &seen));
            let writer = scope.spawn(|| {
                (&sa)
                    .write_all(&buf)
                    .unwrap_or_else(|e| fail(&format!("burst write: {e}")));
                start.elapsed().as_nanos() as u64
            });
            let mut next = Instant::now();
            while seen.terminal_done_ns.load(Ordering::Acquire) == 0 {
                let in_intake = seen.first_done_ns.load(Ordering::Acquire) == 0;
                let ns = round_trip(&mut sb, &mut rb, b"PING\n", &mut line, |r| {
                    *r == Reply::Pong
                });
                let h = if in_intake { &mut intake } else { &mut drain };
                h.record(ns).expect("in range");
                pace(&mut next, a.every);
            }
            writer.join().expect("writer")
        });
        let ms = |ns: u64| ns as f64 / 1e6;
        println!(
            "burst k={k} orders={n} write_ms={:.1} first_answers_ms={:.1} terminal_ms={:.1} acks={} busy={}",
            ms(write_ns),
            ms(seen.first_done_ns.load(Ordering::Relaxed)),
            ms(seen.terminal_done_ns.load(Ordering::Relaxed)),
            seen.acks.load(Ordering::Relaxed),
            seen.busy.load(Ordering::Relaxed),
        );
    }
    print_series("ping", &intake);
    print_series("ping_drain", &drain);
}

fn busy(a: &Args) {
    let (mut sf, _) = connect(a.addr);
    let (mut sc, mut rc) = connect(a.addr);
    let mut line = String::new();
    round_trip(&mut sc, &mut rc, b"PING\n", &mut line, |r| {
        *r == Reply::Pong
    });
    ping_raw(&mut sf);
    let mut rf = sf.try_clone().expect("clone socket");
    // Fill the queue: the venue does not answer, so the accepted orders stay.
    let fill = Seen::default();
    let t = Instant::now();
    sf.write_all(&orders(&format!("{}f", a.prefix), a.fill))
        .unwrap_or_else(|e| fail(&format!("fill write: {e}")));
    read_burst(&mut rf, a.fill, t, false, &fill);
    println!(
        "fill orders={} first_answers_ms={:.1} acks={} busy={}",
        a.fill,
        fill.first_done_ns.load(Ordering::Relaxed) as f64 / 1e6,
        fill.acks.load(Ordering::Relaxed),
        fill.busy.load(Ordering::Relaxed)
    );
    if fill.busy.load(Ordering::Relaxed) == 0 {
        fail("no order of the fill was refused: the queue is not full");
    }
    // The burst connection: a burst of (refused) orders every `burst_every`.
    let stop = Arc::new(AtomicBool::new(false));
    let loader = (a.burst > 0).then(|| {
        let (stop, n, every, prefix) =
            (Arc::clone(&stop), a.burst, a.burst_every, a.prefix.clone());
        thread::spawn(move || {
            let (mut rounds, mut busy, mut answered_ns) = (0u64, 0u64, histogram());
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let buf = orders(&format!("{prefix}b{rounds}-"), n);
                let seen = Seen::default();
                let t = Instant::now();
                // Written while its replies are read: the engine stops
                // reading a connection whose unread replies pass 1 MiB.
                thread::scope(|scope| {
                    scope.spawn(|| {
                        (&sf)
                            .write_all(&buf)
                            .unwrap_or_else(|e| fail(&format!("burst write: {e}")))
                    });
                    read_burst(&mut rf, n, t, false, &seen);
                });
                busy += seen.busy.load(Ordering::Relaxed);
                answered_ns
                    .record(seen.first_done_ns.load(Ordering::Relaxed).max(1))
                    .expect("in range");
                rounds += 1;
                pace(&mut next, every);
            }
            (rounds, busy, answered_ns)
        })
    });
    let (mut refused, mut pings) = (histogram(), histogram());
    let mut next = Instant::now();
    for i in 0..a.probes {
        let req = format!("NEW {}c{i} EURUSD BUY 1\n", a.prefix);
        let ns = round_trip(&mut sc, &mut rc, req.as_bytes(), &mut line, |r| {
            matches!(
                r,
                Reply::Reject {
                    reason: RejectReason::SystemBusy,
                    ..
                }
            )
        });
        refused.record(ns).expect("in range");
        let ns = round_trip(&mut sc, &mut rc, b"PING\n", &mut line, |r| {
            *r == Reply::Pong
        });
        pings.record(ns).expect("in range");
        pace(&mut next, a.every);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(l) = loader {
        let (rounds, busy, answered) = l.join().expect("loader");
        println!(
            "bursts rounds={rounds} orders_each={} every_ms={} busy={busy} answered_p50_ms={:.1} answered_max_ms={:.1}",
            a.burst,
            a.burst_every.as_millis(),
            answered.value_at_quantile(0.5) as f64 / 1e6,
            answered.max() as f64 / 1e6
        );
    }
    print_series("busy", &refused);
    print_series("ping_busy", &pings);
}

fn main() {
    let a = parse_args();
    match a.mode.as_str() {
        "burst" => burst(&a),
        _ => busy(&a),
    }
}
