//! Stock Redis client libraries, each with its DEFAULT options, against a
//! running engine with a feed, over loopback: redis-py (sync and
//! `redis.asyncio`, with hiredis and without), ioredis and node-redis.
//!
//! Each library runs the same story, driven by a script in `tests/clients/`
//! that prints one JSON object per line:
//! 1. connect (the library's own handshake: `HELLO 3`, `CLIENT SETINFO`,
//!    the `INFO` ready check…), check with `CLIENT INFO` that the
//!    connection speaks RESP3, `PSUBSCRIBE EUR*` and `SUBSCRIBE EURUSD`;
//! 2. receive the snapshots (seq 1) and live updates up to seq 3 on every
//!    route, and nothing for `USDJPY`;
//! 3. unsubscribe from both, subscribe to `EURUSD` again (snapshot seq 3);
//! 4. the engine is stopped and a new one started on the same port: the
//!    library reconnects and resubscribes by itself, and the script gets
//!    the new engine's quote (seq 1, bid 7.77).
//!
//! The interpreters and packages come from `tests/clients/.venv` and
//! `tests/clients/node_modules`, pinned by `requirements.txt` and
//! `package-lock.json`; `.ci/run` installs them. When they are missing the
//! tests fail and say so.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use serde_json::Value;

use crate::util::{engine, engine_with, stdout_lines, tick, wait_until, Feed, DEADLINE};

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn python() -> PathBuf {
    let py = clients_dir().join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run .ci/run (it creates tests/clients/.venv from tests/clients/requirements.txt)",
        py.display()
    );
    py
}

fn node() -> PathBuf {
    let modules = clients_dir().join("node_modules");
    assert!(
        modules.join("ioredis").exists() && modules.join("redis").exists(),
        "{} is incomplete: run .ci/run (it runs `npm ci` in tests/clients)",
        modules.display()
    );
    PathBuf::from("node")
}

/// A client script, killed by its pid on drop; its stdout lines arrive
/// through a channel so every read has a deadline.
struct Script {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Script {
    fn spawn(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Script {
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(clients_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", program.display()));
        let lines = stdout_lines(&mut child);
        Script {
            stdin: child.stdin.take(),
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// The next event; fails on an `error` event, the deadline, or the end of output.
    fn event(&mut self) -> Value {
        let line = self.lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "no event from the client before the deadline; so far:\n{}",
                self.log.join("\n")
            )
        });
        self.log.push(line.clone());
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_ne!(
            v["event"],
            "error",
            "the client failed:\n{}",
            self.log.join("\n")
        );
        v
    }

    /// Skips `message` and `connection_error` events (kept in `seen`) until `name`.
    fn until(&mut self, name: &str, seen: &mut Vec<Value>) -> Value {
        loop {
            let v = self.event();
            match v["event"].as_str() {
                Some(n) if n == name => return v,
                Some("message") => seen.push(v),
                Some("connection_error") => {}
                other => panic!("expected {name}, got {other:?}:\n{}", self.log.join("\n")),
            }
        }
    }

    fn tell(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn wait_success(&mut self) {
        let end = std::time::Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "client exited with {status}:\n{}",
                    self.log.join("\n")
                );
                return;
            }
            assert!(std::time::Instant::now() < end, "client did not exit");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `(kind, channel)` → the sequence numbers received on that route, in order.
fn by_route(msgs: &[Value]) -> std::collections::BTreeMap<(String, String), Vec<u64>> {
    let mut m = std::collections::BTreeMap::<(String, String), Vec<u64>>::new();
    for v in msgs {
        let key = (
            v["kind"].as_str().unwrap().to_string(),
            v["channel"].as_str().unwrap().to_string(),
        );
        m.entry(key).or_default().push(v["seq"].as_u64().unwrap());
    }
    m
}

/// Runs the story (module docs) with `program args… <story args>`.
fn story(program: PathBuf, args: &[&str], env: &[(&str, &str)]) {
    let first = engine();
    let port = first.subscriber_addr().port();
    let mut feed = Feed::connect(first.feed_addr());
    feed.lines(&[
        &tick(1, "EURUSD", "1.1", "1.2"),
        &tick(2, "EURGBP", "0.81", "0.82"),
        &tick(3, "USDJPY", "150.1", "150.2"),
    ]);
    wait_until("the first quotes published", || {
        first.counters().snapshot().publish.published == 3
    });
    let port_s = port.to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([&port_s[..], "EURUSD", "EUR*", "EURUSD,EURGBP", "3", "7.77"]);
    let mut s = Script::spawn(&program, &all, env);
    let mut msgs = Vec::new();
    let hello = s.until("hello", &mut msgs);
    let ready = s.until("ready", &mut msgs);
    // Every library here opens with `HELLO 3` by default: RESP3 is what is tested.
    assert_eq!(ready["resp"], "3", "{hello} {ready}");
    for seq in 2..=3u64 {
        feed.lines(&[
            &tick(10 + seq, "EURUSD", "1.1", "1.2"),
            &tick(20 + seq, "EURGBP", "0.81", "0.82"),
            &tick(30 + seq, "USDJPY", "150.1", "150.2"),
        ]);
        wait_until("live quotes published", || {
            first.counters().snapshot().publish.published >= 3 * seq
        });
    }
    s.until("live", &mut msgs);
    let routes = by_route(&msgs);
    let keys: Vec<_> = routes.keys().cloned().collect();
    let want = |k: &str, c: &str| (k.to_string(), c.to_string());
    assert_eq!(
        keys,
        vec![
            want("message", "EURUSD"),
            want("pmessage", "EURGBP"),
            want("pmessage", "EURUSD")
        ],
        "{hello}"
    );
    for (route, seqs) in &routes {
        assert_eq!(
            seqs.first(),
            Some(&1),
            "{route:?}: the snapshot first: {seqs:?}"
        );
        assert_eq!(seqs.last(), Some(&3), "{route:?}: {seqs:?}");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{route:?}: {seqs:?}");
    }
    for v in &msgs {
        if v["kind"] == "pmessage" {
            assert_eq!(v["pattern"], "EUR*", "{v}");
        }
    }
    s.until("unsubscribed", &mut msgs);
    let resub = s.until("resubscribed", &mut msgs);
    assert_eq!(resub["seq"], 3, "snapshot after resubscribing: {resub}");

    // Restart the engine on the same port; the library reconnects by itself.
    drop(feed);
    drop(first);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let second = engine_with(|c| c.sub_addr = addr);
    let mut feed = Feed::connect(second.feed_addr());
    feed.lines(&[&tick(100, "EURUSD", "7.77", "7.78")]);
    s.tell("restarting");
    let back = s.until("reconnected", &mut msgs);
    assert_eq!(
        (back["seq"].as_u64(), back["bid"].as_str()),
        (Some(1), Some("7.77"))
    );
    s.wait_success();
    wait_until("the client's subscription seen by the new engine", || {
        second.subscribers().iter().any(|st| st.frames >= 1)
    });
}

#[test]
fn redis_py_sync_with_default_options() {
    story(python(), &["py_client.py", "sync"], &[]);
}

#[test]
fn redis_py_asyncio_with_default_options() {
    story(python(), &["py_client.py", "asyncio"], &[]);
}

#[test]
fn redis_py_sync_without_hiredis() {
    story(
        python(),
        &["py_client.py", "sync"],
        &[("TICKFAN_NO_HIREDIS", "1")],
    );
}

#[test]
fn ioredis_with_default_options() {
    story(node(), &["node_ioredis.js"], &[]);
}

#[test]
fn node_redis_with_default_options() {
    story(node(), &["node_redis.js"], &[]);
}

/// redis-py with its defaults sends tickfan's own commands: `TICKFAN.THROTTLE`
/// answers `OK` (on a subscribed connection redis-py hands the `+OK` over as
/// a `pong` message), `TICKFAN.SINCE` answers a subscribe confirmation and
/// the missed messages, which `get_message` returns as ordinary messages.
#[test]
fn redis_py_sends_throttle_and_since_with_default_options() {
    let e = engine_with(|c| {
        c.history_depth = 16;
        c.max_symbols = 64;
    });
    let mut feed = Feed::connect(e.feed_addr());
    for i in 1..=6u64 {
        feed.lines(&[&tick(i, "EURUSD", &format!("1.0{i}"), "2.0")]);
        wait_until("the tick published", || {
            e.counters().snapshot().publish.published == i
        });
    }
    let port = e.subscriber_addr().port().to_string();
    let mut s = Script::spawn(
        &python(),
        &["py_control.py", &port, "EURUSD", "3", "6"],
        &[],
    );
    let v = s.event();
    assert_eq!(
        (v["event"].as_str(), v["reply"].as_str()),
        (Some("throttle"), Some("OK"))
    );
    let v = s.event();
    assert_eq!(v["event"], "since");
    assert_eq!(v["confirmed"], "EURUSD");
    assert_eq!(v["seqs"], serde_json::json!([4, 5, 6]));
    let v = s.event();
    assert_eq!(v["event"], "subscribed_throttle");
    assert_eq!(
        (v["type"].as_str(), v["data"].as_str()),
        (Some("pong"), Some("OK")),
        "{v}"
    );
    s.wait_success();
}
