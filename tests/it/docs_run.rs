//! Runs a docs block marked `<!-- docs-test: run -->` as a newcomer would,
//! with only what a shared test machine needs changed:
//!
//! - in a new temporary working directory, with no `TICKFAN_*` variable;
//! - `tickfan`, `cargo run … --` and `…/tickfan` run the binary cargo built
//!   for the tests (`CARGO_BIN_EXE_tickfan`, a debug build);
//! - the ports the docs use ([`DOC_PORTS`]) are made free: `serve` listens
//!   on `127.0.0.1:0` wherever the line (or the default) says 9101…9104,
//!   its banner says where it got, and every later mention of that port
//!   (`-p 9102`, `localhost:9104`, `--to 127.0.0.1:9103`, or a tool's
//!   default `--to`) is rewritten to it. A line that names such a port
//!   before a line of the block serves it fails: it would reach whatever
//!   listens there on this host;
//! - a line ending in `&`, or one that runs until it is stopped (`serve`
//!   or `subscribe` without `--duration`, a `redis-cli` that subscribes,
//!   `nc` without `-q`: "in another terminal"), runs in the background,
//!   `serve` waited for until its banner; every other line must exit 0
//!   within [`DEADLINE`];
//! - at the end a background line must still be running (or have exited
//!   0); each is stopped by SIGTERM to its own process group (by id, the
//!   last started first), and must end within the deadline: `serve` with
//!   exit 0 and its final report, as after Ctrl-C;
//! - a line that needs a program that may be missing ([`OPTIONAL`]) and
//!   is not on `PATH` is skipped, and says so.
//!
//! The marker's `first:` commands run before the block's lines, and its
//! `set:` flags are appended to the block's lines of that subcommand.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::docs_commands::Block;
use crate::docs_shell::{logical_lines, split, tickfan_args, Op, Simple};
use crate::util::DEADLINE;

/// The ports the docs name: the engine's four listeners, the one-host
/// example's ingest, NATS. Never reached as written: rewritten, or the line fails.
const DOC_PORTS: [u16; 8] = [9101, 9102, 9103, 9104, 9202, 9203, 9204, 4222];

/// `serve`'s listeners: flag, the banner's word for it, the port when the
/// flag is not given (checked against clap's default where clap has one).
const LISTENERS: [(&str, &str, u16); 4] = [
    ("--feed-listen", "feed", 9101),
    ("--sub-listen", "subscribers", 9102),
    ("--order-listen", "orders", 9103),
    ("--admin-listen", "admin", 9104),
];

/// Programs a line may need that a machine may lack (CI installs them).
const OPTIONAL: [&str; 4] = ["redis-cli", "nc", "curl", "nats-server"];

/// A serve line's listeners: documented port, the banner's word for it.
type Listens = Vec<(u16, &'static str)>;

/// One line running in the background.
struct Background {
    at: String,
    child: Child,
    /// A `tickfan serve`: stopped with exit 0 and its final report.
    serve: bool,
    out: PathBuf,
    err: PathBuf,
}

/// The block's run: its directories, the ports so far, what runs.
struct Runner {
    bin: PathBuf,
    cwd: tempfile::TempDir,
    /// stdout and stderr of each line, outside the working directory.
    logs: tempfile::TempDir,
    /// Documented port → the port it really got.
    ports: HashMap<u16, u16>,
    set: Vec<(String, Vec<String>)>,
    background: Vec<Background>,
    notes: Vec<String>,
    lines: usize,
}

/// Sends `sig` to the process group led by `child` (it was spawned as
/// the leader of a new group).
fn signal_group(child: &Child, sig: i32) {
    let pgid = i32::try_from(child.id()).expect("a pid fits in i32");
    // SAFETY: kill(2) with a group id this test created; no memory is involved.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Waits for `child` to end until the deadline; kills its group then.
fn wait_bounded(child: &mut Child) -> Option<ExitStatus> {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() > end {
            signal_group(child, libc::SIGKILL);
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last lines of a file, for a failure message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n    ")
}

/// Whether `program` is on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The value of flag `long` in `args` (`--x V` or `--x=V`) and where it is.
fn flag_value(args: &[String], long: &str) -> Option<(usize, String)> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == long {
            args.get(i + 1).map(|v| (i + 1, v.clone()))
        } else {
            a.strip_prefix(&format!("{long}="))
                .map(|v| (i, format!("{long}={v}")))
        }
    })
}

/// Whether a line runs until it is stopped (see the module's doc).
fn runs_until_stopped(cmds: &[Simple]) -> bool {
    let subscribes = cmds
        .iter()
        .flat_map(|c| &c.words)
        .any(|w| w.to_ascii_lowercase().contains("subscribe"));
    cmds.iter().any(|c| {
        if let Some(args) = tickfan_args(&c.words) {
            let has = |f: &str| flag_value(&args, f).is_some();
            return match args.first().map(String::as_str) {
                Some("serve") => !has("--duration"),
                Some("subscribe") => !has("--duration") && !has("--until"),
                _ => false,
            };
        }
        let program = c
            .words
            .first()
            .map_or("", |p| p.rsplit('/').next().unwrap_or(p));
        match program {
            "redis-cli" => subscribes,
            "nc" => !c.words.iter().any(|w| w.starts_with("-q") || w == "-N"),
            "nats-server" => true,
            _ => false,
        }
    })
}

impl Runner {
    fn new(set: &[(String, Vec<String>)]) -> Runner {
        Runner {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_tickfan")),
            cwd: tempfile::tempdir().expect("a working directory"),
            logs: tempfile::tempdir().expect("a directory for the outputs"),
            ports: HashMap::new(),
            set: set.to_vec(),
            background: Vec::new(),
            notes: Vec::new(),
            lines: 0,
        }
    }

    /// `text` with every documented port rewritten to the one it got.
    fn rewrite_ports(&self, at: &str, text: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut digits = String::new();
        for c in text.chars().chain(std::iter::once('\u{0}')) {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            match digits.parse::<u16>() {
                Ok(p) if DOC_PORTS.contains(&p) => match self.ports.get(&p) {
                    Some(real) => out.push_str(&real.to_string()),
                    None => {
                        return Err(format!(
                            "{at}: port {p} is not served by an earlier line of the block (as written it would reach whatever listens on {p} on this host)"
                        ))
                    }
                },
                _ => out.push_str(&digits),
            }
            digits.clear();
            if c != '\u{0}' {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// A tickfan command's arguments as run: `set:` flags appended; for
    /// `serve`, every listener on `127.0.0.1:0` (returned: documented
    /// port and banner word of each); for a tool, its default addresses
    /// written out; then every documented port rewritten.
    fn tickfan(&self, at: &str, args: &[String]) -> Result<(Vec<String>, Listens), String> {
        let mut args = args.to_vec();
        let sub = args.first().cloned().unwrap_or_default();
        for (_, flags) in self.set.iter().filter(|(s, _)| *s == sub) {
            args.extend(flags.iter().cloned());
        }
        let mut listens = Vec::new();
        let command = crate::binary_tools::cli::command();
        let sub_cmd = command
            .find_subcommand(&sub)
            .ok_or(format!("{at}: no subcommand `{sub}`"))?;
        if sub == "serve" {
            let edge = flag_value(&args, "--role").is_some_and(|(_, r)| r.ends_with("edge"));
            for (flag, word, port) in LISTENERS {
                let default = sub_cmd
                    .get_arguments()
                    .find(|a| a.get_long() == flag.get(2..))
                    .and_then(|a| a.get_default_values().first())
                    .map(|v| v.to_string_lossy().parse::<SocketAddr>().unwrap().port());
                assert!(
                    default.is_none_or(|d| d == port),
                    "{flag}'s default is now port {default:?}: update LISTENERS"
                );
                match flag_value(&args, flag) {
                    Some((i, v)) => {
                        let addr = v.rsplit('=').next().unwrap_or(&v);
                        let p = addr
                            .parse::<SocketAddr>()
                            .map_err(|e| format!("{at}: {flag} {addr}: {e}"))?;
                        args[i] = format!("{flag}=127.0.0.1:0");
                        if args[i - 1] == flag {
                            args.remove(i - 1);
                        }
                        listens.push((p.port(), word));
                    }
                    None if edge && matches!(flag, "--feed-listen" | "--order-listen") => {}
                    None => {
                        args.push(format!("{flag}=127.0.0.1:0"));
                        listens.push((port, word));
                    }
                }
            }
        } else {
            for a in sub_cmd.get_arguments() {
                let (Some(long), Some(default)) = (a.get_long(), a.get_default_values().first())
                else {
                    continue;
                };
                let default = default.to_string_lossy();
                let given = flag_value(&args, &format!("--{long}")).is_some()
                    || a.get_short()
                        .is_some_and(|s| args.iter().any(|w| *w == format!("-{s}")));
                if default.parse::<SocketAddr>().is_ok() && !given {
                    args.push(format!("--{long}={default}"));
                }
            }
        }
        for (p, _) in &listens {
            if self.ports.contains_key(p) {
                return Err(format!(
                    "{at}: port {p} is already served by an earlier line of the block (this engine could not bind it)"
                ));
            }
        }
        let args = args
            .iter()
            .map(|a| self.rewrite_ports(at, a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((args, listens))
    }

    /// Runs one logical line (see the module's doc).
    fn line(&mut self, at: &str, line: &str) -> Result<(), String> {
        let cmds = split(line).map_err(|e| format!("{at}: `{line}`: {e}"))?;
        let background =
            cmds.last().is_some_and(|c| c.op == Some(Op::Background)) || runs_until_stopped(&cmds);
        if cmds[..cmds.len() - 1]
            .iter()
            .any(|c| c.op == Some(Op::Background))
        {
            return Err(format!(
                "{at}: `&` within a line: put each background command on its own line"
            ));
        }
        for c in &cmds {
            let program = c.words.first().map(String::as_str).unwrap_or("");
            if OPTIONAL.contains(&program) && !on_path(program) {
                self.notes.push(format!(
                    "SKIPPED {at}: `{line}` needs {program}, which is not on PATH (.ci/run installs it)"
                ));
                return Ok(());
            }
        }
        let mut listens = Vec::new();
        let mut direct = None;
        let mut script = String::new();
        for c in &cmds {
            let text = match tickfan_args(&c.words) {
                Some(args) => {
                    let (args, l) = self.tickfan(at, &args)?;
                    listens.extend(l);
                    let mut words = vec![self.bin.display().to_string()];
                    words.extend(args);
                    direct = Some(words.clone());
                    shlex::try_join(words.iter().map(String::as_str)).expect("quotable")
                }
                None => self.rewrite_ports(at, &c.text)?,
            };
            script.push_str(&text);
            match c.op {
                Some(Op::Background) | None => {}
                Some(op) => {
                    script.push(' ');
                    script.push_str(op.as_str());
                    script.push(' ');
                }
            }
        }
        self.lines += 1;
        let out = self.logs.path().join(format!("{}.out", self.lines));
        let err = self.logs.path().join(format!("{}.err", self.lines));
        // One tickfan command runs as itself (its exit status is its own);
        // anything else through bash.
        let mut command = match (&direct, cmds.len()) {
            (Some(words), 1) => {
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]);
                c
            }
            _ => {
                let mut c = Command::new("bash");
                c.arg("-c").arg(&script);
                c
            }
        };
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TICKFAN_")) {
            command.env_remove(k);
        }
        let mut child = command
            .current_dir(self.cwd.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("{at}: cannot start `{script}`: {e}"))?;
        let failed = |what: String| {
            format!(
                "{at}: `{line}` {what}\n  ran: {script}\n  stderr:\n    {}\n  stdout:\n    {}",
                tail(&err),
                tail(&out)
            )
        };
        self.notes.push(format!(
            "{at}: {script}{}",
            if background { " &" } else { "" }
        ));
        if !background {
            return match wait_bounded(&mut child) {
                Some(s) if s.success() => Ok(()),
                Some(s) => Err(failed(format!("ended with {s}"))),
                None => Err(failed(format!("did not end within {DEADLINE:?}"))),
            };
        }
        let serve = !listens.is_empty();
        self.background.push(Background {
            at: at.to_string(),
            child,
            serve,
            out: out.clone(),
            err: err.clone(),
        });
        if !serve {
            return Ok(());
        }
        let end = Instant::now() + DEADLINE;
        let banner = loop {
            let text = std::fs::read_to_string(&err).unwrap_or_default();
            // Whole lines only: a banner read while it is being written
            // would lack its last listeners.
            let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
            if let Some(b) = whole.lines().find(|l| l.contains("tickfan serving")) {
                break b.to_string();
            }
            let bg = self.background.last_mut().unwrap();
            if let Some(s) = bg.child.try_wait().unwrap() {
                return Err(failed(format!("ended with {s} before serving")));
            }
            if Instant::now() > end {
                return Err(failed(format!("did not serve within {DEADLINE:?}")));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        for (documented, word) in listens {
            if let Some(real) = banner_port(&banner, word) {
                self.ports.insert(documented, real);
            }
        }
        Ok(())
    }

    /// Stops the background lines, latest first; every failure, or none.
    fn finish(&mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        while let Some(mut bg) = self.background.pop() {
            let what = |s: &str| {
                format!(
                    "{}: (background) {s}\n  stderr:\n    {}\n  stdout:\n    {}",
                    bg.at,
                    tail(&bg.err),
                    tail(&bg.out)
                )
            };
            if let Some(s) = bg.child.try_wait().unwrap() {
                if !s.success() {
                    errors.push(what(&format!("ended with {s} before the block's end")));
                }
                continue;
            }
            signal_group(&bg.child, libc::SIGTERM);
            match wait_bounded(&mut bg.child) {
                None => errors.push(what(&format!(
                    "did not stop within {DEADLINE:?} of SIGTERM"
                ))),
                Some(s) if bg.serve && !s.success() => {
                    errors.push(what(&format!("ended with {s} after SIGTERM (want 0)")))
                }
                Some(_) if bg.serve => {
                    let out = std::fs::read_to_string(&bg.out).unwrap_or_default();
                    if !out.contains("tickfan final report") {
                        errors.push(what("stopped without printing its final report"));
                    }
                }
                Some(_) => {}
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}

impl Drop for Runner {
    /// A failed run leaves nothing running: each background group killed.
    fn drop(&mut self) {
        for bg in &mut self.background {
            if bg.child.try_wait().ok().flatten().is_none() {
                signal_group(&bg.child, libc::SIGKILL);
                let _ = bg.child.wait();
            }
        }
    }
}

/// The port after `word` in a serve banner (`… subscribers 127.0.0.1:PORT (…`,
/// `admin http://127.0.0.1:PORT`); `None` for `feed none (edge …)`.
fn banner_port(banner: &str, word: &str) -> Option<u16> {
    let rest = banner.split(&format!(" {word} ")).nth(1)?;
    let addr = rest.split([' ', ')']).next()?.trim_start_matches("http://");
    addr.parse::<SocketAddr>().ok().map(|a| a.port())
}

/// Runs block `b` (see the module's doc): its `first` commands, then its
/// lines; stops what it left running. Returns each line as it ran it
/// (`&`: in the background), and the lines it skipped.
///
/// # Errors
/// Every line that failed, named by file and line, with its output.
pub(crate) fn run_block(
    b: &Block,
    first: &[String],
    set: &[(String, Vec<String>)],
) -> Result<Vec<String>, String> {
    let mut r = Runner::new(set);
    let marker = b.markers.first().map_or(b.fence, |(n, _)| *n);
    let lines = first
        .iter()
        .map(|c| (format!("{}:{marker} (first:)", b.file), c.clone()))
        .chain(
            logical_lines(&b.body)
                .into_iter()
                .map(|(n, l)| (format!("{}:{n}", b.file), l)),
        );
    let mut result = Ok(());
    for (at, line) in lines {
        result = r.line(&at, &line);
        if result.is_err() {
            break;
        }
    }
    let stopped = r.finish();
    match (result, stopped) {
        (Ok(()), Ok(())) => Ok(std::mem::take(&mut r.notes)),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(a), Err(b)) => Err(format!("{a}\n{b}")),
    }
}

#[test]
fn banner_ports_are_read_by_their_word() {
    let banner = "tickfan serving: feed 127.0.0.1:40001 · subscribers 127.0.0.1:40002 (redis-cli -p 40002 psubscribe '*') · orders 127.0.0.1:40003 · admin http://127.0.0.1:40004 (/health /metrics /report /dlq) · journal tickfan-data";
    let ports: Vec<Option<u16>> = LISTENERS
        .iter()
        .map(|(_, w, _)| banner_port(banner, w))
        .collect();
    assert_eq!(ports, [Some(40001), Some(40002), Some(40003), Some(40004)]);
    assert_eq!(
        banner_port("tickfan serving: feed none (edge on nats://x) · orders none · admin http://127.0.0.1:1", "feed"),
        None
    );
}

#[test]
fn a_documented_port_is_rewritten_and_one_not_served_yet_is_refused() {
    let mut r = Runner::new(&[]);
    r.ports.insert(9102, 40002);
    assert_eq!(
        r.rewrite_ports("x.md:1", "redis-cli -p 9102 psubscribe '*' # 91020 19102")
            .unwrap(),
        "redis-cli -p 40002 psubscribe '*' # 91020 19102"
    );
    let e = r
        .rewrite_ports("x.md:1", "curl -s localhost:9104/metrics")
        .unwrap_err();
    assert!(e.starts_with("x.md:1: port 9104 is not served"), "{e}");
    // A tool's default address is written out, then rewritten (or refused).
    let args = |line: &str| tickfan_args(&split(line).unwrap()[0].words).unwrap();
    let (run, listens) = r
        .tickfan("x.md:2", &args("tickfan subscribe -k 2"))
        .unwrap();
    assert_eq!(run, ["subscribe", "-k", "2", "--to=127.0.0.1:40002"]);
    assert!(listens.is_empty());
    let e = r.tickfan("x.md:3", &args("tickfan orders")).unwrap_err();
    assert!(e.contains("port 9103 is not served"), "{e}");
    // serve: every listener on port 0, remembered by its documented port.
    let (run, listens) = r
        .tickfan(
            "x.md:4",
            &args("tickfan serve --sub-listen 127.0.0.1:9202 --quiet"),
        )
        .unwrap();
    assert_eq!(
        run,
        [
            "serve",
            "--sub-listen=127.0.0.1:0",
            "--quiet",
            "--feed-listen=127.0.0.1:0",
            "--order-listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0"
        ]
    );
    assert_eq!(
        listens,
        [
            (9101, "feed"),
            (9202, "subscribers"),
            (9103, "orders"),
            (9104, "admin")
        ]
    );
    // A second engine on a port an earlier line serves could not bind it.
    let e = r.tickfan("x.md:5", &args("tickfan serve")).unwrap_err();
    assert!(e.contains("port 9102 is already served"), "{e}");
}

#[test]
fn lines_that_run_until_stopped_go_to_the_background() {
    let until_stopped = |line: &str| runs_until_stopped(&split(line).unwrap());
    for line in [
        "cargo run --release -- serve --log-dir logs",
        "tickfan subscribe -k 10",
        "redis-cli -p 9102 psubscribe '*'",
        "printf 'TICKFAN.SINCE EURUSD 41\\nSUBSCRIBE EURUSD\\n' | redis-cli -p 9102",
        "printf 'SUBSCRIBE EURUSD.FXCM\\r\\n' | nc 127.0.0.1 9102",
    ] {
        assert!(until_stopped(line), "{line}");
    }
    for line in [
        "tickfan serve --duration 2s",
        "tickfan subscribe --duration 1s",
        "tickfan orders --count 10",
        "redis-cli -p 9102 TICKFAN.SINCE EURUSD 3",
        "printf 'NEW o-1 EURUSD BUY 1.5\\n' | nc -q1 127.0.0.1 9103",
    ] {
        assert!(!until_stopped(line), "{line}");
    }
}
