//! `--token-file` on the client tools, run as the binary an operator runs
//! against a secured engine: with the right token `replay`'s ticks are
//! taken, `subscribe` counts what was published and `orders` gets every
//! terminal reply; a wrong token ends each tool with the server's refusal
//! on one line and exit 1 (never showing the token); a token file that is
//! missing or empty is a usage error (exit 2).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use tickfan::auth::Token;
use tickfan::bridge::spec::SimSpec;
use tickfan::client::resp::Frame;
use tickfan::runtime::Engine;

use crate::protocol::RedisServer;
use crate::tools::{ok, text, tickfan};
use crate::util::{engine_with, tick, wait_until, Feed, Spawned, Sub};

const TOKEN: &str = "t0k3n-for-tools";
const WRONG: &str = "not-the-token";

/// An engine that requires [`TOKEN`] on every port; orders fill at once.
fn secured() -> Engine {
    engine_with(|c| {
        c.token = Some(Token::new(TOKEN.as_bytes()));
        c.order.bridges = vec![SimSpec::instant("a")];
    })
}

/// Token files (the right one, a wrong one) and a scratch directory.
struct Files {
    dir: tempfile::TempDir,
    right: String,
    wrong: String,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            p.to_str().unwrap().to_string()
        };
        let right = write("token", &format!("{TOKEN}\n"));
        let wrong = write("wrong", &format!("{WRONG}\n"));
        Files { dir, right, wrong }
    }

    /// A tick file: `n` ticks on distinct symbols (nothing to conflate),
    /// then the sentinel `ZZEND`.
    fn ticks(&self, n: u64) -> String {
        let mut lines: Vec<String> = (0..n)
            .map(|i| tick(1 + i, &format!("S{i:02}"), "1.1", "1.2"))
            .collect();
        lines.push(tick(1 + n, "ZZEND", "1", "2"));
        let p = self.dir.path().join("t.csv");
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p.to_str().unwrap().to_string()
    }
}

/// Exit 1 with one stderr line holding each of `what` (the port, the
/// server's refusal), and neither token in it.
fn refused(out: &Output, what: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("tickfan: "), "{err}");
    for w in what {
        assert!(err.contains(w), "{w:?} in: {err}");
    }
    assert!(
        !err.contains(TOKEN) && !err.contains(WRONG),
        "the token is never shown: {err}"
    );
}

#[test]
fn replay_presents_the_token_before_its_ticks() {
    let e = secured();
    let f = Files::new();
    let file = f.ticks(20);
    let feed = e.feed_addr().to_string();
    let replay = |token: &str| {
        tickfan(&[
            "replay",
            &file,
            "--to",
            &feed,
            "--no-progress",
            "--token-file",
            token,
        ])
    };
    refused(
        &replay(&f.wrong),
        &[&format!(
            "feed port {feed} refused the token: ERR invalid token"
        )],
    );
    wait_until("the refusal counted", || {
        e.counters().snapshot().feed.auth_failures == 1
    });
    // No token at all: the feed port's one `ERR` line fails the run (it
    // says nothing otherwise, so replay listens for it before exiting).
    refused(
        &tickfan(&["replay", &file, "--to", &feed, "--no-progress"]),
        &[&format!(
            "feed port {feed} answered: ERR authentication required"
        )],
    );
    wait_until("the second refusal counted", || {
        e.counters().snapshot().feed.auth_failures == 2
    });

    let out = replay(&f.right);
    ok(&out);
    assert!(
        text(&out.stderr).contains("sent 21 lines"),
        "{}",
        text(&out.stderr)
    );
    wait_until("every tick taken", || {
        e.counters().snapshot().feed.ticks_valid == 21
    });
    let c = e.counters().snapshot();
    assert_eq!(c.ticks_received, 21, "only the accepted run's ticks");
    assert_eq!(c.poison_total, 0, "the AUTH line is not taken as a tick");
    assert_eq!(c.feed.auth_failures, 2);
}

#[test]
fn replay_presents_the_token_to_redis_in_publish_mode() {
    let redis = RedisServer::start_with(&["--requirepass", TOKEN]);
    let addr: SocketAddr = format!("127.0.0.1:{}", redis.port).parse().unwrap();
    let mut sub = Sub::connect(addr);
    sub.cmd(&["AUTH", TOKEN]);
    assert_eq!(sub.frame(), Frame::Simple(b"OK".to_vec()));
    sub.psubscribe(&["*"]);
    let f = Files::new();
    let file = f.ticks(20);
    let replay = |token: &str| {
        tickfan(&[
            "replay",
            &file,
            "--to",
            &addr.to_string(),
            "--send-as",
            "redis-publish",
            "--no-progress",
            "--token-file",
            token,
        ])
    };
    refused(&replay(&f.wrong), &["refused the token: WRONGPASS"]);

    let out = replay(&f.right);
    ok(&out);
    let err = text(&out.stderr);
    assert!(
        err.contains("sent 21 lines") && err.contains("21 replies"),
        "{err}"
    );
    // Every PUBLISH was taken: the messages arrive in file order.
    for i in 0..20 {
        assert_eq!(sub.message().channel, format!("S{i:02}"));
    }
    assert_eq!(sub.message().channel, "ZZEND");
}

/// Starts `tickfan subscribe` (2 connections, ends at the `ZZEND`
/// sentinel, JSON report to `json`) and waits until it has subscribed.
fn subscribe(to: SocketAddr, token: &str, json: &Path) -> Spawned {
    crate::tools::subscribe(&[
        "--to",
        &to.to_string(),
        "-k",
        "2",
        "--until",
        "ZZEND",
        "--duration",
        "60s", // a safety net: the sentinel ends the run
        "--json",
        json.to_str().unwrap(),
        "--quiet",
        "--token-file",
        token,
    ])
}

#[test]
fn subscribe_presents_the_token_on_every_connection() {
    let e = secured();
    let f = Files::new();
    let sub_addr = e.subscriber_addr().to_string();
    let out = tickfan(&[
        "subscribe",
        "--to",
        &sub_addr,
        "-k",
        "2",
        "--quiet",
        "--token-file",
        &f.wrong,
    ]);
    refused(
        &out,
        &[&format!(
            "subscriber port {sub_addr} refused the token: WRONGPASS"
        )],
    );
    assert!(
        text(&out.stdout).is_empty(),
        "no report: nothing was counted"
    );
    // No token at all: the engine's `-NOAUTH` ends the run the same way.
    let out = tickfan(&["subscribe", "--to", &sub_addr, "-k", "2", "--quiet"]);
    refused(
        &out,
        &[
            &format!("subscriber port {sub_addr}: NOAUTH Authentication required."),
            "--token-file",
        ],
    );
    assert!(text(&out.stdout).is_empty(), "no report");
    wait_until("the refusal counted", || {
        e.counters().snapshot().publish.auth_failures == 1
    });

    let json = f.dir.path().join("sub.json");
    let mut sub = subscribe(e.subscriber_addr(), &f.right, &json);
    let mut feed = Feed::connect(e.feed_addr());
    feed.send(format!("AUTH {TOKEN}\n").as_bytes());
    let ticks: Vec<String> = (0..10)
        .map(|i| tick(1 + i, &format!("S{i}"), "1.1", "1.2"))
        .collect();
    let mut lines: Vec<&str> = ticks.iter().map(String::as_str).collect();
    let sentinel = tick(99, "ZZEND", "1", "2");
    lines.push(&sentinel);
    feed.lines(&lines);
    let out = sub.0.take().unwrap().wait_with_output().unwrap();
    ok(&out);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let normal = &report["classes"][0];
    // Both connections got all 11 updates (distinct symbols: none
    // conflated); the `+OK`s were not taken for data or errors.
    assert_eq!(normal["connections"], 2, "{report}");
    assert_eq!(normal["messages"], 2 * 11, "{report}");
    assert_eq!(normal["errors"], 0, "{report}");
    assert_eq!(normal["disconnects"], 0, "{report}");
    assert_eq!(e.counters().snapshot().publish.auth_failures, 1);
}

#[test]
fn orders_presents_the_token_on_every_connection() {
    let e = secured();
    let f = Files::new();
    let order_addr = e.order_addr().to_string();
    let orders = |extra: &[&str]| {
        let mut args = vec![
            "orders",
            "--to",
            &order_addr,
            "--count",
            "40",
            "--rate",
            "4000",
            "--connections",
            "2",
        ];
        args.extend_from_slice(extra);
        tickfan(&args)
    };
    refused(
        &orders(&["--token-file", &f.wrong]),
        &[&format!(
            "order port {order_addr} refused the token: ERR invalid token"
        )],
    );
    // No token at all: the engine's refusal of the first order ends the run.
    refused(
        &orders(&["--connections", "1"]),
        &[
            &format!("order port {order_addr}: ERR authentication required"),
            "--token-file",
        ],
    );
    wait_until("both refusals counted", || {
        e.counters().snapshot().orders.gateway.auth_failures == 2
    });
    assert_eq!(e.counters().snapshot().orders.gateway.accepted, 0);

    let out = orders(&["--token-file", &f.right]);
    ok(&out);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("sent 40"), "{stdout}");
    assert!(
        stdout.contains("every order got exactly one terminal reply"),
        "{stdout}"
    );
    let o = e.counters().snapshot().orders;
    assert_eq!((o.gateway.accepted, o.gateway.auth_failures), (40, 2));
}

#[test]
fn a_missing_or_empty_token_file_is_a_usage_error() {
    let f = Files::new();
    let file = f.ticks(1);
    let empty = f.dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let missing = f.dir.path().join("no-such-token");
    let tools: [&[&str]; 3] = [&["replay", &file], &["subscribe"], &["orders"]];
    for tool in tools {
        for token in [&empty, &missing] {
            let mut args = tool.to_vec();
            args.extend([
                "--to",
                "127.0.0.1:9",
                "--token-file",
                token.to_str().unwrap(),
            ]);
            let out = tickfan(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.starts_with("tickfan: --token-file: "),
                "{args:?}: {err}"
            );
        }
    }
    // The raw forwarder has no authentication: a token there is a mistake.
    let out = tickfan(&[
        "replay",
        &file,
        "--to",
        "127.0.0.1:9",
        "--send-as",
        "pmessage",
        "--token-file",
        &f.right,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--send-as pmessage"),
        "{}",
        text(&out.stderr)
    );
}
