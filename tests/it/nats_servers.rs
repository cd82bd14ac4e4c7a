//! A NATS cluster for the backbone tests: real `nats-server` processes
//! (Debian's package; `.ci/run` installs it) on free loopback ports, fully
//! meshed with `--cluster`/`--routes`, each killed by its pid when dropped.

#![allow(dead_code)] // reason: each test uses a different subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Spawned, DEADLINE};

/// Where the binary is, or why the tests cannot run.
pub fn nats_server() -> Result<String, String> {
    for p in ["/usr/sbin/nats-server", "/usr/bin/nats-server"] {
        if std::path::Path::new(p).exists() {
            return Ok(p.to_string());
        }
    }
    Err("nats-server is not installed (Debian package `nats-server`; .ci/run installs it)".into())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One server of the cluster.
pub struct Server {
    pub port: u16,
    pub http: u16,
    pub proc: Spawned,
}

impl Server {
    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(c) = &mut self.proc.0 {
            let _ = Command::new("kill")
                .args(["-9", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
        self.proc.0 = None;
    }
}

/// One plain server, as `nats-server -p PORT` (no cluster), on a free
/// loopback port, accepting clients when this returns. Started again on
/// fresh ports (up to three times) if another process took its port first.
pub fn single(bin: &str) -> Server {
    for attempt in 1..=3 {
        let (port, http) = (free_port(), free_port());
        let child = Command::new(bin)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(["-m", &http.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server runs");
        let mut s = Server {
            port,
            http,
            proc: Spawned(Some(child)),
        };
        let end = Instant::now() + DEADLINE;
        loop {
            if http_get(s.http, "/healthz").is_some_and(|b| b.contains("ok")) {
                return s;
            }
            let exited = s
                .proc
                .0
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited || Instant::now() >= end {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        s.kill9();
        eprintln!("nats-server did not come up (attempt {attempt}); starting again on new ports");
    }
    panic!("a single nats-server never came up in 3 attempts");
}

/// A fully meshed cluster of `n` servers, each with its routes up.
pub struct Cluster {
    pub servers: Vec<Server>,
}

impl Cluster {
    /// Starts `n` servers and waits until each has routes to all others.
    pub fn start(bin: &str, n: usize) -> Cluster {
        Cluster::start_on(bin, n, "127.0.0.1")
    }

    /// [`Cluster::start`] with the client port bound to `addr` (routes and
    /// monitoring stay on loopback).
    ///
    /// Ports are found free just before the servers start; another test
    /// can take one in between, and that server then never joins. So a
    /// cluster that does not mesh (or whose server exited) is stopped and
    /// started again on fresh ports, up to three times.
    pub fn start_on(bin: &str, n: usize, addr: &str) -> Cluster {
        for attempt in 1..=3 {
            let mut c = Cluster::spawn(bin, n, addr);
            if c.servers.iter_mut().all(|s| meshed(s, n - 1)) {
                return c;
            }
            eprintln!("nats cluster did not mesh (attempt {attempt}); starting again on new ports");
        }
        panic!("a {n}-server nats cluster never meshed in 3 attempts");
    }

    fn spawn(bin: &str, n: usize, addr: &str) -> Cluster {
        let ports: Vec<(u16, u16, u16)> = (0..n)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{}", p.2))
            .collect();
        let servers = ports
            .iter()
            .enumerate()
            .map(|(i, &(port, http, cport))| {
                let child = Command::new(bin)
                    .args([
                        "-a",
                        addr,
                        "-p",
                        &port.to_string(),
                        "-m",
                        &http.to_string(),
                        "-n",
                        &format!("tickfan-test-{i}"),
                        "--cluster_name",
                        "tickfan-test",
                        "--cluster",
                        &format!("nats://127.0.0.1:{cport}"),
                        "--routes",
                        &routes.join(","),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("nats-server runs");
                Server {
                    port,
                    http,
                    proc: Spawned(Some(child)),
                }
            })
            .collect();
        Cluster { servers }
    }

    /// Every server's URL, comma-separated (the `--nats` value).
    pub fn urls(&self) -> String {
        self.servers
            .iter()
            .map(Server::url)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Waits until `s` has `want` routes: `false` when its process exited or
/// the deadline passed.
fn meshed(s: &mut Server, want: usize) -> bool {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(body) = http_get(s.http, "/routez") {
            if routes_in(&body) >= want {
                return true;
            }
        }
        let exited = match &mut s.proc.0 {
            Some(c) => c.try_wait().ok().flatten().is_some(),
            None => true,
        };
        if exited || Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn routes_in(body: &str) -> usize {
    body.split("\"num_routes\":")
        .nth(1)
        .and_then(|r| r.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A plain HTTP GET on loopback; the body, or `None` when not reachable yet.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// A raw NATS client connection (the protocol is text): for publishing
/// what no tickfan would.
pub struct RawNats {
    s: TcpStream,
}

impl RawNats {
    /// Connects and sends `CONNECT` with headers on.
    pub fn connect(port: u16) -> RawNats {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("nats connects");
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut info = [0u8; 4096];
        let _ = s.read(&mut info).expect("INFO");
        s.write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\nPING\r\n")
            .unwrap();
        let mut pong = [0u8; 64];
        let _ = s.read(&mut pong).expect("PONG");
        RawNats { s }
    }

    /// `PUB subject n\r\npayload\r\n`.
    pub fn publish(&mut self, subject: &str, payload: &[u8]) {
        write!(self.s, "PUB {subject} {}\r\n", payload.len()).unwrap();
        self.s.write_all(payload).unwrap();
        self.s.write_all(b"\r\n").unwrap();
    }

    /// `HPUB` with one header.
    pub fn publish_with_header(&mut self, subject: &str, header: (&str, &str), payload: &[u8]) {
        let h = format!("NATS/1.0\r\n{}: {}\r\n\r\n", header.0, header.1);
        write!(
            self.s,
            "HPUB {subject} {} {}\r\n{h}",
            h.len(),
            h.len() + payload.len()
        )
        .unwrap();
        self.s.write_all(payload).unwrap();
        self.s.write_all(b"\r\n").unwrap();
    }

    /// Waits until the server has processed what was sent (PING → PONG).
    pub fn flush(&mut self) {
        self.s.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 256];
        let _ = self.s.read(&mut buf).expect("PONG");
    }
}
