//! `tickfan demo --cluster`: the demo across the NATS backbone. Starts a
//! 3-server NATS cluster (the installed `nats-server`, on free loopback
//! ports, meshed with `--cluster`/`--routes`), one ingest and `--edges`
//! edges in this process, sends the demo's ticks to the ingest, spreads the
//! subscribers over the edges, `kill -9`s the NATS server of the first edge
//! halfway (unless `--keep-nats`), and prints each edge's subscribers'
//! p99 report: the freshness (intended send → received, through ingest,
//! NATS and edge) across the failover.
//!
//! ```text
//!  sender ─▶ ingest ─▶ nats 0 ═ nats 1 ═ nats 2 ─▶ edge 1..N ─▶ subscribers (split evenly)
//!                       (mesh)   ▲ killed halfway: edge 1 reconnects, re-seeds
//! ```
//!
//! Every process it starts it stops by its pid.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickfan::cluster::role::{ClusterConfig, Role};
use tickfan::config::Config;
use tickfan::error::Failure;
use tickfan::metrics::Stage;
use tickfan::runtime::Engine;

use super::demo::{ticks, DemoArgs};
use super::replay::{progress_bar, Pace, SendAs, Sender, SenderSettings};
use super::subscribe::{run_load, LoadProgress, LoadReport, LoadSpec};

/// The NATS binary, or the one-line error naming the package.
fn nats_server() -> Result<String, Failure> {
    [
        "/usr/sbin/nats-server",
        "/usr/bin/nats-server",
        "/usr/local/bin/nats-server",
    ]
    .iter()
    .find(|p| std::path::Path::new(p).exists())
    .map(|p| p.to_string())
    .ok_or_else(|| {
        Failure::Usage(
            "demo --cluster needs nats-server: install the Debian package `nats-server`".into(),
        )
    })
}

fn free_port() -> Result<u16, Failure> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure::Runtime(format!("no free port: {e}")))
}

/// The NATS servers, killed by pid when dropped.
struct Servers(Vec<(u16, Option<Child>)>);

impl Drop for Servers {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            if let Some(c) = c {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn routes_up(http: u16, want: usize) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", http)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = write!(s, "GET /routez HTTP/1.0\r\n\r\n");
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.split("\"num_routes\":")
        .nth(1)
        .and_then(|r| r.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| n >= want)
}

fn start_servers(bin: &str, n: usize) -> Result<Servers, Failure> {
    let mut ports = Vec::new();
    for _ in 0..n {
        ports.push((free_port()?, free_port()?, free_port()?));
    }
    let routes: Vec<String> = ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{}", p.2))
        .collect();
    let mut servers = Servers(Vec::new());
    for (i, &(port, http, cport)) in ports.iter().enumerate() {
        let child = Command::new(bin)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-m",
                &http.to_string(),
            ])
            .args([
                "-n",
                &format!("tickfan-demo-{i}"),
                "--cluster_name",
                "tickfan-demo",
            ])
            .args(["--cluster", &format!("nats://127.0.0.1:{cport}")])
            .args(["--routes", &routes.join(",")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Failure::Runtime(format!("cannot start {bin}: {e}")))?;
        servers.0.push((port, Some(child)));
    }
    let end = Instant::now() + Duration::from_secs(30);
    for &(_, http, _) in &ports {
        while !routes_up(http, n - 1) {
            if Instant::now() > end {
                return Err(Failure::Runtime(
                    "the NATS servers did not mesh within 30 s".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(servers)
}

fn node(role: Role, nats: String) -> Result<Engine, Failure> {
    let mut c = Config {
        print_intervals: false,
        report_interval: Duration::from_secs(1),
        ..Config::ephemeral()
    };
    c.cluster = ClusterConfig {
        role,
        nats: vec![nats],
        ..ClusterConfig::default()
    };
    Engine::start(&c).map_err(|e| Failure::Runtime(e.to_string()))
}

/// Runs `demo --cluster`.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    let bin = nats_server()?;
    if args.edges == 0 || args.subscribers < args.edges {
        return Err(Failure::Usage(
            "--edges must be positive and at most --subscribers".into(),
        ));
    }
    let mut ring = ticks(args)?;
    let mut servers = start_servers(&bin, 3)?;
    let url = |i: usize| format!("nats://127.0.0.1:{}", servers.0[i % 3].0);
    let ingest = node(Role::Ingest, url(0))?;
    let mut edges = Vec::new();
    for i in 0..args.edges {
        // Edge k talks to server 1 + k % 2; the first edge's server is killed.
        edges.push(node(Role::Edge, url(1 + i % 2))?);
    }
    eprintln!(
        "demo --cluster: 3 NATS servers, ingest feed {}, {} edges, {} subscribers, {} ticks/s for {:?}",
        ingest.feed_addr(),
        edges.len(),
        args.subscribers,
        args.rate,
        args.duration
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut loads = Vec::new();
    for (i, e) in edges.iter().enumerate() {
        let n = args.subscribers / args.edges + usize::from(i < args.subscribers % args.edges);
        let spec = LoadSpec {
            to: e.subscriber_addr(),
            normal: n,
            slow: 0,
            slow_bytes_per_sec: 0,
            patterns: vec!["*".into()],
            channels: Vec::new(),
            duration: None,
            until: None,
            interval: Duration::from_secs(1),
            log_dir: None,
            print_intervals: false,
            token: None,
            sent: None,
            held_max: 0,
            slow_rcvbuf: 0,
            stall: None,
            tls: None,
        };
        let progress = Arc::new(LoadProgress::default());
        let (stop, p) = (Arc::clone(&stop), Arc::clone(&progress));
        let h = std::thread::Builder::new()
            .name(format!("demo-edge-{i}"))
            .spawn(move || run_load(&spec, &stop, &p))
            .map_err(|e| Failure::Runtime(format!("cannot start subscribers: {e}")))?;
        loads.push((h, progress));
    }
    let end = Instant::now() + Duration::from_secs(30);
    while !loads.iter().all(|(_, p)| p.ready.load(Ordering::Acquire)) {
        if Instant::now() > end {
            return Err(Failure::Runtime(
                "subscribers did not subscribe within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut sender = Sender::connect(
        ingest.feed_addr(),
        SenderSettings {
            pace: Pace::Rate(args.rate as f64),
            stamp: true,
            send_as: SendAs::Csv,
            duration: Some(args.duration),
            log_dir: None,
            stop: None,
            token: None,
            record_sent: None,
            record_sent_max: 0,
        },
        progress_bar(None, true),
    )?;
    let started = Instant::now();
    let mut killed = None;
    loop {
        if killed.is_none() && !args.keep_nats && started.elapsed() >= args.duration / 2 {
            if let Some(c) = &mut servers.0[1].1 {
                let _ = c.kill(); // SIGKILL
                let _ = c.wait();
            }
            servers.0[1].1 = None;
            killed = Some(Instant::now());
            eprintln!(
                "demo --cluster: kill -9 of NATS server 1 (edge 1's) at {:?}",
                started.elapsed()
            );
        }
        let (line, wrapped) = ring.next_line();
        if !sender.send(line)? {
            break;
        }
        if wrapped {
            sender.end_loop();
        }
    }
    let sent = sender.finish()?;
    // Let the last updates cross the backbone.
    let settle = Instant::now() + Duration::from_secs(3);
    let mut last = 0;
    while Instant::now() < settle {
        let now: u64 = loads
            .iter()
            .map(|(_, p)| p.messages[0].load(Ordering::Relaxed))
            .sum();
        if now == last && now > 0 {
            break;
        }
        last = now;
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Release);
    println!(
        "sender: {} ticks in {:.2} s, behind schedule p99 {:.2} ms",
        sent.lines,
        sent.elapsed.as_secs_f64(),
        sent.p99_behind.as_secs_f64() * 1e3
    );
    let mut total_rate = 0.0;
    for (i, (h, _)) in loads.into_iter().enumerate() {
        let r: LoadReport = h
            .join()
            .map_err(|_| Failure::Runtime("subscriber thread panicked".into()))??;
        println!("edge {} — {r}", i + 1);
        if let Some(c) = r.class("normal") {
            total_rate += c.delivered_per_s;
            println!(
                "edge {}: freshness (intended send → received) p99 {:.1} µs, max {:.1} µs, {:.0} msgs/s delivered",
                i + 1,
                c.latency.p99_us,
                c.latency.max_us,
                c.delivered_per_s
            );
        }
    }
    let c = edges[0].counters().snapshot().cluster;
    println!(
        "edge 1 backbone: disconnects {}, re-seeds {}, seeds {}, applied {}; all edges delivered {:.0} msgs/s",
        c.disconnects, c.reseeds, c.seeds, c.applied, total_rate
    );
    if killed.is_some() && c.disconnects == 0 {
        eprintln!("demo --cluster: edge 1 was not connected to the killed server (it had failed over before)");
    }
    for (i, e) in edges.into_iter().enumerate() {
        let report = e.stop();
        // Inside the system: the ingest's receipt → the edge's slot, and
        // the edge's own path to the kernel (engine clocks, no client).
        let pct = |stage| {
            report.stage(stage).map_or((0, 0.0, 0.0, 0.0), |s| {
                (s.pct.count, s.pct.p50_us, s.pct.p99_us, s.pct.p999_us)
            })
        };
        let (n, p50, p99, p999) = pct(Stage::Backbone);
        let (_, _, e2e99, _) = pct(Stage::EngineE2e);
        println!(
            "edge {}: backbone (ingest receipt → edge slot) p50 {p50:.1} µs, p99 {p99:.1} µs, p99.9 {p999:.1} µs over {n} updates; edge engine_e2e p99 {e2e99:.1} µs",
            i + 1
        );
    }
    ingest.stop();
    Ok(())
}
