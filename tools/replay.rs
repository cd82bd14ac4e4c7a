//! `tickfan replay FILE --to ADDR`: sends a tick file to a feed port.
//!
//! Lines are sent exactly as they are in the file (a malformed line is sent
//! as is; the engine dead-letters it), each ending with `\n`. Pacing is
//! open-loop: tick `i` is due at `start + i / rate`; when the tool falls
//! behind it sends at once rather than stretching the schedule.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use crate::Failure;

/// Flags of `tickfan replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The tick file (CSV, one tick per line).
    pub file: PathBuf,
    /// Feed address of the engine.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9101")]
    pub to: SocketAddr,
    /// Ticks per second (0 = as fast as possible).
    #[arg(long, value_name = "PER_SEC", default_value_t = 0)]
    pub rate: u64,
    /// Times to send the whole file.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub loops: u64,
}

/// What a replay sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Lines sent (all loops).
    pub lines: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Wall time taken.
    pub elapsed: Duration,
    /// Largest lag behind the schedule.
    pub max_behind: Duration,
}

/// Runs the subcommand.
pub fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let s = replay_file(&args.file, args.to, args.rate, args.loops)?;
    eprintln!(
        "replay: sent {} lines ({} bytes) in {:.2} s ({:.0} lines/s), max behind schedule {:.1} ms",
        s.lines,
        s.bytes,
        s.elapsed.as_secs_f64(),
        s.lines as f64 / s.elapsed.as_secs_f64().max(1e-9),
        s.max_behind.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Sends `file` to `to` `loops` times at `rate` lines/s (0 = unpaced).
pub fn replay_file(
    file: &Path,
    to: SocketAddr,
    rate: u64,
    loops: u64,
) -> Result<ReplaySummary, Failure> {
    let open = || {
        std::fs::File::open(file)
            .map_err(|e| Failure::Usage(format!("cannot open {}: {e}", file.display())))
    };
    open()?;
    let stream = TcpStream::connect(to)
        .map_err(|e| Failure::Runtime(format!("cannot connect to {to}: {e}")))?;
    let _ = stream.set_nodelay(true);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stream);
    let start = Instant::now();
    let mut summary = ReplaySummary::default();
    let mut line = Vec::with_capacity(512);
    for _ in 0..loops {
        let mut reader = BufReader::with_capacity(256 * 1024, open()?);
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", file.display())))?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            if rate > 0 {
                let due = start + Duration::from_secs_f64(summary.lines as f64 / rate as f64);
                let now = Instant::now();
                if due > now {
                    out.flush().map_err(send_err)?;
                    std::thread::sleep(due - now);
                } else {
                    summary.max_behind = summary.max_behind.max(now - due);
                }
            }
            out.write_all(&line).map_err(send_err)?;
            summary.lines += 1;
            summary.bytes += line.len() as u64;
        }
    }
    out.flush().map_err(send_err)?;
    summary.elapsed = start.elapsed();
    Ok(summary)
}

fn send_err(e: std::io::Error) -> Failure {
    Failure::Runtime(format!("send failed: {e}"))
}
