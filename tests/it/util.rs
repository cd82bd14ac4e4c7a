//! Shared helpers: start an engine, feed it, subscribe to it, wait for
//! conditions with generous deadlines (never a sleep as synchronisation).

#![allow(dead_code)] // reason: each test module uses a different subset

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tickfan::config::Config;
use tickfan::protocol::client::{as_message, command, read_frame, Frame};
use tickfan::runtime::Engine;

/// How long any wait may take before the test fails: generous, for a slow shared machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// An engine on ephemeral loopback ports with `f` applied to the config.
pub fn engine_with(f: impl FnOnce(&mut Config)) -> Engine {
    let mut c = Config::ephemeral();
    f(&mut c);
    Engine::start(&c).expect("engine starts")
}

/// An engine with the default test config.
pub fn engine() -> Engine {
    engine_with(|_| {})
}

/// Polls `cond` until it holds; panics with `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A feed connection.
pub struct Feed {
    stream: TcpStream,
}

impl Feed {
    /// Connects to the engine's feed port.
    pub fn connect(addr: SocketAddr) -> Feed {
        let stream = TcpStream::connect(addr).expect("feed connects");
        stream.set_nodelay(true).unwrap();
        Feed { stream }
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("feed write");
    }

    /// Sends lines, each followed by `\n`.
    pub fn lines(&mut self, lines: &[&str]) {
        let mut buf = Vec::new();
        for l in lines {
            buf.extend_from_slice(l.as_bytes());
            buf.push(b'\n');
        }
        self.send(&buf);
    }

    /// The underlying socket.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

/// A tick line with the given fields.
pub fn tick(ts: u64, sym: &str, bid: &str, ask: &str) -> String {
    format!("{ts},{sym},{bid},{ask},1000000,1500000")
}

/// A subscriber connection speaking RESP.
pub struct Sub {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

/// A received data message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    /// `message` or `pmessage`.
    pub kind: String,
    /// The pattern of a `pmessage`.
    pub pattern: Option<String>,
    /// The channel (symbol).
    pub channel: String,
    /// The CSV payload.
    pub payload: String,
}

impl Msg {
    /// Payload field `i` (0 = ts_ns … 5 = ask_qty, 6 = seq, 7 = recv_ns).
    pub fn field(&self, i: usize) -> &str {
        self.payload.split(',').nth(i).expect("payload field")
    }

    /// The update sequence number.
    pub fn seq(&self) -> u64 {
        self.field(6).parse().expect("seq")
    }
}

impl Sub {
    /// Connects to the engine's subscriber port.
    pub fn connect(addr: SocketAddr) -> Sub {
        let s = TcpStream::connect(addr).expect("subscriber connects");
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        Sub {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        }
    }

    /// Sends a command as a RESP array.
    pub fn cmd(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.writer
            .write_all(&command(&a))
            .expect("subscriber write");
    }

    /// Sends raw bytes (inline commands, malformed input).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("subscriber write");
    }

    /// Reads the next frame (fails the test after [`DEADLINE`]).
    pub fn frame(&mut self) -> Frame {
        read_frame(&mut self.reader).expect("a frame before the deadline")
    }

    /// Reads frames until a data message arrives.
    pub fn message(&mut self) -> Msg {
        loop {
            let f = self.frame();
            if let Some(m) = to_msg(&f) {
                return m;
            }
        }
    }

    /// Reads messages until, for every `(symbol, seq)` in `want`, a message
    /// with at least that seq arrived; returns the last message per symbol.
    pub fn until_latest(&mut self, want: &HashMap<String, u64>) -> HashMap<String, Msg> {
        let mut last: HashMap<String, Msg> = HashMap::new();
        while want
            .iter()
            .any(|(s, q)| last.get(s).is_none_or(|m| m.seq() < *q))
        {
            let m = self.message();
            if let Some(prev) = last.get(&m.channel) {
                assert!(
                    m.seq() >= prev.seq(),
                    "older value after newer on {}",
                    m.channel
                );
            }
            last.insert(m.channel.clone(), m);
        }
        last
    }

    /// SUBSCRIBE and read the confirmations.
    pub fn subscribe(&mut self, channels: &[&str]) {
        let mut args = vec!["SUBSCRIBE"];
        args.extend_from_slice(channels);
        self.cmd(&args);
        for _ in channels {
            self.expect_confirmation("subscribe");
        }
    }

    /// PSUBSCRIBE and read the confirmations.
    pub fn psubscribe(&mut self, patterns: &[&str]) {
        let mut args = vec!["PSUBSCRIBE"];
        args.extend_from_slice(patterns);
        self.cmd(&args);
        for _ in patterns {
            self.expect_confirmation("psubscribe");
        }
    }

    fn expect_confirmation(&mut self, kind: &str) {
        match self.frame() {
            Frame::Array(items) => {
                assert_eq!(items[0], Frame::Bulk(Some(kind.as_bytes().to_vec())));
            }
            other => panic!("expected {kind} confirmation, got {other:?}"),
        }
    }

    /// The raw socket (for half-closing, timeouts).
    pub fn socket(&self) -> &TcpStream {
        &self.writer
    }
}

/// A data frame as a [`Msg`], or `None` for confirmations and replies.
pub fn to_msg(f: &Frame) -> Option<Msg> {
    let (channel, payload) = as_message(f)?;
    let Frame::Array(items) = f else { return None };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let (kind, pattern) = match &items[0] {
        Frame::Bulk(Some(k)) if k == b"pmessage" => match &items[1] {
            Frame::Bulk(Some(p)) => ("pmessage".to_string(), Some(text(p))),
            _ => return None,
        },
        _ => ("message".to_string(), None),
    };
    Some(Msg {
        kind,
        pattern,
        channel: text(channel),
        payload: text(payload),
    })
}

/// Path of the shared data folder, if this checkout has it.
pub fn shared_data(file: &str) -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(file);
    p.exists().then_some(p)
}
