//! The `tickfan` binary: glue. Parses flags, builds the validated
//! configuration, starts the runtime or a tool, and maps the outcome to an
//! exit code.
//!
//! Exit codes: 0 success; 1 runtime failure (cannot bind, I/O error);
//! 2 usage error (bad flag or value, or a `--data-dir` another engine
//! holds); 3 an engine thread died (panicked): the engine stopped after
//! syncing what is durable; 4 the graceful stop had not ended by its
//! deadline (`Config::stop_deadline`): the process exited after syncing
//! what the journal holds; 130 a second signal during the stop.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::FromArgMatches;

use tickfan::cli::ServeArgs;
use tickfan::error::Failure;
use tickfan::runtime::Engine;

#[path = "../tools/mod.rs"]
mod tools;

use tools::cli::{Cli, Command};

fn main() -> ExitCode {
    let args = match tickfan::cli::expand_config_file(std::env::args().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tickfan: {e}");
            return ExitCode::from(2);
        }
    };
    // `serve`'s flags get their `TICKFAN_<FLAG>` variables on the built
    // command (see `tools::cli::command`).
    let cli = tools::cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match cli {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    tickfan::logging::init(match &cli.command {
        Command::Serve(args) => args.log_format,
        _ => tickfan::logging::LogFormat::Text,
    });
    let result = match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Replay(args) => tools::replay::run(&args),
        Command::Demo(args) => tools::demo::run(&args),
        Command::Gen(args) => tools::gen::run(&args),
        Command::Subscribe(args) => tools::subscribe::run(&args),
        Command::Report(args) => tools::report::run(&args),
        Command::Forward(args) => tools::forward::run(&args),
        Command::Orders(args) => tools::orders::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("tickfan: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

/// Help and version go to stdout (exit 0); every other clap error is
/// printed as clap words it (with its usage line and tips such as "a
/// similar argument exists"), exit 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    let _ = e.print();
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

/// Stops `engine` gracefully, or ends the process at `deadline` from now
/// whatever the stop waits for (a venue that never answers, a client): the
/// on-fatal hooks make durable what the journal and the dead-letter file
/// hold (each bounded), then exit [`STOP_DEADLINE_EXIT`]. Every `ACK`ed
/// order is already durable by then; an `ACK` follows its sync.
fn stop_within(engine: Engine, deadline: Duration) -> tickfan::metrics::report::FinalReport {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    use tickfan::sys::signals::STOP_DEADLINE_EXIT;
    let watch = std::sync::Arc::clone(engine.watch());
    let (done, stopped) = channel::<()>();
    let watchdog = std::thread::Builder::new()
        .name("tickfan-stop-deadline".into())
        .spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(deadline) {
                watch.run_fatal_hooks();
                eprintln!(
                    "tickfan: the stop had not ended {deadline:?} after it began (see the log for what it waited for); exited with what is durable"
                );
                std::process::exit(STOP_DEADLINE_EXIT);
            }
        });
    if let Err(e) = &watchdog {
        log::error!("cannot start the stop's deadline thread ({e}); stopping without a deadline");
    }
    let report = engine.stop();
    drop(done);
    report
}

fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = args
        .to_config()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let stop = tickfan::sys::signals::stop_flag()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    // Test-only: `TICKFAN_FAULT=panic:<thread>` or `stall:<thread>` (see
    // `tickfan::sys::watch::Fault`).
    let fault = match std::env::var("TICKFAN_FAULT") {
        Ok(v) => Some(tickfan::sys::watch::Fault::parse(&v).map_err(Failure::Usage)?),
        Err(_) => None,
    };
    // Fault injection for benchmarks: `TICKFAN_FAULT_FSYNC_MS=<ms>` makes
    // every journal sync that much slower (see
    // `tickfan::order::journal::fault`). Off unless set.
    let slow_sync = tickfan::order::journal::fault::slow_sync_from_env().map_err(Failure::Usage)?;
    if let Some(d) = slow_sync {
        log::warn!(
            "fault injection: every order journal sync takes {d:?} longer ({}); not for production",
            tickfan::order::journal::fault::FSYNC_FAULT_ENV
        );
    }
    let injected = tickfan::runtime::Injected {
        fault,
        journal_files: slow_sync.map(tickfan::order::journal::fault::slow_sync),
        ..Default::default()
    };
    let engine = Engine::start_with(&config, injected).map_err(|e| {
        use tickfan::error::StartError as E;
        use tickfan::sys::dir_lock::DirLockError;
        match e {
            // Both are fixed by changing a flag, not by retrying.
            E::Config(_) | E::DataDir(DirLockError::Held { .. }) => Failure::Usage(e.to_string()),
            other => Failure::Runtime(other.to_string()),
        }
    })?;
    let takes_orders = config.cluster.role.takes_orders();
    let journal = match (takes_orders, config.order.journal) {
        (false, _) => "journal: none (an edge takes no orders)".to_owned(),
        (true, true) => format!("journal {}", config.order.data_dir.display()),
        (true, false) => "journal: off (orders are lost on a crash)".to_owned(),
    };
    let orders = match takes_orders {
        true => engine.order_addr().to_string(),
        false => "none".to_owned(),
    };
    let feed = match config.cluster.role {
        tickfan::cluster::role::Role::Edge => {
            format!("none (edge on {})", config.cluster.nats.join(","))
        }
        _ => engine.feed_addr().to_string(),
    };
    use tickfan::tls::TlsPortName;
    let tls = |p: TlsPortName| config.tls.as_ref().and_then(|t| t.for_port(p)).is_some();
    let (sub_tls, redis_tls) = match tls(TlsPortName::Subscribers) {
        true => (" tls", "--tls --cacert CA.pem "),
        false => ("", ""),
    };
    let orders = match takes_orders && tls(TlsPortName::Orders) {
        true => format!("{orders} tls"),
        false => orders,
    };
    let scheme = if tls(TlsPortName::Admin) {
        "https"
    } else {
        "http"
    };
    let mutual = match config.tls.as_ref().is_some_and(|t| t.mutual()) {
        true => " · tls clients need a certificate (--tls-client-ca)",
        false => "",
    };
    // One write: stderr is unbuffered, and `eprintln!` writes a line in
    // pieces that a reader of a log file can catch half written.
    let banner = format!(
        "tickfan serving: feed {feed} · subscribers {}{sub_tls} (redis-cli {redis_tls}-p {} psubscribe '*') · orders {} · admin {scheme}://{} (/health /metrics /report /dlq) · {journal}{mutual}\n",
        engine.subscriber_addr(),
        engine.subscriber_addr().port(),
        orders,
        engine.admin_addr()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), banner.as_bytes());
    let started = Instant::now();
    // The main thread only watches for the end: a signal or --duration.
    while !stop.load(Ordering::Relaxed) {
        if let Some(why) = engine.watch().fatal() {
            // A stage is gone: make durable what is, then exit without a
            // drain that could wait for the missing stage forever.
            engine.watch().run_fatal_hooks();
            eprintln!("tickfan: {why}; engine stopped");
            std::process::exit(tickfan::sys::watch::FATAL_EXIT);
        }
        if config.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = stop_within(engine, config.stop_deadline());
    println!("{report}");
    if let Some(dir) = &config.log_dir {
        // The final report beside the interval log, as text and JSON.
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        for (name, body) in [
            ("final-report.txt", report.to_string()),
            ("final-report.json", json),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, body)
                .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))?;
        }
        println!(
            "stage histograms: {} and the final report in {} (render with: tickfan report {})",
            dir.join(tickfan::metrics::hlog::ENGINE_LOG).display(),
            dir.display(),
            dir.display()
        );
    }
    if let Some(path) = &args.report_json {
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, json)
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}
