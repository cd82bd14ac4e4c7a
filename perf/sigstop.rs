//! `sigstop`: the client of `perf/sigstop.sh` (issue 29, item 4): how fast
//! do subscribers catch up after the engine was stopped (`SIGSTOP`) and
//! continued (`SIGCONT`) under load, and does every order still end once?
//!
//! ```text
//!  feed  F ──ticks, RATE/s round-robin over SYMBOLS symbols──▶ ┐
//!  orders O ──NEW at ORATE/s, replies counted per id─────────▶ ├─ tickfan serve (PID)
//!  readers R×K ◀──PSUBSCRIBE *, every message timed───────────┘
//!  main: WARMUP → kill(PID, SIGSTOP) → STOP → kill(PID, SIGCONT) → AFTER → drain
//! ```
//!
//! Each tick's `ts_ns` field is a counter (1, 2, …), so a message says
//! which tick of its symbol a reader holds; the feed records, per symbol,
//! the last counter whose write returned, and per counter its send time.
//!
//! Figures (monotonic clock):
//! * **catch-up**: from just before `kill(SIGCONT)` until a reader holds,
//!   for every symbol, the last tick whose write had returned by then (the
//!   engine's socket buffers held the rest of what was sent during the
//!   stop); one figure per reader, the report gives the slowest;
//! * **delivered latency** of the messages readers receive (receive time
//!   minus the send time of the tick they carry), in windows: before the
//!   stop, the first second after `SIGCONT`, the next second, and the rest;
//! * **orders**: sent, with exactly one terminal reply, with none, with
//!   more than one.
//!
//! Output: `key=value` lines on stdout. Usage:
//! `sigstop --feed ADDR --sub ADDR --orders ADDR --pid PID [--stop 5s]
//! [--warmup 3s] [--after 5s] [--rate 10000] [--symbols 1000] [--readers 4]
//! [--orate 200]` (built by `cargo build --release --example sigstop`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use tickfan::client::orders::Reply;
use tickfan::client::resp::{as_message, command, read_frame};

#[derive(Debug, Clone)]
struct Args {
    feed: SocketAddr,
    sub: SocketAddr,
    orders: SocketAddr,
    pid: i32,
    stop: Duration,
    warmup: Duration,
    after: Duration,
    rate: u64,
    symbols: usize,
    readers: usize,
    orate: u64,
}

fn fail(msg: &str) -> ! {
    eprintln!("sigstop: {msg}");
    std::process::exit(1)
}

fn parse_args() -> Args {
    let usage = "usage: sigstop --feed ADDR --sub ADDR --orders ADDR --pid PID [--stop 5s] [--warmup 3s] [--after 5s] [--rate N] [--symbols N] [--readers N] [--orate N]";
    let mut it = std::env::args().skip(1);
    let (mut feed, mut sub, mut orders, mut pid) = (None, None, None, None);
    let mut a = Args {
        feed: SocketAddr::from(([127, 0, 0, 1], 0)),
        sub: SocketAddr::from(([127, 0, 0, 1], 0)),
        orders: SocketAddr::from(([127, 0, 0, 1], 0)),
        pid: 0,
        stop: Duration::from_secs(5),
        warmup: Duration::from_secs(3),
        after: Duration::from_secs(5),
        rate: 10_000,
        symbols: 1_000,
        readers: 4,
        orate: 200,
    };
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| fail(usage));
        let n = || v.parse::<u64>().unwrap_or_else(|_| fail(usage));
        let addr = || v.parse::<SocketAddr>().unwrap_or_else(|_| fail(usage));
        let d = || humantime::parse_duration(&v).unwrap_or_else(|_| fail(usage));
        match flag.as_str() {
            "--feed" => feed = Some(addr()),
            "--sub" => sub = Some(addr()),
            "--orders" => orders = Some(addr()),
            "--pid" => pid = Some(n() as i32),
            "--stop" => a.stop = d(),
            "--warmup" => a.warmup = d(),
            "--after" => a.after = d(),
            "--rate" => a.rate = n().max(1),
            "--symbols" => a.symbols = n().max(1) as usize,
            "--readers" => a.readers = n().max(1) as usize,
            "--orate" => a.orate = n(),
            _ => fail(usage),
        }
    }
    a.feed = feed.unwrap_or_else(|| fail(usage));
    a.sub = sub.unwrap_or_else(|| fail(usage));
    a.orders = orders.unwrap_or_else(|| fail(usage));
    a.pid = pid.unwrap_or_else(|| fail(usage));
    a
}

/// What the feed has sent: per counter its send time (ns since `t0`), per
/// symbol the last counter whose write returned.
struct Sent {
    t0: Instant,
    at_ns: Vec<AtomicU64>,
    last: Vec<AtomicU64>,
}

impl Sent {
    fn ns(&self, i: Instant) -> u64 {
        i.saturating_duration_since(self.t0).as_nanos() as u64
    }
}

/// The targets of the catch-up: `SIGCONT`'s time (ns since `Sent::t0`) and,
/// per symbol, the last counter whose write had returned by then.
type Targets = Arc<(u64, Vec<u64>)>;

/// One reader's findings.
struct Reader {
    /// When it held every target (ns since `Sent::t0`).
    caught_up_ns: Option<u64>,
    /// Delivered latency (µs) by window: before the stop, [0,1 s) after
    /// `SIGCONT`, [1,2 s), later.
    lat: [Histogram<u64>; 4],
}

fn symbol_name(s: usize) -> String {
    format!("Q{s:04}")
}

fn read_loop(
    addr: SocketAddr,
    sent: Arc<Sent>,
    armed: Arc<Mutex<Option<Targets>>>,
    stop_ns: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    n: usize,
) -> Reader {
    let s = TcpStream::connect(addr).unwrap_or_else(|e| fail(&format!("subscribe {addr}: {e}")));
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    (&s).write_all(&command(&[b"PSUBSCRIBE", b"Q*"]))
        .expect("psubscribe");
    let mut r = BufReader::with_capacity(1 << 16, s);
    let h = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let mut me = Reader {
        caught_up_ns: None,
        lat: [h(), h(), h(), h()],
    };
    // Newest counter held per symbol, and (once armed) whether it reached
    // its target, with how many have not.
    let mut held = vec![0u64; n];
    let mut reached = vec![false; n];
    let mut targets: Option<Targets> = None;
    let mut to_reach = 0usize;
    while !done.load(Ordering::Acquire) {
        let f = match read_frame(&mut r) {
            Ok(f) => f,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => fail(&format!("reader: {e}")),
        };
        let now = sent.ns(Instant::now());
        let Some((channel, payload)) = as_message(&f) else {
            continue;
        };
        let Some(sym) = std::str::from_utf8(channel)
            .ok()
            .and_then(|c| c.strip_prefix('Q'))
            .and_then(|c| c.parse::<usize>().ok())
            .filter(|&s| s < n)
        else {
            continue;
        };
        let counter: u64 = payload
            .split(|&b| b == b',')
            .next()
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| fail("a payload without a counter"));
        held[sym] = held[sym].max(counter);
        if targets.is_none() {
            // Set just before SIGCONT: the first message after it arms.
            if let Some(t) = armed.lock().expect("targets").clone() {
                to_reach = 0;
                for s in 0..n {
                    reached[s] = held[s] >= t.1[s];
                    to_reach += usize::from(!reached[s]);
                }
                if to_reach == 0 {
                    me.caught_up_ns = Some(now);
                }
                targets = Some(t);
            }
        }
        let window = match &targets {
            None if stop_ns.load(Ordering::Acquire) == 0 => Some(0),
            None => None, // stopped: nothing comes
            Some(t) => Some(match now.saturating_sub(t.0) {
                d if d < 1_000_000_000 => 1,
                d if d < 2_000_000_000 => 2,
                _ => 3,
            }),
        };
        if let Some(w) = window {
            let sent_ns = sent.at_ns[counter as usize % sent.at_ns.len()].load(Ordering::Acquire);
            let _ = me.lat[w].record((now.saturating_sub(sent_ns) / 1_000).max(1));
        }
        if let Some(t) = &targets {
            if to_reach > 0 && !reached[sym] && counter >= t.1[sym] {
                reached[sym] = true;
                to_reach -= 1;
                if to_reach == 0 {
                    me.caught_up_ns = Some(now);
                }
            }
        }
    }
    me
}

fn main() {
    let a = parse_args();
    let n = a.symbols;
    let total = (a.rate as f64 * (a.warmup + a.stop + a.after).as_secs_f64() * 1.5) as usize + 1;
    let sent = Arc::new(Sent {
        t0: Instant::now(),
        at_ns: (0..total).map(|_| AtomicU64::new(0)).collect(),
        last: (0..n).map(|_| AtomicU64::new(0)).collect(),
    });
    let done = Arc::new(AtomicBool::new(false));
    let stop_ns = Arc::new(AtomicU64::new(0));
    let targets: Arc<Mutex<Option<Targets>>> = Arc::new(Mutex::new(None));

    let readers: Vec<_> = (0..a.readers)
        .map(|_| {
            let (sent, targets, stop_ns, done) = (
                Arc::clone(&sent),
                Arc::clone(&targets),
                Arc::clone(&stop_ns),
                Arc::clone(&done),
            );
            let addr = a.sub;
            thread::spawn(move || read_loop(addr, sent, targets, stop_ns, done, n))
        })
        .collect();
    // Let the subscriptions land before the first tick.
    thread::sleep(Duration::from_millis(200));

    // The feed: RATE ticks/s in 1 ms steps, blocking writes (a stopped
    // engine's socket buffers fill; the writes wait).
    let feed_done = Arc::new(AtomicBool::new(false));
    let feed = {
        let (sent, fd, rate, addr) = (Arc::clone(&sent), Arc::clone(&feed_done), a.rate, a.feed);
        thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap_or_else(|e| fail(&format!("feed: {e}")));
            s.set_nodelay(true).expect("nodelay");
            let start = Instant::now();
            let mut counter: u64 = 0;
            let mut buf = Vec::with_capacity(1 << 16);
            let mut batch: Vec<(usize, u64)> = Vec::new();
            while !fd.load(Ordering::Acquire) {
                let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                buf.clear();
                batch.clear();
                while counter < due && batch.len() < 4096 {
                    counter += 1;
                    let sym = (counter as usize - 1) % n;
                    let _ = writeln!(
                        buf,
                        "{counter},{},1.{:05},1.{:05},1000000,1500000",
                        symbol_name(sym),
                        counter % 100_000,
                        counter % 100_000 + 1
                    );
                    batch.push((sym, counter));
                }
                if batch.is_empty() {
                    thread::sleep(Duration::from_micros(500));
                    continue;
                }
                let t = sent.ns(Instant::now());
                for &(_, c) in &batch {
                    sent.at_ns[c as usize % sent.at_ns.len()].store(t, Ordering::Release);
                }
                if let Err(e) = s.write_all(&buf) {
                    fail(&format!("feed write: {e}"));
                }
                for &(sym, c) in &batch {
                    sent.last[sym].store(c, Ordering::Release);
                }
            }
            counter
        })
    };

    // Orders: ORATE/s on one connection; every reply read and counted.
    let ends: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let sent_ids = Arc::new(AtomicU64::new(0));
    let orders_done = Arc::new(AtomicBool::new(false));
    let (order_writer, order_reader) = if a.orate > 0 {
        let s = TcpStream::connect(a.orders).unwrap_or_else(|e| fail(&format!("orders: {e}")));
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        let r = BufReader::new(s.try_clone().expect("clone"));
        let (od, ids, orate) = (Arc::clone(&orders_done), Arc::clone(&sent_ids), a.orate);
        let mut w = s;
        let writer = thread::spawn(move || {
            let start = Instant::now();
            let mut k = 0u64;
            while !od.load(Ordering::Acquire) {
                let due = (start.elapsed().as_secs_f64() * orate as f64) as u64;
                let mut lines = String::new();
                while k < due {
                    lines.push_str(&format!("NEW s{k} EURUSD BUY 1\n"));
                    k += 1;
                }
                if !lines.is_empty() {
                    w.write_all(lines.as_bytes())
                        .unwrap_or_else(|e| fail(&format!("orders write: {e}")));
                    ids.store(k, Ordering::Release);
                }
                thread::sleep(Duration::from_millis(1));
            }
            w
        });
        let (ends2, od) = (Arc::clone(&ends), Arc::clone(&orders_done));
        let reader = thread::spawn(move || {
            let mut r = r;
            let mut line = String::new();
            let mut idle_since = None;
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) => break,
                    Ok(_) => {
                        idle_since = None;
                        let Some(rep) = Reply::parse(line.trim_end()) else {
                            fail(&format!("unparseable reply {line:?}"));
                        };
                        if rep.is_terminal() {
                            *ends2
                                .lock()
                                .expect("ends")
                                .entry(rep.id().unwrap_or("-").to_string())
                                .or_default() += 1;
                        }
                    }
                    Err(_) if !od.load(Ordering::Acquire) => {}
                    Err(_) => {
                        // Idle 3 s after the writer stopped: every reply is in.
                        let t = *idle_since.get_or_insert_with(Instant::now);
                        if t.elapsed() > Duration::from_secs(3) {
                            break;
                        }
                    }
                }
            }
        });
        (Some(writer), Some(reader))
    } else {
        (None, None)
    };

    thread::sleep(a.warmup);
    let stop_at = Instant::now();
    stop_ns.store(sent.ns(stop_at).max(1), Ordering::Release);
    // SAFETY: kill(2) on a pid the script started; no memory involved.
    if unsafe { libc::kill(a.pid, libc::SIGSTOP) } != 0 {
        fail(&format!(
            "kill -STOP {}: {}",
            a.pid,
            std::io::Error::last_os_error()
        ));
    }
    thread::sleep(a.stop);
    let t: Vec<u64> = sent
        .last
        .iter()
        .map(|c| c.load(Ordering::Acquire))
        .collect();
    let cont = Instant::now();
    let cont_ns = sent.ns(cont);
    *targets.lock().expect("targets") = Some(Arc::new((cont_ns, t)));
    // SAFETY: as above.
    if unsafe { libc::kill(a.pid, libc::SIGCONT) } != 0 {
        fail(&format!(
            "kill -CONT {}: {}",
            a.pid,
            std::io::Error::last_os_error()
        ));
    }
    thread::sleep(a.after);
    feed_done.store(true, Ordering::Release);
    let ticks = feed.join().expect("feed");
    orders_done.store(true, Ordering::Release);
    let ow = order_writer.map(|w| w.join().expect("order writer"));
    if let Some(r) = order_reader {
        r.join().expect("order reader");
    }
    drop(ow);
    thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Release);
    let readers: Vec<Reader> = readers
        .into_iter()
        .map(|r| r.join().expect("reader"))
        .collect();

    let stopped = cont.duration_since(stop_at);
    println!(
        "stopped_s={:.3} rate={} symbols={} readers={} ticks_sent={ticks}",
        stopped.as_secs_f64(),
        a.rate,
        n,
        a.readers
    );
    let mut worst = 0u64;
    for (i, r) in readers.iter().enumerate() {
        match r.caught_up_ns {
            Some(t) => {
                let ms = t.saturating_sub(cont_ns) as f64 / 1e6;
                worst = worst.max(t.saturating_sub(cont_ns));
                println!("reader={i} catch_up_ms={ms:.1}");
            }
            None => {
                worst = u64::MAX;
                println!("reader={i} catch_up_ms=never");
            }
        }
    }
    if worst == u64::MAX {
        println!("catch_up_ms=never");
    } else {
        println!("catch_up_ms={:.1}", worst as f64 / 1e6);
    }
    let names = ["before_stop", "first_second", "second_second", "later"];
    for (w, name) in names.iter().enumerate() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
        for r in &readers {
            h.add(&r.lat[w]).expect("same bounds");
        }
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        println!(
            "latency window={name} n={} p50_ms={:.2} p99_ms={:.2} p999_ms={:.2} max_ms={:.2}",
            h.len(),
            ms(0.5),
            ms(0.99),
            ms(0.999),
            h.max() as f64 / 1e3
        );
    }
    let ends = ends.lock().expect("ends");
    let sent_orders = sent_ids.load(Ordering::Acquire);
    let once = (0..sent_orders)
        .filter(|k| ends.get(&format!("s{k}")) == Some(&1))
        .count();
    let twice = ends.values().filter(|&&v| v > 1).count();
    println!(
        "orders sent={sent_orders} ended_once={once} missing={} more_than_once={twice}",
        sent_orders as usize - once - twice
    );
}
