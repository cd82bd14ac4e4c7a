//! The tools' flags: addresses by host name, zero durations refused, and
//! `--bridge` errors that say which key is wrong and what it accepts.

use super::tools::{ok, text, tickfan};
use super::util::{engine, tick, wait_until};

#[test]
fn replay_to_localhost_reaches_the_engine() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.csv");
    let lines: Vec<String> = (0..50)
        .map(|i| tick(1_000 + i, "EURUSD", "1.1", "1.2"))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let to = format!("localhost:{}", e.feed_addr().port());
    ok(&tickfan(&["replay", file.to_str().unwrap(), "--to", &to]));
    wait_until("50 ticks through localhost", || {
        e.counters().snapshot().feed.ticks_valid == 50
    });
    e.stop();
}

#[test]
fn an_address_without_a_port_is_a_bad_flag() {
    for tool in ["replay", "subscribe", "orders"] {
        let mut args = vec![tool, "--to", "localhost"];
        if tool == "replay" {
            args.insert(1, "/dev/null");
        }
        let out = tickfan(&args);
        assert_eq!(out.status.code(), Some(2), "{tool}");
        assert!(
            text(&out.stderr).contains("HOST:PORT"),
            "{tool}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_zero_duration_is_a_bad_flag() {
    for args in [
        &["demo", "--duration", "0s"][..],
        &["replay", "/dev/null", "--duration", "0s"],
        &["subscribe", "--duration", "0ms"],
        &["gen", "--duration", "0s"],
    ] {
        let out = tickfan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("longer than 0"), "{args:?}: {err}");
    }
}

#[test]
fn a_bad_bridge_value_names_the_key_and_the_accepted_forms() {
    let out = tickfan(&["serve", "--bridge", "latency=banana"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for want in [
        "latency",
        "banana",
        "fixed:D",
        "uniform:MIN..MAX",
        "exp:MEAN",
    ] {
        assert!(err.contains(want), "missing {want}: {err}");
    }
    let out = tickfan(&["serve", "--bridge", "down=soon+5s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("down: 'soon' is not a duration"));
}
