//! TLS on the subscriber, order and admin ports (`--tls-cert`, `--tls-key`,
//! `--tls-client-ca`, `--tls-ports`), over real loopback sockets:
//!
//! - stock clients with their defaults plus TLS and the CA: `redis-cli
//!   --tls` (SUBSCRIBE, PSUBSCRIBE), redis-py `ssl=True` (sync, asyncio),
//!   ioredis `tls: { ca }`, node-redis `socket: { tls: true, ca }`, and
//!   `tickfan subscribe --tls-ca`; each receives a published tick;
//! - an order over TLS gets its `ACK` and its terminal reply;
//! - `/metrics` over https (curl `--cacert`) passes `promtool check metrics`,
//!   and a real Prometheus scrapes it with `scheme: https` and the CA;
//! - mutual TLS: no client certificate → refused (counted); a certificate
//!   signed by the client CA → served;
//! - plaintext on each TLS port: the port's error line, counted, and the
//!   engine keeps serving TLS clients; the feed port stays plaintext;
//! - bad TLS flags: one line, exit 2.
//!
//! The certificates are made here (rcgen): a CA, a server certificate for
//! `localhost` and `127.0.0.1` signed by it, and a client certificate
//! signed by it, as PEM files in a temporary directory. A test that needs
//! a program that is missing (redis-cli, python's venv, node's modules,
//! curl, promtool, prometheus) says so and passes without it: `.ci/run`
//! installs them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, StreamOwned};
use tickfan::client::resp::{command, read_frame, Frame};
use tickfan::client::tls::{client_config, server_name};
use tickfan::config::Config;
use tickfan::runtime::Engine;
use tickfan::tls::{TlsConfig, TlsPortName};

use crate::util::{engine_with, stdout_lines, tick, to_msg, wait_until, Feed, DEADLINE};

/// PEM files of one test's PKI.
struct Pki {
    dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "tickfan test CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let leaf = |names: Vec<String>, usage: rcgen::ExtendedKeyUsagePurpose| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut p = rcgen::CertificateParams::new(names).unwrap();
            p.extended_key_usages = vec![usage];
            let cert = p.signed_by(&key, &ca).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (cert, key) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = leaf(
            vec!["tickfan-test-client".into()],
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        );
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        Pki {
            ca: write("ca.pem", &ca.pem()),
            cert: write("server.pem", &cert),
            key: write("server.key", &key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            dir,
        }
    }

    /// The engine's TLS settings: these ports (all three when empty),
    /// requiring client certificates when `mutual`.
    fn config(&self, ports: &[TlsPortName], mutual: bool) -> TlsConfig {
        let ca = mutual.then_some(self.ca.as_path());
        TlsConfig::load(&self.cert, &self.key, ca, ports).unwrap()
    }

    /// A client trusting the CA (with the client certificate when `identity`).
    fn client(&self, identity: bool) -> Arc<ClientConfig> {
        let id = identity.then_some((self.client_cert.as_path(), self.client_key.as_path()));
        client_config(&self.ca, id).unwrap()
    }
}

/// An engine with TLS on `ports` (every port when empty).
fn tls_engine(pki: &Pki, ports: &[TlsPortName], mutual: bool) -> Engine {
    let tls = pki.config(ports, mutual);
    engine_with(move |c: &mut Config| c.tls = Some(tls))
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// A blocking TLS connection to `addr` (the handshake runs on first use).
fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Tls {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(DEADLINE)).unwrap();
    sock.set_write_timeout(Some(DEADLINE)).unwrap();
    let conn = ClientConnection::new(config, server_name(addr)).unwrap();
    StreamOwned::new(conn, sock)
}

/// Whether `program --version` runs; prints why a test is skipped if not.
fn have(program: &str, why: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {program} not found ({why}; .ci/run installs it)");
    }
    ok
}

/// Sends one tick of `symbol` and waits until the engine published it.
fn publish_one(e: &Engine, feed: &mut Feed, ts: u64, symbol: &str) {
    let before = e.counters().snapshot().publish.published;
    feed.lines(&[&tick(ts, symbol, "1.08512", "1.08515")]);
    wait_until("the tick published", || {
        e.counters().snapshot().publish.published > before
    });
}

fn tls_counts(e: &Engine, port: TlsPortName) -> tickfan::metrics::tls_counters::PortTlsFigures {
    e.counters().snapshot().tls.port(port).figures.clone()
}

/// A spawned process whose stdout lines arrive through a channel (every
/// read has a deadline); killed by its pid on drop.
struct Child {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Child {
    fn spawn(cmd: &mut Command) -> Child {
        // stderr as the caller set it (inherited by default).
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn");
        let lines = stdout_lines(&mut child);
        Child {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    fn line(&mut self) -> String {
        let l = self
            .lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("no line before the deadline; so far: {:?}", self.seen));
        self.seen.push(l.clone());
        l
    }

    /// Lines until one contains `needle`.
    fn until(&mut self, needle: &str) -> String {
        loop {
            let l = self.line();
            assert!(
                !l.contains("\"event\": \"error\"") && !l.contains("\"event\":\"error\""),
                "the client failed: {:?}",
                self.seen
            );
            if l.contains(needle) {
                return l;
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `redis-cli --tls --cacert … ARGS` (a subscribe to EURUSD, or a pattern
/// matching it) receives a tick published after its confirmation.
fn redis_cli_over_tls(kind: &str, target: &str) {
    if !have("redis-cli", "redis-tools") {
        return;
    }
    let pki = Pki::new();
    let e = tls_engine(&pki, &[], false);
    let port = e.subscriber_addr().port().to_string();
    let mut cli = Child::spawn(Command::new("redis-cli").args([
        "--tls",
        "--cacert",
        pki.ca.to_str().unwrap(),
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        kind,
        target,
    ]));
    // Not a terminal: raw values, one per line.
    assert_eq!(cli.line(), kind);
    assert_eq!(cli.line(), target);
    assert_eq!(cli.line(), "1");
    let mut feed = Feed::connect(e.feed_addr());
    publish_one(&e, &mut feed, 1701388800123456789, "EURUSD");
    cli.until("1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,1,");
    assert!(tls_counts(&e, TlsPortName::Subscribers).handshakes >= 1);
}

#[test]
fn redis_cli_subscribes_over_tls() {
    redis_cli_over_tls("subscribe", "EURUSD");
}

#[test]
fn redis_cli_psubscribes_over_tls() {
    redis_cli_over_tls("psubscribe", "EUR*");
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// A client script (`program args… PORT CA EURUSD EUR*`) receives EURUSD
/// as a message and as a pmessage over TLS.
fn client_over_tls(program: &Path, args: &[&str]) {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[TlsPortName::Subscribers], false);
    let port = e.subscriber_addr().port().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([&port[..], pki.ca.to_str().unwrap(), "EURUSD", "EUR*"]);
    let mut c = Child::spawn(Command::new(program).args(&all).current_dir(clients_dir()));
    c.until("\"ready\"");
    // Nothing published yet: the client waits for this live tick.
    wait_until("the client's two subscriptions", || {
        e.subscribers().iter().any(|s| s.subscriptions == 2)
    });
    let mut feed = Feed::connect(e.feed_addr());
    publish_one(&e, &mut feed, 2, "EURUSD");
    c.until("\"done\"");
    assert!(tls_counts(&e, TlsPortName::Subscribers).handshakes >= 1);
}

fn python() -> Option<PathBuf> {
    let py = clients_dir().join(".venv/bin/python");
    if py.exists() {
        Some(py)
    } else {
        eprintln!(
            "skipped: {} is missing (.ci/run creates it from tests/clients/requirements.txt)",
            py.display()
        );
        None
    }
}

fn node_with(module: &str) -> Option<PathBuf> {
    let m = clients_dir().join("node_modules").join(module);
    if m.exists() && have("node", "nodejs") {
        Some(PathBuf::from("node"))
    } else {
        eprintln!(
            "skipped: {} is missing (.ci/run runs `npm ci` in tests/clients)",
            m.display()
        );
        None
    }
}

#[test]
fn redis_py_sync_subscribes_with_ssl_true() {
    if let Some(py) = python() {
        client_over_tls(&py, &["py_tls.py", "sync"]);
    }
}

#[test]
fn redis_py_asyncio_subscribes_with_ssl_true() {
    if let Some(py) = python() {
        client_over_tls(&py, &["py_tls.py", "asyncio"]);
    }
}

#[test]
fn ioredis_subscribes_with_tls_ca() {
    if let Some(node) = node_with("ioredis") {
        client_over_tls(&node, &["node_tls.js", "ioredis"]);
    }
}

#[test]
fn node_redis_subscribes_with_socket_tls() {
    if let Some(node) = node_with("redis") {
        client_over_tls(&node, &["node_tls.js", "redis"]);
    }
}

/// `tickfan subscribe --tls-ca` (the load tool the cost is measured with)
/// subscribes over TLS and counts the messages up to a sentinel.
#[test]
fn the_subscribe_tool_speaks_tls() {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[TlsPortName::Subscribers], false);
    let mut feed = Feed::connect(e.feed_addr());
    let to = e.subscriber_addr().to_string();
    let mut sub = Child::spawn(
        Command::new(env!("CARGO_BIN_EXE_tickfan"))
            .args([
                "subscribe",
                "--to",
                &to,
                "-k",
                "3",
                "--quiet",
                "--until",
                "ZZZ",
            ])
            .args(["--tls-ca", pki.ca.to_str().unwrap()]),
    );
    wait_until("three TLS subscribers", || {
        e.subscribers()
            .iter()
            .filter(|s| s.subscriptions == 1)
            .count()
            == 3
    });
    for i in 1..=20 {
        publish_one(&e, &mut feed, i, &format!("S{}", i % 4));
    }
    publish_one(&e, &mut feed, 21, "ZZZ");
    let status = sub.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut out = String::new();
    while let Ok(l) = sub.lines.recv_timeout(DEADLINE) {
        out.push_str(&l);
        out.push('\n');
    }
    assert!(out.contains("normal"), "{out}");
    assert_eq!(tls_counts(&e, TlsPortName::Subscribers).handshakes, 3);

    // Without --tls-ca against a TLS port: the engine's line, exit 1.
    let out = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args([
            "subscribe",
            "--to",
            &to,
            "-k",
            "1",
            "--quiet",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("this port requires TLS"), "{err}");
}

/// A line client over TLS on the order port: `NEW` gets `ACK`, then its end.
#[test]
fn an_order_over_tls_gets_ack_and_its_terminal_reply() {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[TlsPortName::Orders], false);
    let mut tls = connect(e.order_addr(), pki.client(false));
    tls.write_all(b"NEW t1 EURUSD BUY 10\n").unwrap();
    let mut r = BufReader::new(tls);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "ACK t1\n");
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "closed before the end");
        let reply = tickfan::client::orders::Reply::parse(line.trim_end())
            .unwrap_or_else(|| panic!("unparseable: {line}"));
        if reply.is_terminal() {
            assert!(line.starts_with("DONE t1 "), "{line}");
            break;
        }
    }
    assert_eq!(tls_counts(&e, TlsPortName::Orders).handshakes, 1);
    // The subscriber port was left plaintext (--tls-ports orders).
    let mut s = crate::util::Sub::connect(e.subscriber_addr());
    s.cmd(&["PING"]);
    assert_eq!(s.frame(), Frame::Simple(b"PONG".to_vec()));
}

/// One HTTP/1.1 GET over TLS; the status and body.
fn https_get(addr: SocketAddr, config: Arc<ClientConfig>, path: &str) -> (u16, String) {
    let mut tls = connect(addr, config);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    // The engine half-closes after its answer (and sends close_notify).
    let _ = tls.read_to_end(&mut raw);
    let text = String::from_utf8(raw).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

/// `/metrics` over https passes `promtool check metrics`, fetched by curl
/// trusting the CA (as Prometheus's `tls_config: {ca_file}` would).
#[test]
fn admin_over_https_passes_promtool() {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[TlsPortName::Admin], false);
    let admin = e.admin_addr();
    let (status, body) = https_get(admin, pki.client(false), "/health");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    if !have("curl", "curl") || !have("promtool", "Debian's prometheus") {
        return;
    }
    let url = format!("https://127.0.0.1:{}/metrics", admin.port());
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--fail", "--cacert"])
        .arg(&pki.ca)
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = String::from_utf8(out.stdout).unwrap();
    assert!(
        body.contains("tickfan_tls_handshakes_total{port=\"admin\"}"),
        "{body}"
    );
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // curl without the CA: the engine's certificate is not trusted.
    let out = Command::new("curl")
        .args(["--silent", "--fail", &url])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// PING over a TLS subscriber connection; `None` when the engine closed
/// it or failed the handshake.
fn tls_ping(addr: SocketAddr, config: Arc<ClientConfig>) -> Option<Frame> {
    let mut tls = connect(addr, config);
    tls.write_all(&command(&[b"PING"])).ok()?;
    read_frame(&mut BufReader::new(tls)).ok()
}

#[test]
fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[], true);
    let sub = e.subscriber_addr();
    assert_eq!(
        tls_ping(sub, pki.client(true)),
        Some(Frame::Simple(b"PONG".to_vec()))
    );
    assert_eq!(tls_ping(sub, pki.client(false)), None);
    wait_until("the refused handshake counted", || {
        tls_counts(&e, TlsPortName::Subscribers).handshake_failures == 1
    });
    // The order port too; the certified client is still served after it.
    let mut bare = connect(e.order_addr(), pki.client(false));
    let _ = bare.write_all(b"PING\n");
    let mut got = String::new();
    assert!(BufReader::new(bare).read_line(&mut got).is_err() || got.is_empty());
    let mut tls = connect(e.order_addr(), pki.client(true));
    tls.write_all(b"PING\n").unwrap();
    let mut line = String::new();
    BufReader::new(tls).read_line(&mut line).unwrap();
    assert_eq!(line, "PONG\n");
    wait_until("the order port's refusal counted", || {
        tls_counts(&e, TlsPortName::Orders).handshake_failures == 1
    });
    assert_eq!(
        tls_ping(sub, pki.client(true)),
        Some(Frame::Simple(b"PONG".to_vec()))
    );
}

/// Reads everything a plaintext peer gets until the engine closes.
fn plaintext_answer(addr: SocketAddr, sent: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(sent).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    String::from_utf8(got).unwrap()
}

#[test]
fn plaintext_on_a_tls_port_gets_a_clear_error_and_others_are_served() {
    let pki = Pki::new();
    let e = tls_engine(&pki, &[], false);
    // A TLS subscriber first, which must live through the plaintext ones.
    let mut tls = connect(e.subscriber_addr(), pki.client(false));
    tls.write_all(&command(&[b"SUBSCRIBE", b"EURUSD"])).unwrap();
    let mut tls = BufReader::new(tls);
    assert!(matches!(read_frame(&mut tls).unwrap(), Frame::Array(_)));

    assert_eq!(
        plaintext_answer(e.subscriber_addr(), &command(&[b"PING"])),
        "-ERR this port requires TLS\r\n"
    );
    assert_eq!(
        plaintext_answer(e.order_addr(), b"NEW p1 EURUSD BUY 1\n"),
        "ERR this port requires TLS\n"
    );
    let http = plaintext_answer(e.admin_addr(), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(http.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{http}");
    assert!(
        http.ends_with("this port requires TLS: use https://\n"),
        "{http}"
    );
    for p in TlsPortName::ALL {
        wait_until("the plaintext refusal counted", || {
            tls_counts(&e, p).plaintext_refused == 1
        });
    }
    // The feed port stays plaintext; the TLS subscriber gets the tick.
    let mut feed = Feed::connect(e.feed_addr());
    publish_one(&e, &mut feed, 7, "EURUSD");
    let m = loop {
        if let Some(m) = to_msg(&read_frame(&mut tls).unwrap()) {
            break m;
        }
    };
    assert_eq!((m.channel.as_str(), m.seq()), ("EURUSD", 1));
    let scrape = https_get(e.admin_addr(), pki.client(false), "/metrics").1;
    assert!(
        scrape.contains("tickfan_tls_plaintext_refused_total{port=\"orders\"} 1"),
        "{scrape}"
    );
    assert!(scrape.contains("tickfan_warnings_total{kind=\"tls_plaintext\"}"));
}

/// `serve` with TLS flags that cannot work: one line naming the flag, exit 2.
#[test]
fn bad_tls_flags_exit_2_with_one_line() {
    let pki = Pki::new();
    let missing = pki.dir.path().join("missing.key");
    let cases: [(Vec<&std::ffi::OsStr>, &str); 4] = [
        (
            vec![
                "--tls-cert".as_ref(),
                pki.cert.as_os_str(),
                "--tls-key".as_ref(),
                missing.as_os_str(),
            ],
            "--tls-key: cannot read",
        ),
        (
            vec![
                "--tls-cert".as_ref(),
                pki.cert.as_os_str(),
                "--tls-key".as_ref(),
                pki.client_key.as_os_str(),
            ],
            "does not match the certificate",
        ),
        (
            vec!["--tls-cert".as_ref(), pki.cert.as_os_str()],
            "--tls-cert: needs --tls-key",
        ),
        (
            vec![
                "--tls-cert".as_ref(),
                pki.key.as_os_str(),
                "--tls-key".as_ref(),
                pki.key.as_os_str(),
            ],
            "--tls-cert:",
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_tickfan"))
            .arg("serve")
            .args(crate::util::EPHEMERAL_PORTS)
            .args(&args)
            .envs(crate::util::scratch_env())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.starts_with("tickfan: ") && err.contains(want), "{err}");
    }
}

/// The banner says which ports speak TLS.
#[test]
fn the_banner_names_the_tls_ports() {
    let pki = Pki::new();
    let mut args: Vec<String> = ["serve", "--tls-ports", "subscribers,admin"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(crate::util::EPHEMERAL_PORTS.iter().map(|s| s.to_string()));
    args.extend([
        "--tls-cert".into(),
        pki.cert.display().to_string(),
        "--tls-key".into(),
        pki.key.display().to_string(),
    ]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_engine, banner) = crate::util::spawn_until(&refs, "tickfan serving");
    assert!(
        banner.contains(" tls (redis-cli --tls --cacert"),
        "{banner}"
    );
    assert!(banner.contains("admin https://"), "{banner}");
    assert!(
        !banner.contains("tls clients need a certificate"),
        "{banner}"
    );
    assert!(
        !banner.contains(" tls · admin"),
        "orders stay plaintext: {banner}"
    );
}

/// A real Prometheus (Debian's) scrapes `/metrics` over https with the
/// CA in its `tls_config`: `up{job="tickfan"}` is 1 and the engine counts
/// the scrapes' handshakes.
#[test]
fn prometheus_scrapes_the_admin_endpoint_over_https() {
    if !have("prometheus", "Debian's prometheus") {
        return;
    }
    let pki = Pki::new();
    let e = tls_engine(&pki, &[TlsPortName::Admin], false);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: tickfan\n    scheme: https\n    tls_config:\n      ca_file: {}\n    static_configs:\n      - targets: [\"127.0.0.1:{}\"]\n",
            pki.ca.display(),
            e.admin_addr().port()
        ),
    )
    .unwrap();
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut prom = Command::new("prometheus");
    prom.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stderr(Stdio::null());
    let _prom = Child::spawn(&mut prom);
    let query = |q: &str| -> Option<serde_json::Value> {
        let mut s = TcpStream::connect(web).ok()?;
        s.set_read_timeout(Some(DEADLINE)).ok()?;
        write!(s, "GET /api/v1/query?query={q} HTTP/1.0\r\n\r\n").ok()?;
        let mut raw = String::new();
        s.read_to_string(&mut raw).ok()?;
        serde_json::from_str(raw.split_once("\r\n\r\n")?.1).ok()
    };
    let value = |q: &str| -> Option<String> {
        let v = query(q)?;
        Some(v["data"]["result"][0]["value"][1].as_str()?.to_string())
    };
    wait_until("Prometheus scraped tickfan over https (up == 1)", || {
        value("up%7Bjob%3D%22tickfan%22%7D").as_deref() == Some("1")
    });
    let handshakes = value("tickfan_tls_handshakes_total%7Bport%3D%22admin%22%7D").unwrap();
    assert!(handshakes.parse::<f64>().unwrap() >= 0.0, "{handshakes}");
    assert!(tls_counts(&e, TlsPortName::Admin).handshakes >= 1);
}
