//! The binary: bad flags exit 2 (clap's own words for what clap refuses,
//! one line for a value the engine refuses); a timed run prints the final
//! report and exits 0; the banner names every address; `--log-format json`.

use crate::util::EPHEMERAL_PORTS;
use std::process::Command;

fn tickfan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(args)
        .env("RUST_LOG", "info")
        .envs(crate::util::scratch_env())
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
        &["serve", "--sub-flush-gap", "200ms"],
        &["serve", "--sub-flush-gap", "soon"],
        &["serve", "--alert-bridge-call", "0s"],
        &["serve", "--alert-bridge-call", "soon"],
        &["serve", "--order-listen", "127.0.0.1:9101"],
        &["frobnicate"],
    ] {
        let out = tickfan(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        if err.starts_with("error: ") {
            // Refused by clap: its own text, ending with its pointer to --help.
            assert!(
                err.trim_end()
                    .ends_with("For more information, try '--help'."),
                "{args:?}: {err}"
            );
        } else {
            // Refused by the engine's validation: one line naming the flag.
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("tickfan: "), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_misspelt_flag_gets_clap_s_tip_and_exit_2() {
    let out = tickfan(&["serve", "--max-symbol", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: unexpected argument '--max-symbol' found")
            && err.contains("tip: a similar argument exists: '--max-symbols'")
            && err.contains("Usage: tickfan serve"),
        "{err}"
    );
    let out = tickfan(&["serve", "--max-symbols", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("error: invalid value 'lots' for '--max-symbols <N>'"),
        "{err}"
    );
}

#[test]
fn help_groups_the_serve_flags_under_headings() {
    let out = tickfan(&["serve", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    let headings: Vec<&str> = help
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
        .collect();
    assert_eq!(
        headings,
        [
            "Options:",
            "Listeners:",
            "Connections:",
            "TLS:",
            "Market data:",
            "Subscribers:",
            "Orders:",
            "Retry:",
            "Lanes:",
            "Fills:",
            "Alerts:",
            "Dead letters:",
            "Reporting:",
            "Backbone:"
        ]
    );
    // The admin endpoint is served, and its help says what it serves.
    let admin = help
        .split("--admin-listen")
        .nth(1)
        .and_then(|rest| rest.lines().nth(1))
        .unwrap();
    assert!(
        admin.contains("/health") && admin.contains("/metrics") && !admin.contains("not served"),
        "{admin}"
    );
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
        .envs(crate::util::scratch_env())
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
        .envs(crate::util::scratch_env())
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
    let orders = banner_addr(&serving, "orders");
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

/// The address after `what ` in the start-up banner (`… · orders 127.0.0.1:9103 · …`).
fn banner_addr(banner: &str, what: &str) -> std::net::SocketAddr {
    banner
        .split(&format!(" {what} "))
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|a| a.trim_start_matches("http://"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{what} address in {banner:?}"))
}

#[test]
fn the_banner_names_every_address_and_the_admin_one_answers() {
    let mut args = vec!["serve", "--quiet"];
    args.extend_from_slice(&EPHEMERAL_PORTS);
    let (_engine, banner) = crate::util::spawn_until(&args, "tickfan serving");
    for what in ["feed", "subscribers", "orders"] {
        assert_ne!(banner_addr(&banner, what).port(), 0, "{banner}");
    }
    assert!(banner.contains("admin http://"), "{banner}");
    let admin = banner_addr(&banner, "admin");
    assert_eq!(crate::admin::http(admin, "GET", "/health").0, 200);
}

#[test]
fn log_format_json_writes_one_object_per_log_line() {
    let mut args = vec!["serve", "--log-format", "json", "--quiet"];
    args.extend_from_slice(&EPHEMERAL_PORTS);
    // A core that does not exist: one WARN line; RUST_LOG=info adds the
    // listening line.
    args.extend_from_slice(&["--duration", "300ms", "--pin", "feed=100000"]);
    let out = tickfan(&args);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let mut levels = Vec::new();
    for line in stderr.lines() {
        if line.starts_with("tickfan serving: ") {
            continue; // the banner is for a person, not a log line
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line:?}"));
        let o = v.as_object().expect("an object");
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 4, "{line}");
        for k in ["time", "level", "target", "message"] {
            assert!(o[k].is_string(), "{k} in {line}");
        }
        let time = o["time"].as_str().unwrap();
        assert!(
            time.ends_with('Z') && humantime::parse_rfc3339(time).is_ok(),
            "RFC 3339 UTC: {time}"
        );
        assert!(
            o["target"].as_str().unwrap().starts_with("tickfan"),
            "{line}"
        );
        levels.push((
            o["level"].as_str().unwrap().to_string(),
            o["message"].as_str().unwrap().to_string(),
        ));
    }
    assert!(
        levels
            .iter()
            .any(|(l, m)| l == "WARN" && m.contains("core 100000 not available")),
        "{stderr}"
    );
    assert!(
        levels
            .iter()
            .any(|(l, m)| l == "INFO" && m.contains("feed listening on")),
        "{stderr}"
    );
}

#[test]
fn pin_auto_says_its_layout_in_one_line() {
    let mut args = vec!["serve"];
    args.extend_from_slice(&EPHEMERAL_PORTS);
    args.extend_from_slice(&["--duration", "200ms", "--pin", "auto"]);
    let out = tickfan(&args);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("pin auto:")).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 4 {
        assert!(lines[0].contains("feed on core"), "{}", lines[0]);
    } else {
        assert!(lines[0].contains("run unpinned"), "{}", lines[0]);
        assert!(!stderr.contains("pinned to core"), "{stderr}");
    }
}
