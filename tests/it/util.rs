//! Shared helpers: start an engine, feed it, subscribe to it, wait for
//! conditions with generous deadlines (never a sleep as synchronisation).

#![allow(dead_code)] // reason: each test module uses a different subset

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tickfan::client::resp::{as_message, command, read_frame, read_raw_frame, Frame};
use tickfan::config::Config;
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
        stream.set_write_timeout(Some(DEADLINE)).unwrap();
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

/// Sends round `round`: one tick of each symbol in `names`, its timestamp
/// (and so its sequence) the round, its bid `1.<round>`.
pub fn send_round(feed: &mut Feed, names: &[String], round: u64) {
    let lines: Vec<String> = names
        .iter()
        .map(|s| tick(round, s, &format!("1.{round:05}"), "9.99999"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
}

/// The update sequence number (field 6) of a message payload.
pub fn payload_seq(payload: &[u8]) -> u64 {
    std::str::from_utf8(payload)
        .expect("UTF-8 payload")
        .split(',')
        .nth(6)
        .expect("a seq field")
        .parse()
        .expect("a numeric seq")
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
        s.set_write_timeout(Some(DEADLINE)).unwrap();
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

    /// Reads the next frame as its exact bytes (fails the test after [`DEADLINE`]).
    pub fn raw_frame(&mut self) -> Vec<u8> {
        read_raw_frame(&mut self.reader).expect("a frame before the deadline")
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

    /// Reads until it holds round `round` of every symbol in `names` (see
    /// [`send_round`]); returns the last message per symbol.
    pub fn until_round(&mut self, names: &[String], round: u64) -> HashMap<String, Msg> {
        let want: HashMap<String, u64> = names.iter().map(|s| (s.clone(), round)).collect();
        self.until_latest(&want)
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
            Frame::Array(items) | Frame::Push(items) => {
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
    let (Frame::Array(items) | Frame::Push(items)) = f else {
        return None;
    };
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

// ---- order path -------------------------------------------------------------

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tickfan::bridge::{Bridge, BridgeOrder, Outcome, VenueFill};
use tickfan::client::orders::Reply;
use tickfan::model::units::{Amount, Lots, Price};
use tickfan::order::journal::files::{JournalFile, JournalFiles, WrapFiles};
use tickfan::retry::SimClock;
use tickfan::runtime::Injected;

/// The configuration of an engine on a simulated clock. A bridge call's
/// lease runs on that clock too, and the tests move it in big steps while
/// an answered call may still be on its way back through a busy machine:
/// the lease is as long as allowed (1 h) so only a test of leases (which
/// sets its own) ever sees one expire.
pub fn sim_config() -> Config {
    let mut c = Config::ephemeral();
    c.order.bridge_lease = std::time::Duration::from_secs(3600);
    c
}

/// An engine whose order path runs on `clock` with `bridge` as its only venue.
pub fn order_engine(
    clock: &SimClock,
    bridge: &Arc<ScriptBridge>,
    f: impl FnOnce(&mut Config),
) -> Engine {
    let mut c = sim_config();
    c.order.workers = 1;
    f(&mut c);
    Engine::start_with(
        &c,
        Injected {
            clock: Some(Arc::new(clock.clone())),
            bridges: Some(vec![Arc::clone(bridge) as Arc<dyn Bridge>]),
            ..Default::default()
        },
    )
    .expect("engine starts")
}

/// An engine whose order path runs on `clock` with `bridges` side by side.
pub fn bridges_engine(
    clock: &SimClock,
    bridges: Vec<Arc<dyn Bridge>>,
    f: impl FnOnce(&mut Config),
) -> Engine {
    let mut c = sim_config();
    f(&mut c);
    Engine::start_with(
        &c,
        Injected {
            clock: Some(Arc::new(clock.clone())),
            bridges: Some(bridges),
            ..Default::default()
        },
    )
    .expect("engine starts")
}

/// One call a [`ScriptBridge`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Order id.
    pub id: String,
    /// Attempt number.
    pub attempt: u32,
    /// Engine clock at the call.
    pub at_ns: u64,
}

/// A venue whose behaviour the symbol chooses:
/// `T<k>` fails transiently on the first k attempts, then fills;
/// `TX` always fails transiently; `PERM` is refused permanently (unless
/// `accept_all`); `GATE` blocks until [`open_gate`](Self::open_gate);
/// anything else fills in two fills at 1.10000.
#[derive(Debug, Default)]
pub struct ScriptBridge {
    calls: Mutex<Vec<Call>>,
    gate: Mutex<bool>,
    gate_cv: Condvar,
    /// Fill everything (the cause of a permanent failure was fixed).
    pub accept_all: AtomicBool,
}

impl ScriptBridge {
    /// A new bridge, gate closed.
    pub fn new() -> Arc<Self> {
        Arc::new(ScriptBridge::default())
    }

    /// Lets `GATE` orders through.
    pub fn open_gate(&self) {
        *self.gate.lock().unwrap() = true;
        self.gate_cv.notify_all();
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Calls for one order.
    pub fn calls_for(&self, id: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.id == id).collect()
    }

    /// Calls for the chunks of a large order (`<id>.c<k>`).
    pub fn chunk_calls(&self, id: &str) -> Vec<Call> {
        let prefix = format!("{id}.c");
        self.calls()
            .into_iter()
            .filter(|c| c.id.starts_with(&prefix))
            .collect()
    }

    fn fills(qty: Lots) -> Vec<VenueFill> {
        let price = Price(110_000);
        let first = Lots(qty.0 / 2);
        let mut v = Vec::new();
        if first.0 > 0 {
            v.push(VenueFill {
                fill_no: 1,
                cum_lots: first,
                cum_amount: Amount::of(first, price),
                price,
            });
        }
        v.push(VenueFill {
            fill_no: v.len() as u32 + 1,
            cum_lots: qty,
            cum_amount: Amount::of(qty, price),
            price,
        });
        v
    }
}

impl Bridge for ScriptBridge {
    fn name(&self) -> &str {
        "script"
    }

    fn execute(&self, o: &BridgeOrder<'_>, now_ns: u64) -> Outcome {
        self.calls.lock().unwrap().push(Call {
            id: o.order_id.to_string(),
            attempt: o.attempt,
            at_ns: now_ns,
        });
        if self.accept_all.load(Ordering::Relaxed) {
            return Outcome::Executed(Self::fills(o.qty));
        }
        match o.symbol {
            "TX" => Outcome::Transient("unavailable".into()),
            "PERM" => Outcome::Permanent("unknown_instrument".into()),
            "GATE" => {
                let mut open = self.gate.lock().unwrap();
                while !*open {
                    open = self.gate_cv.wait(open).unwrap();
                }
                Outcome::Executed(Self::fills(o.qty))
            }
            s if s.starts_with('T') && s[1..].parse::<u32>().is_ok() => {
                let k: u32 = s[1..].parse().unwrap();
                if o.attempt <= k {
                    Outcome::Transient("unavailable".into())
                } else {
                    Outcome::Executed(Self::fills(o.qty))
                }
            }
            _ => Outcome::Executed(Self::fills(o.qty)),
        }
    }
}

/// Opens a [`ScriptBridge`]'s gate when dropped, so a failing test does not
/// leave a worker blocked (and the engine's shutdown waiting for it).
pub struct OpenOnDrop(pub Arc<ScriptBridge>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

/// An order-protocol client.
pub struct OrderClient {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl OrderClient {
    /// Connects to the engine's order port.
    pub fn connect(addr: SocketAddr) -> OrderClient {
        let s = TcpStream::connect(addr).expect("order client connects");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        // A write the engine never drains fails the test instead of hanging it.
        s.set_write_timeout(Some(DEADLINE)).unwrap();
        OrderClient {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        }
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("order write");
    }

    /// Sends one line (adds `\n`).
    pub fn line(&mut self, l: &str) {
        self.send(format!("{l}\n").as_bytes());
    }

    /// Sends `NEW id symbol BUY qty`.
    pub fn new_order(&mut self, id: &str, symbol: &str, qty: &str) {
        self.line(&format!("NEW {id} {symbol} BUY {qty}"));
    }

    /// Sends `NEW id symbol BUY qty` and asserts the next reply is its `ACK`.
    pub fn accepted(&mut self, id: &str, symbol: &str, qty: &str) {
        self.new_order(id, symbol, qty);
        assert_eq!(self.reply(), Reply::Ack { id: id.into() });
    }

    /// The next reply line, raw (fails the test after [`DEADLINE`]).
    pub fn raw_reply(&mut self) -> String {
        let mut s = String::new();
        let n = self
            .reader
            .read_line(&mut s)
            .expect("a reply before the deadline");
        assert!(n > 0, "connection closed while waiting for a reply");
        s.trim_end().to_string()
    }

    /// The next reply, parsed.
    pub fn reply(&mut self) -> Reply {
        let l = self.raw_reply();
        Reply::parse(&l).unwrap_or_else(|| panic!("unparseable reply: {l}"))
    }

    /// Reads replies until the terminal one of `id`; returns all of `id`'s
    /// replies read on the way (other orders' replies are skipped).
    pub fn until_terminal(&mut self, id: &str) -> Vec<Reply> {
        let mut got = Vec::new();
        loop {
            let r = self.reply();
            if r.id() == Some(id) {
                let t = r.is_terminal();
                got.push(r);
                if t {
                    return got;
                }
            }
        }
    }

    /// Every reply until the engine closes the connection (e.g. at its stop).
    pub fn until_closed(&mut self) -> Vec<Reply> {
        let mut got = Vec::new();
        loop {
            let mut s = String::new();
            if self
                .reader
                .read_line(&mut s)
                .expect("replies before the deadline")
                == 0
            {
                return got;
            }
            let l = s.trim_end();
            got.push(Reply::parse(l).unwrap_or_else(|| panic!("unparseable reply: {l}")));
        }
    }

    /// The raw socket.
    pub fn socket(&self) -> &TcpStream {
        &self.writer
    }
}

/// Advances `clock` by `step_ms` each poll until `cond` holds (fails after [`DEADLINE`]).
pub fn advance_until(clock: &SimClock, step_ms: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        clock.advance_ms(step_ms);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A child process killed by its pid when dropped (if still running).
pub struct Spawned(pub Option<std::process::Child>);

/// The environment variable that turns the order journal off in a spawned
/// `tickfan serve` (see [`scratch_env`]; a test of the journal spawns
/// without it, with `--data-dir` in a temporary directory).
pub const NO_JOURNAL: (&str, &str) = ("TICKFAN_NO_JOURNAL", "true");

/// The environment of a spawned `tickfan serve` that writes nothing into
/// the working tree and shares its data directory with no other engine
/// (each engine locks its own): the journal off ([`NO_JOURNAL`]) and
/// `TICKFAN_DATA_DIR` (where the dead-letter file goes by default) a new
/// directory under cargo's scratch space for integration tests
/// (`CARGO_TARGET_TMPDIR`, emptied by `cargo clean`). A `--data-dir` on
/// the command line still wins.
pub fn scratch_env() -> [(&'static str, String); 2] {
    let dir = tempfile::Builder::new()
        .prefix("data-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a scratch data directory")
        .keep();
    [
        (NO_JOURNAL.0, NO_JOURNAL.1.to_owned()),
        ("TICKFAN_DATA_DIR", dir.display().to_string()),
    ]
}

/// Every listener of `serve` on an ephemeral loopback port.
pub const EPHEMERAL_PORTS: [&str; 8] = [
    "--feed-listen",
    "127.0.0.1:0",
    "--sub-listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--order-listen",
    "127.0.0.1:0",
];

/// Takes `child`'s piped stdout and yields its lines through a channel, so
/// every read can have a deadline (`recv_timeout`).
pub fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let out = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Spawns the `tickfan` binary with `args` and reads its stderr until a
/// line containing `marker`; returns the child and that line. The rest of
/// stderr is drained so the child never blocks on it.
pub fn spawn_until(args: &[&str], marker: &str) -> (Spawned, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(args)
        .envs(crate::util::scratch_env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let (mut err, line) = stderr_until(&mut child, marker);
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (Spawned(Some(child)), line)
}

/// Reads a spawned process's stderr until a line contains `needle` (fails
/// the test if the process ends first); returns the reader for the rest.
pub fn wait_for_stderr(
    child: &mut std::process::Child,
    needle: &str,
) -> std::io::BufReader<std::process::ChildStderr> {
    stderr_until(child, needle).0
}

/// Reads `child`'s stderr up to and including the first line containing
/// `needle`; returns the reader (positioned after it) and that line.
fn stderr_until(
    child: &mut std::process::Child,
    needle: &str,
) -> (std::io::BufReader<std::process::ChildStderr>, String) {
    use std::io::BufRead;
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the process ended before printing {needle:?}"
        );
    }
    (err, line)
}

/// How a [`TestDisk`] answers writes and syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskMode {
    /// Every write and sync goes to the real file.
    Room,
    /// The disk is full: a write puts half its bytes into the file, then
    /// fails `ENOSPC` (a torn record left behind for the engine to cut).
    FullOnWrite,
    /// The disk is full at the sync: writes go into the file, the
    /// `fdatasync` fails `ENOSPC` (whole records whose sync failed).
    FullOnSync,
}

/// The engine's journal disk under a test's control: its syncs can be
/// held on a gate (a stalled `fdatasync`), and its writes or syncs can fail
/// with `ENOSPC` (a full file system), over the real segment files in the
/// data directory. Hand it to the engine with [`TestDisk::files`].
#[derive(Debug)]
pub struct TestDisk {
    held: Mutex<bool>,
    released: Condvar,
    /// Syncs waiting at the gate now.
    pub waiting: std::sync::atomic::AtomicUsize,
    mode: Mutex<DiskMode>,
    /// Writes and syncs that failed `ENOSPC` so far.
    pub failures: std::sync::atomic::AtomicUsize,
}

impl Default for TestDisk {
    fn default() -> Self {
        TestDisk {
            held: Mutex::new(false),
            released: Condvar::new(),
            waiting: Default::default(),
            mode: Mutex::new(DiskMode::Room),
            failures: Default::default(),
        }
    }
}

impl TestDisk {
    /// A disk with room whose syncs pass.
    pub fn new() -> Arc<Self> {
        Arc::new(TestDisk::default())
    }

    /// Holds (or lets go) every sync at the gate.
    pub fn hold_syncs(&self, held: bool) {
        *self.held.lock().unwrap() = held;
        self.released.notify_all();
    }

    /// Fills the disk (or frees it).
    pub fn set_mode(&self, mode: DiskMode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn mode(&self) -> DiskMode {
        *self.mode.lock().unwrap()
    }

    fn pass(&self) {
        let mut held = self.held.lock().unwrap();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while *held {
            held = self.released.wait(held).unwrap();
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    fn full(&self) -> std::io::Error {
        self.failures.fetch_add(1, Ordering::SeqCst);
        std::io::Error::from_raw_os_error(28) // ENOSPC
    }

    /// The engine's journal files, each segment's writes and syncs through
    /// this disk.
    pub fn files(self: &Arc<Self>) -> WrapFiles {
        let disk = Arc::clone(self);
        WrapFiles(Box::new(move |inner| Box::new(TestFiles { inner, disk })))
    }
}

/// Opens a [`TestDisk`]'s gate and frees it when dropped, so a failing test
/// does not leave the journal thread (and the engine's stop) waiting.
pub struct ReleaseOnDrop(pub Arc<TestDisk>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.set_mode(DiskMode::Room);
        self.0.hold_syncs(false);
    }
}

struct TestFiles {
    inner: Box<dyn JournalFiles>,
    disk: Arc<TestDisk>,
}

impl JournalFiles for TestFiles {
    fn create(&mut self, segment: u64) -> std::io::Result<Box<dyn JournalFile>> {
        let inner = self.inner.create(segment)?;
        Ok(Box::new(TestFile {
            inner,
            disk: Arc::clone(&self.disk),
        }))
    }

    fn remove(&mut self, segment: u64) -> std::io::Result<()> {
        self.inner.remove(segment)
    }
}

struct TestFile {
    inner: Box<dyn JournalFile>,
    disk: Arc<TestDisk>,
}

impl JournalFile for TestFile {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.disk.mode() == DiskMode::FullOnWrite {
            self.inner.write_all(&buf[..buf.len() / 2])?;
            return Err(self.disk.full());
        }
        self.inner.write_all(buf)
    }

    fn sync_data(&mut self) -> std::io::Result<()> {
        self.disk.pass();
        if self.disk.mode() == DiskMode::FullOnSync {
            return Err(self.disk.full());
        }
        self.inner.sync_data()
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.inner.truncate(len)
    }
}
