//! The client-side tools, run as the binary an operator runs: `gen` is
//! deterministic and its files are clean ticks; `replay` sends every line
//! once per loop, in order, and never before its intended time; `subscribe`
//! counts exactly what an engine sent (messages, sequence gaps); `report`
//! reads the histogram log an engine wrote; `demo` runs to completion with
//! every stage in its report.

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use tickfan::feed::parse::{parse_line, Line};
use tickfan::metrics::Stage;
use tickfan::sys::clock::wall_ns;

use crate::util::{engine, engine_with, shared_data, spawn_until, tick, wait_until, Feed, Spawned};

pub(crate) fn tickfan(args: &[&str]) -> Output {
    // A `serve` started here journals nothing into the working tree.
    Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(args)
        .envs(crate::util::scratch_env())
        .output()
        .expect("binary runs")
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn gen(dir: &Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let p = dir.join(name);
    let mut args = vec!["gen", "-o", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&tickfan(&args));
    std::fs::read(p).unwrap()
}

#[test]
fn gen_is_deterministic_for_a_seed_and_writes_clean_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ["--symbols", "200", "--ticks", "20000", "--seed", "42"];
    let a = gen(dir.path(), "a.csv", &spec);
    let b = gen(dir.path(), "b.csv", &spec);
    assert_eq!(a, b, "same seed, same bytes");
    let c = gen(
        dir.path(),
        "c.csv",
        &["--symbols", "200", "--ticks", "20000", "--seed", "43"],
    );
    assert_ne!(a, c, "another seed, another file");

    let text = std::str::from_utf8(&a).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("ts_ns,symbol,bid,ask,bid_qty,ask_qty"));
    let mut per_symbol: HashMap<&str, u64> = HashMap::new();
    let mut last_ts = 0;
    let mut n = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 6, "{l}");
        let ts: u64 = f[0].parse().unwrap();
        assert!(ts >= last_ts, "ts_ns never goes back");
        last_ts = ts;
        for price in [f[2], f[3]] {
            let decimals = price.split_once('.').unwrap().1.len();
            assert!(decimals == 3 || decimals == 5, "{price}");
        }
        *per_symbol.entry(f[1]).or_default() += 1;
        n += 1;
    }
    assert_eq!(n, 20_000);
    assert!(per_symbol.len() <= 200);
    // Zipf popularity: rank 1 (the first pair name) is the busiest symbol.
    let top = per_symbol.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(*top.0, "EURUSD");
    assert!(
        *top.1 > 20_000 / 200 * 5,
        "rank 1 far above the mean: {top:?}"
    );

    // Every generated line is a valid tick for the engine.
    let e = engine();
    let mut feed = Feed::connect(e.feed_addr());
    feed.send(&a);
    wait_until("every generated tick read", || {
        e.counters().snapshot().ticks_received == 20_000
    });
    let s = e.counters().snapshot();
    // Sent in one go, so part may be conflated at the feed (not parsed):
    // valid + conflated is every line, and the parser itself takes each.
    assert_eq!(
        (
            s.feed.ticks_valid + s.feed.ticks_conflated,
            s.poison_total,
            s.feed.lines_skipped
        ),
        (20_000, 0, 1)
    );
    for line in a.split(|&b| b == b'\n').skip(1).filter(|l| !l.is_empty()) {
        assert!(
            matches!(parse_line(line), Ok(Line::Tick { .. })),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn gen_bursts_multiply_the_rate() {
    let dir = tempfile::tempdir().unwrap();
    let a = gen(
        dir.path(),
        "b.csv",
        &[
            "--duration",
            "2s",
            "--rate",
            "20000",
            "--burst-factor",
            "5",
            "--burst-every",
            "1s",
            "--burst-len",
            "100ms",
            "--start-ns",
            "0",
        ],
    );
    let (mut burst, mut calm) = (0u64, 0u64);
    for l in std::str::from_utf8(&a).unwrap().lines().skip(1) {
        let ts: u64 = l.split(',').next().unwrap().parse().unwrap();
        assert!(ts < 2_000_000_000, "within --duration");
        if ts % 1_000_000_000 < 100_000_000 {
            burst += 1;
        } else {
            calm += 1;
        }
    }
    // Expected: 2 × 0.1 s × 100k/s = 20k in bursts, 2 × 0.9 s × 20k/s = 36k outside.
    let burst_rate = burst as f64 / 0.2;
    let calm_rate = calm as f64 / 1.8;
    let ratio = burst_rate / calm_rate;
    assert!((4.0..6.0).contains(&ratio), "burst ratio {ratio}");
    assert!((18_000.0..22_000.0).contains(&calm_rate), "{calm_rate}");
}

/// Reads of one connection: (wall ns when it arrived, bytes).
pub(crate) type Reads = Vec<(u64, Vec<u8>)>;

/// Accepts one connection and returns every byte it sent, each read
/// tagged with the wall time it arrived.
pub(crate) fn capture() -> (std::net::SocketAddr, std::thread::JoinHandle<Reads>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut reads = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                return reads;
            }
            reads.push((wall_ns(), buf[..n].to_vec()));
        }
    });
    (addr, h)
}

/// Replays `n` EURUSD ticks with `--stamp` and `extra` flags to a capturing
/// listener; returns the lines as (arrival wall time, `ts_ns` field, rest
/// of the line without its newline).
fn replay_stamped(n: u64, extra: &[&str]) -> Vec<(u64, u64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.csv");
    let lines: Vec<String> = (0..n)
        .map(|i| tick(1_000 + i, "EURUSD", "1.1", "1.2"))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let (addr, got) = capture();
    let addr = addr.to_string();
    let mut args = vec!["replay", file.to_str().unwrap(), "--to", &addr, "--stamp"];
    args.extend_from_slice(extra);
    ok(&tickfan(&args));
    let mut lines = Vec::new();
    let mut partial = String::new();
    for (at, bytes) in got.join().unwrap() {
        partial.push_str(&text(&bytes));
        while let Some(i) = partial.find('\n') {
            let line: String = partial.drain(..=i).collect();
            let (ts, rest) = line.trim_end().split_once(',').unwrap();
            lines.push((at, ts.parse().unwrap(), rest.to_string()));
        }
    }
    lines
}

#[test]
fn replay_sends_every_line_once_per_loop_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.csv");
    // A header, ticks, a malformed line, a comment, and no final newline.
    let body = "ts_ns,symbol,bid,ask,bid_qty,ask_qty\n1,A,1.0,1.1,1,1\nnot,a,tick\n# note\n2,B,2.0,2.1,1,1\r\n3,A,1.0,1.2,1,1";
    std::fs::write(&file, body).unwrap();
    let (addr, got) = capture();
    let out = tickfan(&[
        "replay",
        file.to_str().unwrap(),
        "--to",
        &addr.to_string(),
        "--loops",
        "3",
    ]);
    ok(&out);
    let got: Vec<u8> = got.join().unwrap().into_iter().flat_map(|r| r.1).collect();
    let once = format!("{body}\n");
    assert_eq!(text(&got), once.repeat(3));
    assert!(
        text(&out.stderr).contains("sent 18 lines"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn replay_stamps_the_intended_time_and_is_never_early() {
    let mut stamps = Vec::new();
    for (at, ts, rest) in replay_stamped(300, &["--rate", "3000"]) {
        assert_eq!(
            rest, "EURUSD,1.1,1.2,1000000,1500000",
            "only ts_ns rewritten"
        );
        // Open loop: a line leaves at or after its intended time.
        assert!(ts <= at, "sent before its intended time");
        stamps.push(ts);
    }
    assert_eq!(stamps.len(), 300);
    // The schedule: line k is due k/3000 s after the first.
    for (k, ts) in stamps.iter().enumerate() {
        let want = (k as f64 * 1e9 / 3000.0) as u64;
        assert_eq!(ts - stamps[0], want, "line {k}");
    }
}

#[test]
fn unpaced_replay_shares_clock_reads_but_never_stamps_a_line_late() {
    // Unpaced lines share one clock read per batch: every stamp must still
    // be at or before the moment its bytes arrived, and never go backwards.
    let mut stamps = Vec::new();
    for (at, ts, _) in replay_stamped(1_000, &[]) {
        assert!(ts <= at, "stamped after it arrived");
        stamps.push(ts);
    }
    assert_eq!(stamps.len(), 1_000);
    assert!(
        stamps.windows(2).all(|w| w[0] <= w[1]),
        "stamps went backwards"
    );
    assert!(stamps[0] > 1_000_000_000_000_000_000, "wall-clock stamps");
}

#[test]
fn replay_recorded_pacing_divides_the_file_gaps_by_the_speed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.csv");
    // Gaps of 0, 10 ms, 30 ms, 60 ms in source time.
    let ts = [
        5_000_000_000u64,
        5_010_000_000,
        5_040_000_000,
        5_100_000_000,
    ];
    let lines: Vec<String> = ts.iter().map(|t| tick(*t, "A", "1", "2")).collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let (addr, got) = capture();
    ok(&tickfan(&[
        "replay",
        file.to_str().unwrap(),
        "--to",
        &addr.to_string(),
        "--speed",
        "10",
        "--stamp",
    ]));
    let all: String = got
        .join()
        .unwrap()
        .into_iter()
        .map(|r| text(&r.1))
        .collect();
    let stamps: Vec<u64> = all
        .lines()
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let offsets: Vec<u64> = stamps.iter().map(|s| s - stamps[0]).collect();
    assert_eq!(offsets, [0, 1_000_000, 4_000_000, 10_000_000]);
}

#[test]
fn replay_of_a_missing_file_is_one_clear_error() {
    let out = tickfan(&["replay", "/no/such/ticks.csv", "--to", "127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("tickfan: cannot open /no/such/ticks.csv"),
        "{err}"
    );
}

/// Starts `tickfan subscribe` and waits until it says it is subscribed.
pub(crate) fn subscribe(args: &[&str]) -> Spawned {
    let mut all = vec!["subscribe"];
    all.extend_from_slice(args);
    spawn_until(&all, "subscribed to").0
}

#[test]
fn subscribe_counts_what_the_engine_sent() {
    let e = engine();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sub.json");
    let mut sub = subscribe(&[
        "--to",
        &e.subscriber_addr().to_string(),
        "-k",
        "3",
        "--slow",
        "1",
        "--until",
        "ZZEND",
        "--duration",
        "60s", // a safety net: the sentinel ends the run
        "--json",
        json.to_str().unwrap(),
        "--log-dir",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    let symbols: Vec<String> = (0..50).map(|i| format!("S{i:02}")).collect();
    let mut feed = Feed::connect(e.feed_addr());
    // Rounds the publisher drains one by one: nothing conflated, so every
    // symbol's first update (seq 1) reaches every subscriber.
    for round in 1..=3u64 {
        let lines: Vec<String> = symbols
            .iter()
            .map(|s| tick(wall_ns(), s, "1.1", "1.2"))
            .collect();
        let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        feed.lines(&refs);
        wait_until("round published", || {
            e.counters().snapshot().publish.published == round * 50
        });
    }
    // A burst: 20 updates per symbol at once, partly conflated by the engine.
    let mut burst = Vec::new();
    for _ in 0..20 {
        for s in &symbols {
            burst.push(tick(wall_ns(), s, "1.1", "1.3"));
        }
    }
    let refs: Vec<&str> = burst.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    wait_until("burst taken", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 50 * 23
            && c.publish.published + c.publish.conflated == c.feed.ticks_valid
    });
    feed.lines(&[&tick(wall_ns(), "ZZEND", "1", "2")]);
    wait_until("sentinel published", || {
        let c = e.counters().snapshot();
        c.publish.published + c.publish.conflated == c.feed.ticks_valid
            && c.feed.ticks_valid == 50 * 23 + 1
    });
    let child = sub.0.take().unwrap();
    let out = child.wait_with_output().unwrap();
    ok(&out);
    let c = e.counters().snapshot();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let normal = &report["classes"][0];
    assert_eq!(normal["class"], "normal");
    assert_eq!(normal["connections"], 3);
    // Every connection got every published update, and counted every
    // conflated one as a sequence gap.
    assert_eq!(normal["messages"], 3 * c.publish.published, "{report}");
    assert_eq!(normal["gaps"], 3 * c.publish.conflated, "{report}");
    assert_eq!(normal["repeats"], 0);
    assert_eq!(normal["disconnects"], 0);
    assert_eq!(normal["untimed"], 0, "ts_ns were recent: all timed");
    assert_eq!(normal["latency"]["count"], 3 * c.publish.published);
    assert_eq!(report["classes"][1]["class"], "slow");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("normal") && stdout.contains("p99"),
        "{stdout}"
    );
    assert!(dir.path().join("subscribers.hlog").exists());
}

#[test]
fn report_reads_the_histogram_log_an_engine_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_with(|c| c.log_dir = Some(dir.path().to_path_buf()));
    let mut s = crate::util::Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    let lines: Vec<String> = (0..500)
        .map(|i| tick(wall_ns(), &format!("S{}", i % 20), "1.1", "1.2"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    wait_until("all taken", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 500 && c.publish.published + c.publish.conflated == 500
    });
    let final_report = e.stop();

    let out = tickfan(&["report", dir.path().to_str().unwrap()]);
    ok(&out);
    let stdout = text(&out.stdout);
    // Every stage that recorded something (no orders were sent here).
    for stage in Stage::ALL
        .into_iter()
        .filter(|s| final_report.stage(*s).is_some_and(|x| x.pct.count > 0))
    {
        assert!(
            stdout.contains(&format!("engine/{}", stage.as_str())),
            "{stage:?} missing:\n{stdout}"
        );
    }
    for f in [
        "tick-path.svg",
        "order-path.svg",
        "engine-stages.svg",
        "report.html",
        "summary.json",
    ] {
        let p = dir.path().join(f);
        assert!(p.exists(), "{f} written");
        if f.ends_with(".svg") {
            assert!(std::fs::read_to_string(&p).unwrap().contains("<svg"));
        }
    }
    assert!(dir.path().join("engine.engine_e2e.hgrm").exists());
    // The log holds exactly what the engine measured.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    for stage in final_report.stages.iter().filter(|s| s.pct.count > 0) {
        let series = json["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["source"] == "engine" && s["tag"] == stage.stage)
            .unwrap_or_else(|| panic!("{} in summary.json", stage.stage));
        assert_eq!(series["count"], stage.pct.count, "{}", stage.stage);
    }
}

#[test]
fn report_of_a_directory_without_logs_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = tickfan(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no *.hlog histogram logs"), "{err}");
}

#[test]
fn demo_runs_to_completion_with_every_stage_in_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let report_dir = dir.path().join("report");
    let out = tickfan(&[
        "demo",
        "--duration",
        "1s",
        "--rate",
        "2000",
        "--subscribers",
        "3",
        "--slow",
        "1",
        "--report-dir",
        report_dir.to_str().unwrap(),
    ]);
    ok(&out);
    let stdout = text(&out.stdout);
    for stage in Stage::ALL {
        // Every stage is a row of the engine's final report…
        assert!(
            stdout.lines().any(|l| l.starts_with(stage.as_str())),
            "{stage:?} missing from the final report:\n{stdout}"
        );
        // …and every stage that saw traffic is in the histogram log (the
        // demo's orders are all valid, so nothing is rejected; a single
        // node has no backbone).
        if stage != Stage::OrderReject && stage != Stage::Backbone {
            assert!(
                stdout.contains(&format!("engine/{}", stage.as_str())),
                "{stage:?} missing from the log:\n{stdout}"
            );
        }
    }
    assert!(
        stdout.contains("every order got exactly one terminal reply"),
        "{stdout}"
    );
    assert!(stdout.contains("subscribers/e2e_normal"), "{stdout}");
    assert!(stdout.contains("report files written to"), "{stdout}");
    for f in [
        "engine.hlog",
        "subscribers.hlog",
        "replay.hlog",
        "tick-path.svg",
        "order-path.svg",
        "engine-stages.svg",
        "report.html",
        "final-report.json",
        "summary.json",
    ] {
        assert!(report_dir.join(f).exists(), "{f} written");
    }
    // The orders went through a journal in the demo's own directory…
    let journal = report_dir.join("journal");
    let segments = std::fs::read_dir(&journal)
        .unwrap_or_else(|e| panic!("{}: {e}", journal.display()))
        .count();
    assert!(segments > 0, "no journal segment in {}", journal.display());
    assert!(
        text(&out.stderr).contains("order journal in"),
        "{}",
        text(&out.stderr)
    );
    // …which the next run starts afresh: its ids are not duplicates of
    // this run's, and no order of this run is recovered into it.
    let again = tickfan(&[
        "demo",
        "--duration",
        "1s",
        "--rate",
        "2000",
        "--subscribers",
        "1",
        "--slow",
        "0",
        "--report-dir",
        report_dir.to_str().unwrap(),
    ]);
    ok(&again);
    let stdout = text(&again.stdout);
    assert!(
        stdout.contains("every order got exactly one terminal reply"),
        "{stdout}"
    );
    assert!(stdout.contains("rejected: none"), "{stdout}");
}

#[test]
fn demo_replays_the_recorded_file() {
    let Some(path) = shared_data("fx-quotes.csv") else {
        eprintln!("skipped: ../shared/data/fx-quotes.csv is absent");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = tickfan(&[
        "demo",
        "--file",
        path.to_str().unwrap(),
        "--duration",
        "1s",
        "--rate",
        "5000",
        "--subscribers",
        "2",
        "--slow",
        "0",
        "--report-dir",
        dir.path().to_str().unwrap(),
    ]);
    ok(&out);
    assert!(
        text(&out.stdout).contains("poison 0"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn serve_with_an_unwritable_log_dir_exits_1_with_one_line() {
    let out = tickfan(&[
        "serve",
        "--feed-listen",
        "127.0.0.1:0",
        "--sub-listen",
        "127.0.0.1:0",
        // Not the default ports: another engine on this host may hold them.
        "--order-listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--log-dir",
        "/proc/no-such-dir",
        "--duration",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write histogram log"), "{err}");
}

#[test]
fn replay_sends_the_recorded_file_line_for_line() {
    let Some(path) = shared_data("fx-quotes.csv") else {
        eprintln!("skipped: ../shared/data/fx-quotes.csv is absent");
        return;
    };
    let data_lines = std::fs::read(&path)
        .unwrap()
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count() as u64
        - 1; // the header
    let e = engine();
    ok(&tickfan(&[
        "replay",
        path.to_str().unwrap(),
        "--to",
        &e.feed_addr().to_string(),
    ]));
    wait_until("every recorded line read", || {
        e.counters().snapshot().ticks_received == data_lines
    });
    let c = e.counters().snapshot();
    assert_eq!((c.poison_total, c.feed.lines_skipped), (0, 1));
}
