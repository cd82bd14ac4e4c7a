//! The subscriber protocol: the same reply frames as a real `redis-server`
//! (differential, byte for byte, in RESP2 and in RESP3 after `HELLO 3`,
//! connection-setup commands included), and the real `redis-cli` as a client.
//!
//! These tests need Debian's `redis-server` and `redis-tools`; `.ci/run`
//! installs them. Run by hand without them, they say so and pass nothing
//! silently: they panic with the install command.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tickfan::auth::Token;
use tickfan::client::resp::{command, Frame};

use crate::util::{engine, engine_with, stdout_lines, tick, wait_until, Feed, Sub, DEADLINE};

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

/// A script of multibulk commands.
fn script(cmds: &[&[&str]]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in cmds {
        let a: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
        out.extend_from_slice(&command(&a));
    }
    out
}

/// Connection ids differ between two servers: `HELLO`'s `id` becomes `N`.
fn normalize_ids(bytes: &[u8]) -> String {
    const KEY: &[u8] = b"$2\r\nid\r\n:";
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(KEY) {
            out.extend_from_slice(KEY);
            out.push(b'N');
            i += KEY.len();
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `script` against a real `redis-server` and tickfan; the streams must
/// match byte for byte once connection ids are set aside.
fn assert_same_as_redis(script: &[u8]) {
    let redis = RedisServer::start();
    let e = engine();
    let theirs = converse(("127.0.0.1", redis.port), script);
    let ours = converse(e.subscriber_addr(), script);
    assert_eq!(
        normalize_ids(&ours),
        normalize_ids(&theirs),
        "tickfan (left) and redis-server (right) differ"
    );
    assert!(theirs.ends_with(b"+OK\r\n"));
}

/// Connection setup over RESP2, as stock clients send it, including every
/// error path; then the same commands refused in the subscribed context.
#[test]
fn setup_commands_match_redis_server_byte_for_byte() {
    assert_same_as_redis(&script(&[
        &["HELLO"],
        &["HELLO", "2"],
        &["HELLO", "4"],
        &["HELLO", "x"],
        &["HELLO", "3", "FOO"],
        &["HELLO", "2", "AUTH", "default"],
        &["HELLO", "3", "SETNAME", "a b"],
        &["HELLO", "3", "AUTH", "bob", "pw"],
        &["HELLO", "2", "AUTH", "default", "anything", "SETNAME", "n1"],
        &["CLIENT", "GETNAME"],
        &["client", "setname", "ab"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", ""],
        &["CLIENT", "GETNAME"],
        &["CLIENT"],
        &["CLIENT", "FOO"],
        &["CLIENT", "GETNAME", "x"],
        &["CLIENT", "SETNAME", "x", "y"],
        &["CLIENT", "SETNAME", "new\nline"],
        &["CLIENT", "LIST", "foo"],
        &["CLIENT", "LIST", "TYPE", "foo"],
        &["CLIENT", "LIST", "ID", "x"],
        &["CLIENT", "LIST", "TYPE", "master"],
        &["CLIENT", "LIST", "TYPE", "pubsub"],
        &["SELECT", "0"],
        &["SELECT", "15"],
        &["SELECT", "16"],
        &["SELECT", "-1"],
        &["SELECT", "x"],
        &["SELECT", "99999999999"],
        &["SELECT", "+1"],
        &["SELECT", "01"],
        &["SELECT"],
        &["ECHO", "hi"],
        &["ECHO"],
        &["ECHO", "a", "b"],
        &["INFO", "nosuch"],
        &["SUBSCRIBE", "s1"],
        &["HELLO", "3"],
        &["CLIENT", "ID"],
        &["CLIENT", "SETNAME", "x"],
        &["SELECT", "1"],
        &["INFO"],
        &["ECHO", "x"],
        &["UNSUBSCRIBE"],
        &["QUIT"],
    ]));
}

/// The pub/sub session of the RESP2 script above and the setup commands,
/// after `HELLO 3`: push frames, `_` nulls, `+PONG` while subscribed,
/// setup commands allowed while subscribed, `HELLO 2` back while
/// subscribed, then `RESET`.
#[test]
fn resp3_replies_match_redis_server_byte_for_byte() {
    assert_same_as_redis(&script(&[
        &["HELLO", "3"],
        &["PING"],
        &["PING", "hello"],
        &["SUBSCRIBE", "alpha", "beta"],
        &["SUBSCRIBE", "alpha"],
        &["psubscribe", "gam*"],
        &["PING"],
        &["PING", "there"],
        &["ECHO", "hi"],
        &["FOO", "bar", "baz"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", "tf-1"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", "a b"],
        &["SELECT", "1"],
        &["SELECT", "16"],
        &["SELECT", "x"],
        &["INFO", "nosuch"],
        &["HELLO", "4"],
        &["HELLO"],
        &["UNSUBSCRIBE", "beta"],
        &["UNSUBSCRIBE", "nothere"],
        &["PUNSUBSCRIBE"],
        &["UNSUBSCRIBE"],
        &["UNSUBSCRIBE"],
        &["PUNSUBSCRIBE"],
        &["SUBSCRIBE"],
        &["PING", "a", "b"],
        &["CLIENT", "NOPE"],
        &["HELLO", "2"],
        &["PING"],
        &["HELLO", "3", "SETNAME", "x"],
        &["SUBSCRIBE", "omega"],
        &["HELLO", "2"],
        &["PING"],
        &["HELLO", "3"],
        &["RESET"],
        &["PING"],
        &["CLIENT", "GETNAME"],
        &["HELLO"],
        &["QUIT"],
    ]));
}

/// Reads the frames answering `HELLO <proto>`, `SUBSCRIBE <channel>` and
/// `PSUBSCRIBE <pattern>`.
fn setup_subscriber(s: &mut Sub, proto: &str, channel: &str, pattern: &str) -> Vec<u8> {
    s.cmd(&["HELLO", proto]);
    let mut out = s.raw_frame();
    s.cmd(&["SUBSCRIBE", channel]);
    out.extend(s.raw_frame());
    s.cmd(&["PSUBSCRIBE", pattern]);
    out.extend(s.raw_frame());
    out
}

/// A tick's `message` and `pmessage` frames are what redis-server sends for
/// `PUBLISH` of the same payload, in RESP2 and in RESP3 (push frames), in
/// the same order; a snapshot on subscribing is framed the same way.
#[test]
fn message_frames_match_redis_publish_in_resp2_and_resp3() {
    let redis = RedisServer::start();
    let e = engine();
    let mut feed = Feed::connect(e.feed_addr());
    for (n, proto, sym, pat) in [(0, "2", "AAA1", "AAA*"), (1, "3", "BBB1", "BBB*")] {
        let mut ours = Sub::connect(e.subscriber_addr());
        let mut theirs = Sub::connect(([127, 0, 0, 1], redis.port).into());
        let (a, b) = (
            setup_subscriber(&mut ours, proto, sym, pat),
            setup_subscriber(&mut theirs, proto, sym, pat),
        );
        assert_eq!(normalize_ids(&a), normalize_ids(&b), "RESP{proto} setup");
        // Live: the feed's tick, then the same payload published to Redis.
        feed.lines(&[&tick(10 + n, sym, "1.08512", "1.08515")]);
        let live = [ours.raw_frame(), ours.raw_frame()];
        let Some((_, payload)) = tickfan::client::resp::as_message(
            &tickfan::client::resp::read_frame(&mut &live[0][..]).unwrap(),
        )
        .map(|(c, p)| (c.to_vec(), p.to_vec())) else {
            panic!("not a message: {:?}", String::from_utf8_lossy(&live[0]));
        };
        let mut publisher = TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
        publisher
            .write_all(&command(&[b"PUBLISH", sym.as_bytes(), &payload]))
            .unwrap();
        let want = [theirs.raw_frame(), theirs.raw_frame()];
        let text = |f: &[Vec<u8>]| {
            f.iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            text(&live),
            text(&want),
            "RESP{proto} live frames: tickfan (left), redis (right)"
        );
        let first = if proto == "3" { b'>' } else { b'*' };
        assert!(live.iter().all(|f| f[0] == first), "{:?}", text(&live));
        // Snapshot: a new subscriber gets the same frame at once.
        let mut late = Sub::connect(e.subscriber_addr());
        late.cmd(&["HELLO", proto]);
        late.raw_frame();
        late.cmd(&["SUBSCRIBE", sym]);
        late.raw_frame();
        assert_eq!(
            text(&[late.raw_frame()]),
            text(&want[..1]),
            "RESP{proto} snapshot"
        );
    }
}

/// `INFO` and `CLIENT INFO|LIST|ID` carry this engine's own figures in
/// Redis's shapes: a bulk string in RESP2, a `txt` verbatim string in RESP3.
#[test]
fn info_and_client_info_report_this_engine_in_redis_shapes() {
    let e = engine();
    let port = e.subscriber_addr().port();
    let mut s = Sub::connect(e.subscriber_addr());
    s.cmd(&["INFO"]);
    let Frame::Bulk(Some(info)) = s.frame() else {
        panic!("INFO is a bulk string in RESP2")
    };
    let info = String::from_utf8(info).unwrap();
    assert!(
        info.starts_with("# Server\r\nredis_version:7.0.15\r\n"),
        "{info}"
    );
    for line in [
        format!("tickfan_version:{}", env!("CARGO_PKG_VERSION")),
        "redis_mode:standalone".into(),
        format!("process_id:{}", std::process::id()),
        format!("tcp_port:{port}"),
        "connected_clients:1".into(),
        "loading:0".into(),
    ] {
        assert!(
            info.split("\r\n").any(|l| l == line),
            "{line} missing in {info}"
        );
    }
    assert!(info.contains("\r\nuptime_in_seconds:"), "{info}");
    s.cmd(&["INFO", "SERVER"]);
    let Frame::Bulk(Some(server)) = s.frame() else {
        panic!("INFO SERVER")
    };
    assert!(!String::from_utf8_lossy(&server).contains("# Clients"));
    s.cmd(&["HELLO", "3", "SETNAME", "desk-7"]);
    let Frame::Map(hello) = s.frame() else {
        panic!("HELLO 3 is a map")
    };
    let id = hello
        .iter()
        .find_map(|(k, v)| (k == &Frame::Bulk(Some(b"id".to_vec()))).then(|| v.clone()))
        .expect("id");
    s.cmd(&["CLIENT", "ID"]);
    assert_eq!(s.frame(), id);
    let Frame::Integer(id) = id else {
        panic!("id is an integer")
    };
    s.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "tickfan-test"]);
    assert_eq!(s.frame(), Frame::Simple(b"OK".to_vec()));
    s.cmd(&["CLIENT", "SETINFO", "lib-ver", "1.2.3"]);
    assert_eq!(s.frame(), Frame::Simple(b"OK".to_vec()));
    s.cmd(&["CLIENT", "SETINFO", "color", "red"]);
    assert_eq!(
        s.frame(),
        Frame::Error(b"ERR Unrecognized option 'color'".to_vec())
    );
    s.cmd(&["SELECT", "3"]);
    assert_eq!(s.frame(), Frame::Simple(b"OK".to_vec()));
    s.subscribe(&["EURUSD"]);
    for sub in ["INFO", "LIST"] {
        s.cmd(&["CLIENT", sub]);
        let Frame::Verbatim(format, line) = s.frame() else {
            panic!("CLIENT {sub} is verbatim text in RESP3")
        };
        assert_eq!(format, b"txt");
        let line = String::from_utf8(line).unwrap();
        for field in [
            format!("id={id} "),
            " name=desk-7 ".into(),
            " flags=P ".into(),
            " db=3 ".into(),
            " sub=1 ".into(),
            format!(" laddr=127.0.0.1:{port} "),
            " resp=3 ".into(),
            " lib-name=tickfan-test lib-ver=1.2.3\n".into(),
        ] {
            assert!(line.contains(&field), "{field:?} missing in {line:?}");
        }
    }
    s.cmd(&["INFO", "clients"]);
    let Frame::Verbatim(_, text) = s.frame() else {
        panic!("INFO is verbatim text in RESP3")
    };
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.starts_with("# Clients\r\nconnected_clients:1\r\nmaxclients:")
            && text.ends_with("\r\n"),
        "{text:?}"
    );
    wait_until("the client name in the subscriber figures", || {
        e.subscribers()
            .iter()
            .any(|st| st.client_name.as_deref() == Some("desk-7"))
    });
}

/// `HELLO … AUTH default <token>` authenticates with the engine's token, as
/// `AUTH` does: before it, `HELLO` and every other command are refused; a
/// wrong token is refused and the connection closed.
#[test]
fn hello_auth_uses_the_engine_token() {
    const TOKEN: &str = "s3cret-token-for-hello";
    let e = engine_with(|c| c.token = Some(Token::new(TOKEN.as_bytes())));
    let mut s = Sub::connect(e.subscriber_addr());
    s.cmd(&["HELLO", "3"]);
    let Frame::Error(err) = s.frame() else {
        panic!("HELLO without AUTH is refused")
    };
    assert!(err.starts_with(b"NOAUTH HELLO must be called with the client already authenticated"));
    s.cmd(&["CLIENT", "SETNAME", "x"]);
    assert_eq!(
        s.frame(),
        Frame::Error(b"NOAUTH Authentication required.".to_vec())
    );
    s.cmd(&["HELLO", "3", "AUTH", "default", TOKEN, "SETNAME", "ok"]);
    assert!(matches!(s.frame(), Frame::Map(m) if m.len() == 7));
    s.subscribe(&["EURUSD"]);
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&format!("AUTH {TOKEN}"), &tick(1, "EURUSD", "1", "2")]);
    assert_eq!(s.message().seq(), 1);

    let mut wrong = Sub::connect(e.subscriber_addr());
    wrong.cmd(&["HELLO", "3", "AUTH", "default", "nope"]);
    assert_eq!(
        wrong.frame(),
        Frame::Error(b"WRONGPASS invalid username-password pair or user is disabled.".to_vec())
    );
    let mut rest = Vec::new();
    wrong.socket().set_read_timeout(Some(DEADLINE)).unwrap();
    (&mut wrong.socket()).read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed after a wrong token");
    // RESET forgets the authentication, as in Redis with a password.
    s.cmd(&["RESET"]);
    loop {
        if s.frame() == Frame::Simple(b"RESET".to_vec()) {
            break;
        }
    }
    s.cmd(&["PING"]);
    assert_eq!(
        s.frame(),
        Frame::Error(b"NOAUTH Authentication required.".to_vec())
    );
}

#[test]
fn malformed_input_gets_an_error_and_the_connection_stays_usable_in_resp3() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.cmd(&["HELLO", "3"]);
    assert!(matches!(s.frame(), Frame::Map(_)));
    s.raw(b"*abc\r\n");
    match s.frame() {
        Frame::Error(msg) => assert!(msg.starts_with(b"ERR Protocol error"), "{msg:?}"),
        other => panic!("expected an error, got {other:?}"),
    }
    s.raw(b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(s.frame(), Frame::Simple(b"PONG".to_vec()));
    s.subscribe(&["STILL"]);
    s.cmd(&["NOPE", "x"]);
    assert_eq!(
        s.frame(),
        Frame::Error(b"ERR unknown command 'NOPE', with args beginning with: 'x' ".to_vec())
    );
    s.raw(b"*1\r\n$999999999\r\n");
    assert!(matches!(s.frame(), Frame::Error(_)));
    s.cmd(&["PING"]);
    assert_eq!(s.frame(), Frame::Simple(b"PONG".to_vec()));
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(5, "STILL", "1", "2")]);
    let f = s.frame();
    assert!(matches!(f, Frame::Push(_)), "{f:?}");
    assert_eq!(crate::util::to_msg(&f).unwrap().seq(), 1);
    let p = e.counters().snapshot().publish;
    let (cmds, errors) = (p.commands, p.command_errors);
    assert!(cmds >= 6 && errors == 3, "commands {cmds}, errors {errors}");
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
    let p = e.counters().snapshot().publish;
    let (cmds, errors) = (p.commands, p.command_errors);
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
        let lines = stdout_lines(&mut child);
        Spawned { child, lines }
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
    redis_cli_receives_a_quote(&e, &["-p", &port, "subscribe", "EURUSD"]);
}

/// Runs `redis-cli ARGS` (a `subscribe EURUSD`), checks its confirmation,
/// feeds one EURUSD tick and checks that redis-cli prints it.
fn redis_cli_receives_a_quote(e: &tickfan::runtime::Engine, args: &[&str]) {
    let cli = Spawned::new(Command::new("redis-cli").args(args));
    // Not a terminal: redis-cli prints raw values, one per line.
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

/// `redis-cli -3` (which opens with `HELLO 3`) subscribes, and `redis-cli
/// info` prints the engine's `INFO`.
#[test]
fn redis_cli_speaks_resp3_and_reads_info() {
    require("redis-cli");
    let e = engine();
    let port = e.subscriber_addr().port().to_string();
    let out = Command::new("redis-cli")
        .args(["-3", "-p", &port, "PING"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(text.trim(), "PONG");
    let out = Command::new("redis-cli")
        .args(["-p", &port, "info", "server"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("tcp_port:{port}")), "{text}");
    redis_cli_receives_a_quote(&e, &["-3", "-p", &port, "subscribe", "EURUSD"]);
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
