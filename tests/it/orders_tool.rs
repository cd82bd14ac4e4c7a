//! `tickfan orders`: open-loop order flow against a running engine; it
//! checks every order got exactly one terminal reply and exits 0; with
//! `--status` it asks `STATUS` for every id it sent and tallies the answers.

use std::process::Command;

use tickfan::bridge::spec::SimSpec;

use crate::util::engine_with;

#[test]
fn the_orders_tool_sees_exactly_one_terminal_reply_per_order() {
    let e = engine_with(|c| {
        c.order.bridges = vec![
            SimSpec {
                transient: 0.2,
                partial: 0.2,
                max_fills: 3,
                ..SimSpec::instant("a")
            },
            SimSpec {
                permanent: 0.05,
                ..SimSpec::instant("b")
            },
        ];
        c.order.retry.base = std::time::Duration::from_millis(1);
    });
    let out = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args([
            "orders",
            "--to",
            &e.order_addr().to_string(),
            "--count",
            "600",
            "--rate",
            "3000",
            "--connections",
            "3",
            "--qty",
            "loguniform:0.01..50",
            "--status",
        ])
        .output()
        .expect("binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("sent 600"), "{stdout}");
    assert!(
        stdout.contains("every order got exactly one terminal reply"),
        "{stdout}"
    );
    let s = e.counters().snapshot().orders;
    assert_eq!(s.gateway.accepted, 600);
    assert!(s.dead_total > 0 && s.retries[0] > 0, "{s:?}");
    // `--status`: every id answered, each in a terminal state, as many
    // DONE and DEAD as the engine counted.
    let tally = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("STATUS of every id sent: "))
        .unwrap_or_else(|| panic!("no STATUS tally in: {stdout}"));
    let mut counts = std::collections::HashMap::new();
    for part in tally.split(", ") {
        let (state, n) = part.rsplit_once(' ').unwrap();
        let word = state.split(' ').next().unwrap().to_string();
        *counts.entry(word).or_insert(0u64) += n.parse::<u64>().unwrap();
    }
    assert_eq!(counts.values().sum::<u64>(), 600, "{tally}");
    assert_eq!(counts.get("DONE").copied(), Some(s.done_total), "{tally}");
    assert_eq!(counts.get("DEAD").copied(), Some(s.dead_total), "{tally}");
    assert_eq!(counts.len(), 2, "only terminal states: {tally}");
}

#[test]
fn bad_tool_flags_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(["orders", "--qty", "normal:1"])
        .output()
        .expect("binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--qty"));
}
