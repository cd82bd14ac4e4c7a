//! `replay` of the files a desk already has (issue 28), run as the binary
//! an operator runs, over loopback: Databento's own DBN sample files
//! (`tests/data/dbn/`, v1–v3, plain and `.zst`, every quote schema) and a
//! Tardis quotes sample (`tests/data/tardis/`, gzipped here) become quotes
//! the engine takes; a schema without quotes is refused naming it;
//! `--format`, `--ts`, `--symbol-map` and `--speed` do what they say; bad
//! input (a cut `.zst`/`.gz`, an unknown DBN version or record, a Tardis
//! row missing a field) is one line naming the file, the record and the
//! reason, then skipped or stopped at per `--on-error`; and memory stays
//! flat while a generated DBN stream is replayed from a pipe.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::tools::{capture, ok, text, tickfan};
use crate::util::{engine, wait_until};

/// A file of `tests/data/`.
fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// The quote-schema samples of Databento's `dbn` repository.
const DBN_QUOTES: [&str; 9] = [
    "test_data.mbp-1.dbn",
    "test_data.mbp-1.v1.dbn.zst",
    "test_data.mbp-1.v2.dbn.zst",
    "test_data.mbp-1.v3.dbn.zst",
    "test_data.tbbo.v3.dbn.zst",
    "test_data.bbo-1s.v3.dbn.zst",
    "test_data.bbo-1m.v2.dbn.zst",
    "test_data.cmbp-1.v3.dbn.zst",
    "test_data.cbbo-1s.v3.dbn.zst",
];

/// Replays `file` with `extra` flags to a capturing listener; returns the
/// run's output and the lines that arrived.
fn replay_to_capture(file: &Path, extra: &[&str]) -> (std::process::Output, Vec<String>) {
    let (addr, got) = capture();
    let addr = addr.to_string();
    let mut args = vec![
        "replay",
        file.to_str().unwrap(),
        "--to",
        &addr,
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    let out = tickfan(&args);
    // A refused file never connects: let the listener go.
    if out.status.code() == Some(2) {
        drop(std::net::TcpStream::connect(&addr));
    }
    let bytes: Vec<u8> = got.join().unwrap().into_iter().flat_map(|r| r.1).collect();
    (out, text(&bytes).lines().map(str::to_string).collect())
}

/// The sample Tardis quotes, gzipped into `dir`.
fn tardis_gz(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("binance_quotes_2020-04-01.csv.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(body.as_bytes()).unwrap();
    gz.finish().unwrap();
    p
}

fn tardis_sample() -> String {
    std::fs::read_to_string(data("tardis/quotes_sample.csv")).unwrap()
}

#[test]
fn dbn_mbp1_of_every_version_gives_the_same_quotes() {
    let want = [
        "1609160400006136329,ESH1,3720.25,3720.5,24,11",
        "1609160400006246513,ESH1,3720.25,3720.5,24,12",
    ];
    for f in &DBN_QUOTES[..4] {
        let (out, lines) = replay_to_capture(&data(&format!("dbn/{f}")), &[]);
        ok(&out);
        assert_eq!(lines, want, "{f}");
        assert!(text(&out.stderr).contains("mbp-1 (GLBX.MDP3), ts_ns from ts_recv"));
    }
    // ts_event instead: the same quotes, the venue's times.
    let (out, lines) =
        replay_to_capture(&data("dbn/test_data.mbp-1.v3.dbn.zst"), &["--ts", "event"]);
    ok(&out);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].ends_with(",ESH1,3720.25,3720.5,24,11"));
    assert_ne!(lines[0], want[0], "ts_event differs from ts_recv");
}

#[test]
fn every_dbn_quote_schema_sample_is_taken_by_the_engine_without_poison() {
    let e = engine();
    let mut sent = 0u64;
    for f in DBN_QUOTES {
        let out = tickfan(&[
            "replay",
            data(&format!("dbn/{f}")).to_str().unwrap(),
            "--to",
            &e.feed_addr().to_string(),
            "--no-progress",
        ]);
        ok(&out);
        let err = text(&out.stderr);
        let n: u64 = err
            .split("sent ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{f}: {err}"));
        assert!(n > 0, "{f}: {err}");
        assert!(!err.contains("skipped"), "{f}: {err}");
        sent += n;
    }
    wait_until("every sample quote read", || {
        e.counters().snapshot().ticks_received == sent
    });
    let c = e.counters().snapshot();
    assert_eq!((c.poison_total, c.feed.ticks_valid), (0, sent));
}

#[test]
fn a_dbn_schema_without_quotes_is_refused_naming_it() {
    for (f, schema) in [
        ("test_data.trades.v3.dbn.zst", "trades"),
        ("test_data.ohlcv-1s.v3.dbn.zst", "ohlcv-1s"),
    ] {
        let (out, lines) = replay_to_capture(&data(&format!("dbn/{f}")), &[]);
        assert_eq!(out.status.code(), Some(2), "{f}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!(
                "DBN schema {schema} holds no quotes; replay takes mbp-1"
            )),
            "{err}"
        );
        assert!(lines.is_empty());
    }
}

#[test]
fn tardis_quotes_gz_become_exchange_symbol_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let gz = tardis_gz(dir.path(), &tardis_sample());
    let (out, lines) = replay_to_capture(&gz, &[]);
    ok(&out);
    assert!(
        text(&out.stderr).contains("tardis csv, ts_ns from local_timestamp"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[0],
        "1585699201270777000,binance:BTCUSDT,6422.90,6423.10,1.250,0.508"
    );
    assert_eq!(
        lines[1],
        "1585699201280777000,deribit:BTC-PERPETUAL,6424,6424.5,24470,35990"
    );
    // The exchange's timestamp, and renamed symbols.
    let map = dir.path().join("symbols.csv");
    std::fs::write(&map, "# ours\nbinance:BTCUSDT,BTCUSDT\n").unwrap();
    let (out, lines) = replay_to_capture(
        &gz,
        &["--ts", "timestamp", "--symbol-map", map.to_str().unwrap()],
    );
    ok(&out);
    assert_eq!(
        lines[0],
        "1585699201147000000,BTCUSDT,6422.90,6423.10,1.250,0.508"
    );
    assert!(lines[1].contains(",deribit:BTC-PERPETUAL,"));
}

#[test]
fn tardis_quotes_are_taken_by_the_engine_without_poison() {
    let dir = tempfile::tempdir().unwrap();
    let gz = tardis_gz(dir.path(), &tardis_sample());
    let e = engine();
    ok(&tickfan(&[
        "replay",
        gz.to_str().unwrap(),
        "--to",
        &e.feed_addr().to_string(),
    ]));
    wait_until("every Tardis row read", || {
        e.counters().snapshot().ticks_received == 6
    });
    assert_eq!(e.counters().snapshot().poison_total, 0);
}

#[test]
fn recorded_pacing_follows_the_vendor_timestamps_over_the_speed() {
    let dir = tempfile::tempdir().unwrap();
    // local_timestamp gaps of 0, 10 ms, 30 ms, 60 ms.
    let mut body = String::from(
        "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n",
    );
    for us in [5_000_000u64, 5_010_000, 5_040_000, 5_100_000] {
        body.push_str(&format!("binance,BTCUSDT,{us},{us},1,2,1,1\n"));
    }
    let gz = tardis_gz(dir.path(), &body);
    let (out, lines) = replay_to_capture(&gz, &["--speed", "10", "--stamp"]);
    ok(&out);
    let stamps: Vec<u64> = lines
        .iter()
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let offsets: Vec<u64> = stamps.iter().map(|s| s - stamps[0]).collect();
    assert_eq!(offsets, [0, 1_000_000, 4_000_000, 10_000_000]);
    // DBN: ts_recv gaps of the sample over the speed.
    let f = data("dbn/test_data.bbo-1s.v3.dbn.zst");
    let (_, plain) = replay_to_capture(&f, &[]);
    let (out, stamped) = replay_to_capture(&f, &["--speed", "1000", "--stamp"]);
    ok(&out);
    let ts = |ls: &[String]| -> Vec<u64> {
        ls.iter()
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect()
    };
    let (recorded, sent) = (ts(&plain), ts(&stamped));
    for k in 0..recorded.len() {
        assert_eq!(
            sent[k] - sent[0],
            (recorded[k] - recorded[0]) / 1000,
            "quote {k}"
        );
    }
}

#[test]
fn format_overrides_detection_and_names_the_send_side_flag() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("quotes.csv");
    std::fs::write(&plain, tardis_sample()).unwrap();
    // Tardis by content; as tickfan CSV when told: every line as is.
    let (out, lines) = replay_to_capture(&plain, &["--format", "csv"]);
    ok(&out);
    assert_eq!(lines.join("\n") + "\n", tardis_sample());
    let (out, _) = replay_to_capture(&plain, &["--format", "dbn"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--format dbn, but the file does not start with DBN"),
        "{err}"
    );
    // The send side's values, given to --format: a pointer to --send-as.
    let out = tickfan(&["replay", plain.to_str().unwrap(), "--format", "pmessage"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.lines()
            .next()
            .unwrap()
            .contains("what replay sends is --send-as pmessage"),
        "{err}"
    );
}

/// The skip lines of a run's stderr (`replay: FILE: record|line N: …`).
fn skip_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.contains(": record ") || l.contains(": line "))
        .collect()
}

#[test]
fn a_cut_zst_or_gz_is_one_line_and_the_quotes_before_it_are_sent() {
    let dir = tempfile::tempdir().unwrap();
    // A generated DBN stream, cut in the middle of its zstd frame.
    let full = dir.path().join("gen.dbn.zst");
    ok(&tickfan(&[
        "gen",
        "--dbn",
        "--ticks",
        "20000",
        "--symbols",
        "20",
        "-o",
        full.to_str().unwrap(),
    ]));
    let bytes = std::fs::read(&full).unwrap();
    let cut = dir.path().join("cut.dbn.zst");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (out, lines) = replay_to_capture(&cut, &[]);
    ok(&out);
    let err = text(&out.stderr);
    let skips = skip_lines(&err);
    assert_eq!(skips.len(), 1, "{err}");
    let name = cut.display().to_string();
    assert!(
        skips[0].starts_with(&format!("replay: {name}: record "))
            && skips[0].contains(": truncated (zstd stream"),
        "{err}"
    );
    // The record named is the one after the last sent (20 mappings first).
    let n: u64 = skips[0]
        .split("record ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(n, lines.len() as u64 + 20 + 1, "{err}");
    assert!(lines.len() > 1000 && lines.len() < 20_000);
    assert!(err.contains("records skipped: truncated 1"), "{err}");
    // --on-error stop: the same line, then exit 1.
    let (out, _) = replay_to_capture(&cut, &["--on-error", "stop"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("(--on-error stop)"));

    // A Tardis .csv.gz cut short: its partial last row is not sent.
    let mut body = tardis_sample();
    for i in 0..3000 {
        body.push_str(&format!("binance,BTCUSDT,{i},{i},1.5,2.5,1.5,3\n"));
    }
    let gz = std::fs::read(tardis_gz(dir.path(), &body)).unwrap();
    let cut = dir.path().join("cut.csv.gz");
    std::fs::write(&cut, &gz[..gz.len() - 40]).unwrap();
    let (out, lines) = replay_to_capture(&cut, &[]);
    ok(&out);
    let err = text(&out.stderr);
    let skips = skip_lines(&err);
    assert_eq!(skips.len(), 1, "{err}");
    assert!(skips[0].contains(": truncated (gzip stream"), "{err}");
    let n: usize = skips[0]
        .split("line ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(n, lines.len() + 2, "header + rows sent, then the cut row");
    for l in &lines {
        assert_eq!(l.split(',').count(), 6, "a whole quote: {l}");
    }
}

#[test]
fn an_unknown_dbn_version_or_record_is_named_and_skipped_or_stopped_at() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(data("dbn/test_data.mbp-1.dbn")).unwrap();
    // Version byte 9: no record of it can be read; refused before sending.
    let mut v9 = sample.clone();
    v9[3] = 9;
    let f = dir.path().join("v9.dbn");
    std::fs::write(&f, v9).unwrap();
    let (out, lines) = replay_to_capture(&f, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{}: record 0: unknown_version (DBN version 9; this build reads versions 1-3)",
            f.display()
        )),
        "{err}"
    );
    assert!(lines.is_empty());
    // Record 1 of a type no DBN version 1-3 has (a newer version's record).
    let meta_len = u32::from_le_bytes(sample[4..8].try_into().unwrap()) as usize;
    let mut odd = sample.clone();
    odd[8 + meta_len + 1] = 0xEE; // the first record's rtype
    let f = dir.path().join("odd.dbn");
    std::fs::write(&f, odd).unwrap();
    let (out, lines) = replay_to_capture(&f, &[]);
    ok(&out);
    let err = text(&out.stderr);
    assert_eq!(
        skip_lines(&err),
        [format!(
            "replay: {}: record 1: unknown_record (rtype 0xee is unknown to DBN 1-3; 80 bytes skipped)",
            f.display()
        )],
        "{err}"
    );
    assert_eq!(lines, ["1609160400006246513,ESH1,3720.25,3720.5,24,12"]);
    assert!(err.contains("records skipped: unknown_record 1"), "{err}");
    let (out, lines) = replay_to_capture(&f, &["--on-error", "stop"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(lines.is_empty(), "stopped before record 2");
}

#[test]
fn a_tardis_row_missing_a_field_is_named_and_skipped_or_stopped_at() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows: Vec<String> = tardis_sample().lines().map(str::to_string).collect();
    // Line 3 (deribit's first quote) loses its bid price.
    rows[2] = rows[2].replace(",6424,", ",,");
    let gz = tardis_gz(dir.path(), &(rows.join("\n") + "\n"));
    let (out, lines) = replay_to_capture(&gz, &[]);
    ok(&out);
    let err = text(&out.stderr);
    assert_eq!(
        skip_lines(&err),
        [format!(
            "replay: {}: line 3: missing_field (bid_price)",
            gz.display()
        )],
        "{err}"
    );
    assert_eq!(lines.len(), 5);
    assert!(err.contains("records skipped: missing_field 1"), "{err}");
    let (out, lines) = replay_to_capture(&gz, &["--on-error", "stop"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(lines.len(), 1, "the row before it only");
}

#[test]
fn demo_file_takes_a_dbn_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = tickfan(&[
        "demo",
        "--file",
        data("dbn/test_data.mbp-1.v3.dbn.zst").to_str().unwrap(),
        "--duration",
        "1s",
        "--rate",
        "2000",
        "--subscribers",
        "1",
        "--slow",
        "0",
        "--order-rate",
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

/// `VmHWM` (peak resident set) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Streams `ticks` generated DBN ticks through a FIFO (`gen --dbn` writes
/// it, `replay` reads it: no file of that size exists) to a sink that
/// reads everything, then reads the replay's peak RSS before letting it
/// end. Returns (quote lines received, peak RSS KiB).
fn stream_generated_dbn(ticks: u64) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ticks.dbn.zst");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other contract.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let bin = env!("CARGO_BIN_EXE_tickfan");
    let mut gen = Command::new(bin)
        .args([
            "gen",
            "--dbn",
            "--symbols",
            "1000",
            "--ticks",
            &ticks.to_string(),
            "-o",
        ])
        .arg(&fifo)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let replay = Command::new(bin)
        .args([
            "replay",
            fifo.to_str().unwrap(),
            "--to",
            &addr,
            "--no-progress",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut s, _) = l.accept().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break; // the replay half-closed: everything is sent
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
    // The replay waits for this side to close: it is still alive.
    let peak = peak_rss_kib(replay.id());
    drop(s);
    let out = replay.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(gen.wait().unwrap().success());
    (lines, peak)
}

#[test]
fn memory_stays_flat_replaying_a_generated_dbn_stream_from_a_pipe() {
    let (small_n, small) = stream_generated_dbn(20_000);
    // 75x the records (~120 MB of DBN decoded, ~30 MB of zstd) must not
    // need more memory: the replay holds buffers, never the file.
    let (large_n, large) = stream_generated_dbn(1_500_000);
    assert_eq!((small_n, large_n), (20_000, 1_500_000));
    eprintln!("replay peak RSS: {small} KiB for 20k quotes, {large} KiB for 1.5M quotes");
    assert!(
        large <= small + 8 * 1024,
        "peak RSS grew from {small} KiB to {large} KiB with the stream's length"
    );
}
