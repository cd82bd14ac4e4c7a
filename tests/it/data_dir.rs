//! One engine per data directory (issue 26): an engine holds its
//! `--data-dir` locked for its life; a second engine started on it, with
//! the default flags in the same working directory, exits at once with
//! status 2 and one line naming the directory, the holder's pid and the
//! flag to change, having bound and written nothing; the first keeps
//! taking and journaling orders.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;

use tickfan::client::orders::Reply;

use crate::util::{wait_until, OrderClient, Spawned, EPHEMERAL_PORTS};

/// `tickfan serve` in `cwd` on ephemeral ports, journal on, default
/// `--data-dir`, stderr piped (not yet read).
fn serve_in(cwd: &Path) -> Spawned {
    let args: Vec<&str> = std::iter::once("--quiet").chain(EPHEMERAL_PORTS).collect();
    Spawned(Some(crate::one_host::spawn_serve_in(cwd, &args)))
}

/// [`serve_in`], once it serves: the child and its order address (the
/// rest of its stderr is drained in the background).
fn serving_in(cwd: &Path) -> (Spawned, SocketAddr) {
    let mut s = serve_in(cwd);
    let mut err = BufReader::new(s.0.as_mut().unwrap().stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("tickfan serving") {
        banner.clear();
        assert!(
            err.read_line(&mut banner).unwrap() > 0,
            "engine ended early"
        );
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let addr = banner
        .split(" orders ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("orders address in {banner:?}"));
    (s, addr)
}

#[test]
fn a_second_engine_on_a_held_data_dir_exits_2_naming_it_and_the_holder_and_the_first_keeps_serving()
{
    let cwd = tempfile::tempdir().unwrap();
    let (mut first, orders) = serving_in(cwd.path());
    let first_pid = first.0.as_ref().unwrap().id();
    let lock = cwd.path().join("tickfan-data").join("tickfan.lock");
    assert_eq!(
        std::fs::read_to_string(&lock).expect("the lock file exists while serving"),
        format!("{first_pid}\n")
    );

    // The same command in the same directory: refused before it binds or
    // opens anything.
    let mut second = serve_in(cwd.path());
    let child = second.0.as_mut().unwrap();
    wait_until("the second engine exits", || {
        child.try_wait().expect("try_wait").is_some()
    });
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "tickfan: data directory tickfan-data is in use by another tickfan (pid {first_pid}): give this engine its own --data-dir\n"
        )
    );
    // It left the holder's pid, and the holder, in place.
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{first_pid}\n")
    );
    assert!(first.0.as_mut().unwrap().try_wait().unwrap().is_none());

    // The first keeps taking orders, journaled in its directory.
    let mut cl = OrderClient::connect(orders);
    cl.accepted("after-refusal", "EURUSD", "1");
    assert!(matches!(
        cl.until_terminal("after-refusal").last(),
        Some(Reply::Done { .. })
    ));
    let segments = std::fs::read_dir(cwd.path().join("tickfan-data"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tfj"))
        .count();
    assert!(
        segments >= 1,
        "the first engine's journal is in tickfan-data"
    );
}
