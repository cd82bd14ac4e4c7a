//! A network partition of one edge from the NATS cluster, with network
//! namespaces (root + `ip netns`): the edge runs in a namespace of its own
//! with two veth pairs, one towards the NATS servers and one towards its
//! subscribers; taking the first pair's host end down blackholes the
//! backbone while the subscribers stay connected. Elsewhere (not root, no
//! `ip`) the test prints why it did not run.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::nats_servers::{nats_server, Cluster};
use crate::util::{tick, wait_until, Feed, Spawned, Sub, DEADLINE};

/// The namespace and its links, removed when dropped.
struct Netns {
    name: String,
    links: [String; 2],
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Netns {
    /// `tfpN` with links `tfaN` (backbone, 10.X.1.0/24) and `tfbN`
    /// (subscribers, 10.X.2.0/24); `None` with the reason when it cannot be built.
    fn create() -> Result<(Netns, u8), String> {
        if Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout != b"0\n")
            .unwrap_or(true)
        {
            return Err("not root: network namespaces need root".into());
        }
        let id = std::process::id() % 10_000;
        let x = 200 + (id % 50) as u8;
        let ns = Netns {
            name: format!("tfp{id}"),
            links: [format!("tfa{id}"), format!("tfb{id}")],
        };
        if !ip(&["netns", "add", &ns.name]) {
            return Err("`ip netns add` failed (no ip(8), or no permission)".into());
        }
        for (i, l) in ns.links.iter().enumerate() {
            let peer = format!("{l}n");
            let host = format!("10.{x}.{}.1/24", i + 1);
            let inner = format!("10.{x}.{}.2/24", i + 1);
            let ok = ip(&["link", "add", l, "type", "veth", "peer", "name", &peer])
                && ip(&["link", "set", &peer, "netns", &ns.name])
                && ip(&["addr", "add", &host, "dev", l])
                && ip(&["link", "set", l, "up"])
                && ip(&[
                    "netns", "exec", &ns.name, "ip", "addr", "add", &inner, "dev", &peer,
                ])
                && ip(&["netns", "exec", &ns.name, "ip", "link", "set", &peer, "up"])
                && ip(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"]);
            if !ok {
                return Err("cannot build the veth pairs".into());
            }
        }
        Ok((ns, x))
    }

    fn backbone(&self, up: bool) {
        assert!(ip(&[
            "link",
            "set",
            &self.links[0],
            if up { "up" } else { "down" }
        ]));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for l in &self.links {
            ip(&["link", "del", l]);
        }
        ip(&["netns", "del", &self.name]);
    }
}

fn metric(admin: SocketAddr, name: &str) -> u64 {
    http_get_at(admin, "/metrics")
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn http_get_at(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(s, "GET {path} HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn an_edge_partitioned_from_the_cluster_flags_stale_keeps_serving_and_recovers() {
    let bin = match nats_server() {
        Ok(b) => b,
        Err(why) => return eprintln!("SKIPPED: {why}"),
    };
    let (ns, x) = match Netns::create() {
        Ok(n) => n,
        Err(why) => return eprintln!("SKIPPED partition test: {why}"),
    };
    let cluster = Cluster::start_on(&bin, 3, "0.0.0.0");
    let port = cluster.servers[0].port;
    let ingest_dir = tempfile::tempdir().unwrap();
    let edge_dir = tempfile::tempdir().unwrap();
    let url = cluster.servers[1].url();
    let mut args = vec![
        "serve",
        "--quiet",
        "--role",
        "ingest",
        "--nats",
        &url,
        "--data-dir",
        ingest_dir.path().to_str().unwrap(),
    ];
    args.extend(crate::util::EPHEMERAL_PORTS);
    let (_ingest, ingest_line) = crate::util::spawn_until(&args, "tickfan serving");
    let feed_addr: SocketAddr = ingest_line
        .split("feed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|a| a.parse().ok())
        .expect("feed address");
    let nats = format!("nats://10.{x}.1.1:{port}");
    let sub_listen = format!("10.{x}.2.2:0");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_tickfan")])
        .args(["serve", "--quiet", "--role", "edge", "--nats", &nats])
        .args(["--sub-listen", &sub_listen, "--admin-listen", &sub_listen])
        .args([
            "--order-listen",
            "127.0.0.1:0",
            "--data-dir",
            edge_dir.path().to_str().unwrap(),
        ])
        .envs(crate::util::scratch_env())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ip netns exec runs");
    let line = {
        use std::io::BufRead;
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("tickfan serving") {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "edge ended early");
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        line
    };
    let _edge = Spawned(Some(child));
    let addr = |key: &str| -> SocketAddr {
        line.split(key)
            .nth(1)
            .and_then(|r| {
                r.trim_start()
                    .trim_start_matches("http://")
                    .split([' ', ')'])
                    .next()
            })
            .and_then(|a| a.parse().ok())
            .expect("address in the banner")
    };
    let (sub_addr, admin) = (addr("subscribers "), addr("admin "));
    let mut sub = Sub::connect(sub_addr);
    sub.subscribe(&["EURUSD"]);
    let mut notices = Sub::connect(sub_addr);
    notices.subscribe(&["__tickfan.stale"]);
    wait_until("the edge subscribed", || {
        metric(admin, "tickfan_cluster_subjects") >= 1
    });
    let mut feed = Feed::connect(feed_addr);
    let mut last_seq = 0;
    let mut until_bid = |sub: &mut Sub, bid: &str| {
        let t = Instant::now();
        loop {
            assert!(t.elapsed() < DEADLINE, "no {bid}");
            let m = sub.message();
            assert!(m.seq() >= last_seq, "older after newer");
            last_seq = m.seq();
            if m.field(2) == bid {
                return;
            }
        }
    };
    feed.lines(&[&tick(1, "EURUSD", "1.00001", "2")]);
    until_bid(&mut sub, "1.00001");
    ns.backbone(false);
    let cut = Instant::now();
    let want = |n: &mut Sub, payload: &str| loop {
        let m = n.message();
        if m.payload == payload {
            return;
        }
    };
    want(&mut notices, "stale,EURUSD,backbone_lost");
    let noticed = cut.elapsed();
    // Still served: a fresh subscriber gets the last value as its snapshot.
    let mut late = Sub::connect(sub_addr);
    late.subscribe(&["EURUSD"]);
    assert_eq!(late.message().field(2), "1.00001");
    feed.lines(&[&tick(2, "EURUSD", "1.00002", "2")]);
    ns.backbone(true);
    let healed = Instant::now();
    until_bid(&mut sub, "1.00002");
    want(&mut notices, "live,EURUSD,update");
    eprintln!(
        "RECOVERY partition of an edge: flagged stale {} ms after the cut; the value sent during the cut arrived {} ms after the heal",
        noticed.as_millis(),
        healed.elapsed().as_millis()
    );
}
