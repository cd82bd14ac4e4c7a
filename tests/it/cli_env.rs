//! Where a `serve` flag's value comes from: every flag has its
//! `TICKFAN_<FLAG>` variable, and the command line beats the environment,
//! which beats the `--config` file, which beats the default.

use std::process::{Command, Output};

use tickfan::cli::{env_name, serve_command};

/// `tickfan serve` on ephemeral ports for 200 ms (interval lines every
/// 20 ms unless quiet) with `args` and the
/// variables `env` (and no other `TICKFAN_` variable of this process).
fn serve(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickfan"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TICKFAN_")) {
        cmd.env_remove(k);
    }
    cmd.args(["serve", "--duration", "200ms", "--report-interval", "20ms"])
        .args(crate::util::EPHEMERAL_PORTS)
        .args(args)
        .envs(crate::util::scratch_env())
        .envs(env.iter().copied())
        .output()
        .expect("binary runs")
}

fn refused_naming(out: &Output, flag: &str) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    out.status.code() == Some(2) && err.contains(flag) && err.lines().count() == 1
}

#[test]
fn every_serve_flag_has_its_tickfan_variable() {
    let cmd = serve_command();
    let mut n = 0;
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if long == "help" {
            continue;
        }
        let want = format!("TICKFAN_{}", long.to_uppercase().replace('-', "_"));
        assert_eq!(env_name(long), want);
        assert_eq!(
            a.get_env().and_then(|e| e.to_str()),
            Some(want.as_str()),
            "--{long}"
        );
        n += 1;
    }
    assert!(n > 40, "only {n} flags");
}

#[test]
fn a_variable_sets_its_flag() {
    // The engine sees the value: an invalid one is refused naming the flag.
    let out = serve(&[], &[("TICKFAN_MAX_SYMBOLS", "0")]);
    assert!(refused_naming(&out, "--max-symbols"), "{out:?}");
    let out = serve(&[], &[("TICKFAN_ALERT_BRIDGE_CALL", "0s")]);
    assert!(refused_naming(&out, "--alert-bridge-call"), "{out:?}");
    // A value clap refuses gets clap's words, like on the command line.
    let out = serve(&[], &[("TICKFAN_MAX_SYMBOLS", "lots")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("error: invalid value 'lots' for '--max-symbols <N>'"));
    // A switch takes true or false.
    let interval_lines = |out: &Output| {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with('[') && l.contains("ticks"))
            .count()
    };
    assert!(interval_lines(&serve(&[], &[])) > 0);
    assert_eq!(interval_lines(&serve(&[], &[("TICKFAN_QUIET", "true")])), 0);
    assert!(interval_lines(&serve(&[], &[("TICKFAN_QUIET", "false")])) > 0);
}

#[test]
fn the_command_line_beats_the_environment_which_beats_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tickfan.toml");
    let file_arg = file.to_str().unwrap();
    // The file's value is invalid: it shows whether the file was used.
    std::fs::write(&file, "max-symbols = 0\n").unwrap();
    let out = serve(&["--config", file_arg], &[]);
    assert!(refused_naming(&out, "--max-symbols"), "file over default");
    let out = serve(&["--config", file_arg], &[("TICKFAN_MAX_SYMBOLS", "5")]);
    assert_eq!(out.status.code(), Some(0), "environment over file: {out:?}");
    // The file's path itself may come from the environment.
    let out = serve(&[], &[("TICKFAN_CONFIG", file_arg)]);
    assert!(
        refused_naming(&out, "--max-symbols"),
        "TICKFAN_CONFIG: {out:?}"
    );

    // The environment's value is invalid; the command line's wins.
    let out = serve(&["--max-symbols", "5"], &[("TICKFAN_MAX_SYMBOLS", "0")]);
    assert_eq!(out.status.code(), Some(0), "command line over env: {out:?}");
    let out = serve(
        &["--config", file_arg, "--max-symbols", "5"],
        &[("TICKFAN_MAX_SYMBOLS", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "command line over all: {out:?}");

    // A repeatable flag: the file's array is every value, and a variable
    // replaces it.
    std::fs::write(&file, "bridge = [\"name=a\", \"name=a\"]\n").unwrap();
    let out = serve(&["--config", file_arg], &[]);
    assert!(refused_naming(&out, "--bridge"), "{out:?}");
    let out = serve(&["--config", file_arg], &[("TICKFAN_BRIDGE", "name=b")]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
