//! The binary: bad flags give one clear line and exit 2; a timed run prints
//! the final report and exits 0.

use std::process::Command;

/// Every listener of `serve` on an ephemeral loopback port.
const EPHEMERAL_PORTS: [&str; 8] = [
    "--feed-listen",
    "127.0.0.1:0",
    "--sub-listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--order-listen",
    "127.0.0.1:0",
];

fn tickfan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("binary runs")
}

#[test]
fn bad_flags_and_values_exit_2_with_one_line() {
    for args in [
        &["serve", "--max-symbols", "lots"][..],
        &["serve", "--no-such-flag"],
        &["serve", "--pin", "gpu=1"],
        &["serve", "--max-line-len", "3"],
        &["serve", "--duration", "soon"],
        &["serve", "--feed-listen", "nowhere"],
        &["serve", "--order-queue-capacity", "0"],
        &["serve", "--retry-jitter", "wild"],
        &["serve", "--retry-base", "1s", "--retry-cap", "10ms"],
        &["serve", "--bridge", "transient=2"],
        &["serve", "--bridge", "down=10s"],
        &["serve", "--bridge", "dup=2"],
        &["serve", "--large-threshold", "0"],
        &["serve", "--large-threshold", "0.001"],
        &["serve", "--order-lanes", "three"],
        &["serve", "--max-chunks", "0"],
        &["serve", "--gap-timeout", "0ms"],
        &["serve", "--alert-bridge-call", "0s"],
        &["serve", "--alert-bridge-call", "soon"],
        &["serve", "--order-listen", "127.0.0.1:9101"],
        &["frobnicate"],
    ] {
        let out = tickfan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("tickfan: "), "{args:?}: {err}");
    }
}

#[test]
fn timed_run_prints_the_final_report() {
    let logs = tempfile::tempdir().unwrap();
    let mut args = vec!["serve", "--log-dir", logs.path().to_str().unwrap()];
    args.extend_from_slice(&EPHEMERAL_PORTS);
    args.extend_from_slice(&[
        "--duration",
        "300ms",
        "--report-interval",
        "100ms",
        "--pin",
        "feed=100000",
    ]);
    let out = tickfan(&args);
    assert_eq!(out.status.code(), Some(0));
    // --log-dir: the interval log and the final report, text and JSON.
    for f in ["engine.hlog", "final-report.txt", "final-report.json"] {
        assert!(logs.path().join(f).exists(), "{f} missing");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(logs.path().join("final-report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["counters"]["ticks_received"], 0);
    let stdout = String::from_utf8(out.stdout).unwrap();
    for stage in [
        "feed_parse",
        "slot_wait",
        "publish",
        "socket_write",
        "engine_e2e",
    ] {
        assert!(stdout.contains(stage), "{stage} missing from:\n{stdout}");
    }
    assert!(stdout.contains("ticks received 0 = valid 0 + poison 0"));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.matches("core 100000 not available").count(),
        1,
        "a missing core is said once: {stderr}"
    );
}

#[test]
fn a_port_in_use_exits_1_with_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = tickfan(&[
        "serve",
        "--feed-listen",
        &addr,
        "--sub-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("cannot listen on") && err.contains("feed"),
        "{err}"
    );
}

#[test]
fn sigterm_stops_the_engine_with_the_final_report() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .arg("serve")
        .args(EPHEMERAL_PORTS)
        .arg("--quiet")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    // Wait for the engine to say it is serving, then signal it by its pid.
    let _err = crate::util::wait_for_stderr(&mut child, "tickfan serving");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("tickfan final report"), "{stdout}");
}

#[test]
fn a_config_file_sets_flags_the_command_line_wins_and_bad_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("tickfan.toml");
    std::fs::write(
        &cfg,
        "feed-listen = \"127.0.0.1:0\"\nsub_listen = \"127.0.0.1:0\"\nadmin-listen = \"127.0.0.1:0\"\norder-listen = \"127.0.0.1:0\"\nduration = \"10m\"\nquiet = true\nmax-symbols = 5\nalert-bridge-call = \"2s\"\n",
    )
    .unwrap();
    // The file says 10 minutes; the command line says 200 ms and wins.
    let out = tickfan(&[
        "serve",
        "--config",
        cfg.to_str().unwrap(),
        "--duration",
        "200ms",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("tickfan final report"));

    std::fs::write(&cfg, "max-symbols = 0\n").unwrap();
    let out = tickfan(&["serve", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--max-symbols") && err.lines().count() == 1,
        "{err}"
    );

    std::fs::write(&cfg, "alert_bridge_call = \"0s\"\n").unwrap();
    let out = tickfan(&["serve", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--alert-bridge-call") && err.lines().count() == 1,
        "{err}"
    );

    std::fs::write(&cfg, "max-symbolz = 5\n").unwrap();
    let out = tickfan(&["serve", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown key 'max-symbolz'") && err.lines().count() == 1,
        "{err}"
    );
}

/// A child's stderr, line by line, read on a thread so a wait can time out
/// (a blocked read on a live process would hang the test instead).
struct StderrLines(std::sync::mpsc::Receiver<String>);

impl StderrLines {
    fn new(err: std::process::ChildStderr) -> Self {
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        StderrLines(rx)
    }

    /// The first line from now on containing `needle` (fails the test
    /// after [`crate::util::DEADLINE`] or if the process ends first).
    fn until(&self, needle: &str) -> String {
        let end = std::time::Instant::now() + crate::util::DEADLINE;
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("no stderr line with {needle:?}: {e}"),
            }
        }
    }
}

#[test]
fn a_bridge_call_held_through_a_stop_raises_bridge_call_slow_and_a_second_signal_exits() {
    use crate::util::{OrderClient, Spawned};
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .arg("serve")
        .args(EPHEMERAL_PORTS)
        .args([
            "--quiet",
            "--report-interval",
            "50ms",
            "--alert-bridge-call",
            "1s",
            // The stop waits for the worker (it takes the queued order and
            // calls the venue even if the signal comes first).
            "--shutdown-deadline",
            "1h",
            // A venue that takes 1 s per lot: an order of a million lots
            // (whole, one lane) holds its worker for days.
            "--order-lanes",
            "shared",
            "--bridge",
            "name=silent,latency=fixed:0ms,per_lot=1s,transient=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut child = Spawned(Some(child)); // killed if the test fails
    let pid = child.0.as_ref().unwrap().id().to_string();
    let err = StderrLines::new(child.0.as_mut().unwrap().stderr.take().unwrap());
    let serving = err.until("tickfan serving");
    let orders: std::net::SocketAddr = serving
        .trim_end()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("order address in {serving:?}"));
    let signal = || {
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
    };

    let mut cl = OrderClient::connect(orders);
    cl.new_order("o-1", "EURUSD", "1000000");
    assert_eq!(cl.raw_reply(), "ACK o-1");
    // Stop at once: the call starts (or has started) and cannot end, so the
    // graceful stop waits, and the alert is raised a second into that wait
    // (the gateway keeps its gauges live after closing its intake).
    signal();
    let line = err.until("alert bridge_call_slow");
    assert!(
        line.contains("started: a bridge call has been in progress")
            && line.contains("(1 worker in a bridge call)"),
        "{line}"
    );
    // A second signal ends the wait at once.
    signal();
    let status = child.0.take().unwrap().wait().unwrap();
    assert_eq!(status.code(), Some(130));
}
