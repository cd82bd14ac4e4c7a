//! The one-host scale-out example of `docs/src/scale-out.md`, as written
//! (issue 26, item 2): `nats-server`, an ingest and an edge started with its
//! command lines in one working directory, default `--data-dir` (only the ports
//! made free: this machine may run other engines). Both come up — the
//! ingest journals into `tickfan-data` and holds its lock, the edge takes
//! no orders and touches nothing there — and a tick replayed into the
//! ingest reaches a subscriber of the edge.
//!
//! [`OneHost`] is also the set-up of `shutdown`'s test with the NATS
//! server gone.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::nats_servers::{nats_server, single, Server};
use crate::util::{Spawned, Sub, DEADLINE};

/// One `tickfan serve` process of the example.
pub(crate) struct Node {
    pub proc: Spawned,
    pub banner: String,
    /// Every stderr line after the banner, as it comes.
    pub log: Arc<Mutex<Vec<String>>>,
}

/// `tickfan serve` + `args` in `cwd`, journal on and the default data
/// directory (no test variable overrides them), stderr piped (not yet read).
pub(crate) fn spawn_serve_in(cwd: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .arg("serve")
        .args(args)
        .current_dir(cwd)
        .env_remove("TICKFAN_NO_JOURNAL")
        .env_remove("TICKFAN_DATA_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs")
}

impl Node {
    /// [`spawn_serve_in`]; returns once it serves.
    pub(crate) fn start(cwd: &Path, args: &[&str]) -> Node {
        let mut child = spawn_serve_in(cwd, args);
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        while !banner.contains("tickfan serving") {
            banner.clear();
            let n = err.read_line(&mut banner).unwrap();
            assert!(n > 0, "tickfan serve {args:?} ended before serving");
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Node {
            proc: Spawned(Some(child)),
            banner,
            log,
        }
    }

    /// The address after `key` in the banner (`feed 127.0.0.1:1234 ·`).
    pub(crate) fn addr(&self, key: &str) -> SocketAddr {
        let rest = self
            .banner
            .split(&format!(" {key} "))
            .nth(1)
            .unwrap_or_else(|| panic!("{key} in {:?}", self.banner));
        let a = rest.split([' ', ')']).next().unwrap();
        a.trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|_| panic!("{key} address in {:?}", self.banner))
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.proc.0.as_ref().expect("running").id()
    }
}

/// The example's three processes in one working directory.
pub(crate) struct OneHost {
    pub nats: Server,
    pub ingest: Node,
    pub edge: Node,
    pub dir: tempfile::TempDir,
}

impl OneHost {
    /// Starts the example's lines:
    ///
    /// ```sh
    /// nats-server -p 4222 &
    /// tickfan serve --role ingest --nats nats://127.0.0.1:4222 --sub-listen 127.0.0.1:9202 \
    ///   --admin-listen 127.0.0.1:9204 --order-listen 127.0.0.1:9203 &
    /// tickfan serve --role edge --nats nats://127.0.0.1:4222 &
    /// ```
    ///
    /// with every port free (and the ingest's feed port, 9101 by default,
    /// too). `None` (the reason printed) when `nats-server` is missing.
    pub(crate) fn start() -> Option<OneHost> {
        let bin = match nats_server() {
            Ok(b) => b,
            Err(why) => {
                eprintln!("SKIPPED: {why}");
                return None;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let nats = single(&bin);
        let url = nats.url();
        let any = "127.0.0.1:0";
        // The example's lines, every port made free.
        let node = |role: &str, more: &[&str]| {
            let mut args = vec!["--role", role, "--nats", &url];
            args.extend(["--sub-listen", any, "--admin-listen", any]);
            args.extend(more);
            Node::start(dir.path(), &args)
        };
        let ingest = node("ingest", &["--order-listen", any, "--feed-listen", any]);
        let edge = node("edge", &[]);
        Some(OneHost {
            nats,
            ingest,
            edge,
            dir,
        })
    }
}

#[test]
fn the_one_host_example_runs_as_written_in_one_working_directory() {
    let Some(host) = OneHost::start() else {
        return;
    };
    // The ingest takes orders and journals them in the default directory,
    // which it holds locked; the edge has no order port and no journal.
    assert!(
        host.ingest.banner.contains("· journal tickfan-data"),
        "{}",
        host.ingest.banner
    );
    assert!(
        host.edge
            .banner
            .contains(&format!("feed none (edge on {})", host.nats.url()))
            && host.edge.banner.contains(" · orders none · ")
            && host
                .edge
                .banner
                .contains("journal: none (an edge takes no orders)"),
        "{}",
        host.edge.banner
    );
    let lock = host.dir.path().join("tickfan-data").join("tickfan.lock");
    assert_eq!(
        std::fs::read_to_string(lock).unwrap(),
        format!("{}\n", host.ingest.pid())
    );

    // `redis-cli -p <edge> subscribe EURUSD __tickfan.stale`, then
    // `tickfan replay --to <ingest feed> …`.
    let mut sub = Sub::connect(host.edge.addr("subscribers"));
    sub.subscribe(&["EURUSD", "__tickfan.stale"]);
    let ticks = host.dir.path().join("ticks.csv");
    std::fs::write(
        &ticks,
        "ts_ns,symbol,bid,ask,bid_qty,ask_qty\n1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000\n",
    )
    .unwrap();
    let feed = host.ingest.addr("feed").to_string();
    let replay = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(["replay", "--to", &feed, ticks.to_str().unwrap()])
        .current_dir(host.dir.path())
        .output()
        .expect("replay runs");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let end = Instant::now() + DEADLINE;
    let m = loop {
        assert!(Instant::now() < end, "the tick never reached the edge");
        let m = sub.message();
        if m.channel == "EURUSD" {
            break m;
        }
    };
    assert_eq!(
        (m.field(0), m.field(2), m.field(3)),
        ("1701388800123456789", "1.08512", "1.08515"),
        "{m:?}"
    );
    // Neither complained (the collision used to be an error line and an
    // exit of one of them).
    for node in [&host.ingest, &host.edge] {
        let log = node.log.lock().unwrap();
        assert!(!log.iter().any(|l| l.contains("ERROR")), "{log:#?}");
    }
}
