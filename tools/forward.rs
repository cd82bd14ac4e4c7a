//! `tickfan forward`: the raw loopback floor of the benchmark. A trivial
//! byte forwarder with no processing: whatever one publisher connection
//! sends is written, unchanged, to every subscriber connection.
//!
//! ```text
//!  replay --send-as pmessage ──bytes──▶ forward ──same bytes──▶ N subscribers
//!                                      (read 64 KiB, write_all to each)
//! ```
//!
//! Measured with the same subscriber client as tickfan and Redis, it shows
//! what two loopback hops and the client cost with nothing in between. To
//! let that client in, each subscriber's first read is answered with one
//! canned `psubscribe *` confirmation; nothing else is parsed. The publisher
//! must therefore send ready-made `pmessage` frames, and subscribers must
//! connect before it does (a subscriber joining mid-stream would start in
//! the middle of a frame). Writes are blocking: one slow subscriber holds
//! up all the others, which is why the benchmark runs the floor only
//! without slow subscribers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;

use tickfan::error::Failure;

/// Flags of `tickfan forward`.
#[derive(Debug, Clone, Args)]
pub struct ForwardArgs {
    /// Where the publisher connects.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9201")]
    pub feed_listen: SocketAddr,
    /// Where subscribers connect.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9202")]
    pub sub_listen: SocketAddr,
    /// Stop after this long (default: on Ctrl-C).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration)]
    pub duration: Option<Duration>,
}

/// The confirmation every subscriber gets, whatever it sent.
const CONFIRMATION: &[u8] = b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n";

/// Runs the subcommand.
pub fn run(args: &ForwardArgs) -> Result<(), Failure> {
    let bind = |a: SocketAddr| {
        TcpListener::bind(a).map_err(|e| Failure::Runtime(format!("cannot listen on {a}: {e}")))
    };
    let feed = bind(args.feed_listen)?;
    let subs_l = bind(args.sub_listen)?;
    let stop = tickfan::sys::signals::stop_flag()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    eprintln!(
        "forward: publisher {} · subscribers {}",
        feed.local_addr()
            .map_err(|e| Failure::Runtime(e.to_string()))?,
        subs_l
            .local_addr()
            .map_err(|e| Failure::Runtime(e.to_string()))?
    );
    let subs: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    {
        let subs = Arc::clone(&subs);
        std::thread::spawn(move || {
            for s in subs_l.incoming().flatten() {
                let mut s = s;
                let _ = s.set_nodelay(true);
                let mut first = [0u8; 1024];
                if s.read(&mut first).is_ok_and(|n| n > 0) && s.write_all(CONFIRMATION).is_ok() {
                    subs.lock().expect("not poisoned").push(s);
                }
            }
        });
    }
    let deadline = args.duration.map(|d| Instant::now() + d);
    let (bytes, publishers) = forward(&feed, &subs, &stop, deadline)?;
    eprintln!("forward: {bytes} bytes forwarded from {publishers} publisher connection(s)");
    Ok(())
}

/// Accepts publisher connections one at a time and copies their bytes to
/// every subscriber until `stop` or `deadline`. Returns bytes read and
/// publishers served.
fn forward(
    feed: &TcpListener,
    subs: &Mutex<Vec<TcpStream>>,
    stop: &AtomicBool,
    deadline: Option<Instant>,
) -> Result<(u64, u64), Failure> {
    feed.set_nonblocking(true)
        .map_err(|e| Failure::Runtime(format!("socket: {e}")))?;
    let over = || stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
    let mut buf = vec![0u8; 64 * 1024];
    let (mut bytes, mut publishers) = (0u64, 0u64);
    while !over() {
        let mut p = match feed.accept() {
            Ok((p, _)) => p,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return Err(Failure::Runtime(format!("accept: {e}"))),
        };
        publishers += 1;
        let _ = p.set_nonblocking(false);
        let _ = p.set_read_timeout(Some(Duration::from_millis(100)));
        while !over() {
            let n = match p.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(_) => break,
            };
            bytes += n as u64;
            let mut s = subs.lock().expect("not poisoned");
            s.retain_mut(|sub| sub.write_all(&buf[..n]).is_ok());
        }
    }
    Ok((bytes, publishers))
}
