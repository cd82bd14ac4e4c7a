//! The subscriber protocol: the same reply frames as a real `redis-server`
//! (differential, byte for byte), and the real `redis-cli` as a client.
//!
//! These tests need Debian's `redis-server` and `redis-tools`; `.ci/run`
//! installs them. Run by hand without them, they say so and pass nothing
//! silently: they panic with the install command.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tickfan::protocol::client::Frame;

use crate::util::{engine, tick, wait_until, Feed, Sub, DEADLINE};

pub(crate) fn require(bin: &str) {
    let found = Command::new(bin).arg("--version").output().is_ok();
    assert!(
        found,
        "{bin} not found: apt-get install redis-server redis-tools (.ci/run does this)"
    );
}

/// A `redis-server` on a free loopback port, killed (by its pid) on drop.
pub(crate) struct RedisServer {
    child: Child,
    pub(crate) port: u16,
}

impl RedisServer {
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server with `extra` configuration flags (e.g. `--requirepass X`).
    pub(crate) fn start_with(extra: &[&str]) -> RedisServer {
        require("redis-server");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let end = Instant::now() + DEADLINE;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < end, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
        RedisServer { child, port }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `script` in one write and returns every byte until the server closes.
fn converse(addr: impl std::net::ToSocketAddrs, script: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(script).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("server closes after QUIT");
    out
}

/// Commands in both RESP and inline form, in and out of subscribed context.
/// Channels here never get a value in tickfan, so no snapshot message
/// appears and the streams must match byte for byte.
const SCRIPT: &[u8] = b"PING\r\n\
PING hello\r\n\
*3\r\n$9\r\nSUBSCRIBE\r\n$5\r\nalpha\r\n$4\r\nbeta\r\n\
SUBSCRIBE alpha\r\n\
psubscribe gam*\r\n\
PING\r\n\
PING there\r\n\
GET x\r\n\
FOO bar baz\r\n\
UNSUBSCRIBE beta\r\n\
UNSUBSCRIBE nothere\r\n\
PUNSUBSCRIBE\r\n\
UNSUBSCRIBE\r\n\
UNSUBSCRIBE\r\n\
PUNSUBSCRIBE\r\n\
SUBSCRIBE\r\n\
PSUBSCRIBE\r\n\
PING a b\r\n\
FOO\r\n\
\r\n\
subscribe delta\r\n\
punsubscribe nope*\r\n\
*1\r\n$4\r\nping\r\n\
QUIT\r\n";

#[test]
fn replies_match_redis_server_byte_for_byte() {
    let redis = RedisServer::start();
    let e = engine();
    let theirs = converse(("127.0.0.1", redis.port), SCRIPT);
    let ours = converse(e.subscriber_addr(), SCRIPT);
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs),
        "tickfan (left) and redis-server (right) differ"
    );
    assert!(theirs.ends_with(b"+OK\r\n"));
}

#[test]
fn malformed_input_gets_an_error_and_the_connection_stays_usable() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.raw(b"*abc\r\n");
    match s.frame() {
        Frame::Error(msg) => assert!(
            String::from_utf8_lossy(&msg).starts_with("ERR Protocol error"),
            "{msg:?}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
    s.raw(b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(s.frame(), Frame::Simple(b"PONG".to_vec()));
    s.cmd(&["NOPE"]);
    assert!(matches!(s.frame(), Frame::Error(_)));
    s.subscribe(&["STILL"]);
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(5, "STILL", "1", "2")]);
    assert_eq!(s.message().seq(), 1);
    let (cmds, errors) = e.counters().snapshot().commands;
    assert!(cmds >= 4 && errors == 2, "commands {cmds}, errors {errors}");
}

/// Spawns a process and yields its stdout lines through a channel (so reads
/// can have a deadline); the process is killed by pid on drop.
struct Spawned {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Spawned {
    fn new(cmd: &mut Command) -> Spawned {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Spawned { child, lines: rx }
    }

    fn line(&self) -> String {
        self.lines
            .recv_timeout(DEADLINE)
            .expect("a line before the deadline")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn redis_cli_subscribes_and_receives_quotes() {
    require("redis-cli");
    let e = engine();
    let port = e.subscriber_addr().port().to_string();
    let cli = Spawned::new(Command::new("redis-cli").args(["-p", &port, "subscribe", "EURUSD"]));
    assert_eq!(cli.line(), "subscribe");
    assert_eq!(cli.line(), "EURUSD");
    assert_eq!(cli.line(), "1");
    wait_until("redis-cli counted as a subscriber", || {
        e.subscribers().iter().any(|s| s.subscriptions == 1)
    });
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(1701388800123456789, "EURUSD", "1.08512", "1.08515")]);
    assert_eq!(cli.line(), "message");
    assert_eq!(cli.line(), "EURUSD");
    let payload = cli.line();
    assert!(
        payload.starts_with("1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,1,"),
        "{payload}"
    );
}

#[test]
fn redis_cli_gets_an_error_for_an_unknown_command_and_pong_for_ping() {
    require("redis-cli");
    let e = engine();
    let port = e.subscriber_addr().port().to_string();
    let out = Command::new("redis-cli")
        .args(["-p", &port, "FROB", "x"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ERR unknown command 'FROB'"), "{text}");
    let out = Command::new("redis-cli")
        .args(["-p", &port, "PING"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG");
}
