//! `deploy/`: the example `tickfan.toml` is the default configuration and
//! names every `serve` flag; the systemd unit passes `systemd-analyze
//! verify`; the Prometheus rules pass `promtool` (syntax and unit tests),
//! mirror every engine alert and name only metrics the engine exports.
//!
//! `systemd-analyze` and `promtool` are external tools (Debian's `systemd`
//! and `prometheus`, installed by `.ci/run`); a missing one fails the test
//! with a message saying so, it is never skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::FromArgMatches;
use tickfan::cli::{expand_config_file, serve_command, ServeArgs};
use tickfan::config::Config;
use tickfan::metrics::alerts::Alert;

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file)
}

/// Runs `tool` (an absolute path) with `args`; a missing tool fails the test clearly.
fn run_tool(tool: &str, package: &str, args: &[&str]) -> Output {
    assert!(
        Path::new(tool).exists(),
        "{tool} is missing: install Debian's `{package}` package (.ci/run does)"
    );
    Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} does not run: {e}"))
}

/// `tickfan serve` arguments parsed exactly as the binary parses them
/// (`--config` expansion, then clap), without starting anything.
fn parse_serve(args: &[&str]) -> ServeArgs {
    let mut all = vec!["tickfan".to_string(), "serve".to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let all = expand_config_file(all).expect("the config file loads");
    let m = serve_command()
        .try_get_matches_from(&all[1..])
        .unwrap_or_else(|e| panic!("{all:?}: {e}"));
    ServeArgs::from_arg_matches(&m).unwrap()
}

fn no_tickfan_variables() {
    let set: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("TICKFAN_"))
        .collect();
    assert!(set.is_empty(), "unset {set:?} to run this test");
}

#[test]
fn the_example_config_is_the_default_configuration() {
    no_tickfan_variables();
    let path = deploy("tickfan.toml");
    let args = parse_serve(&["--config", path.to_str().unwrap()]);
    let loaded = serde_json::to_value(args.to_config().expect("valid")).unwrap();
    let default = serde_json::to_value(Config::default()).unwrap();
    // Name the settings that differ (the whole config is long).
    let differ: Vec<String> = default
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| loaded.get(k.as_str()) != Some(v))
        .map(|(k, v)| format!("{k}: default {v}, file {}", loaded[k.as_str()]))
        .collect();
    assert!(differ.is_empty(), "deploy/tickfan.toml: {differ:#?}");
    assert_eq!(loaded, default);
    // Flags that are not part of `Config` (the binary's own).
    assert_eq!(args.log_format, tickfan::logging::LogFormat::Text);
    assert!(args.report_json.is_none() && args.config.is_some());
}

/// The keys of the example file: set ones, and commented-out examples
/// (`# key = value`) of flags that have no default.
fn example_keys(text: &str) -> (Vec<String>, Vec<String>) {
    let table: toml::Table = text.parse().expect("valid TOML");
    let set = table.keys().map(|k| k.replace('_', "-")).collect();
    let commented = text
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.contains(' '))
        .collect();
    (set, commented)
}

#[test]
fn every_serve_flag_has_its_key_in_the_example_config() {
    let text = std::fs::read_to_string(deploy("tickfan.toml")).unwrap();
    let (set, commented) = example_keys(&text);
    let cmd = serve_command();
    let mut flags = Vec::new();
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if long == "help" || long == "config" {
            continue;
        }
        flags.push(long.to_string());
        let has_default = !a.get_default_values().is_empty();
        if has_default {
            assert!(
                set.iter().any(|k| k == long),
                "deploy/tickfan.toml lacks `{long} = <default>` (--{long} has a default)"
            );
        } else {
            assert!(
                set.iter().chain(&commented).any(|k| k == long),
                "deploy/tickfan.toml lacks `{long}` (set, or `# {long} = example` as it has no default)"
            );
        }
    }
    for k in set.iter().chain(&commented) {
        assert!(
            flags.contains(k),
            "deploy/tickfan.toml: `{k}` is not a flag"
        );
    }
}

#[test]
fn the_systemd_unit_verifies() {
    const VERIFY: &str = "/usr/bin/systemd-analyze";
    let unit = std::fs::read_to_string(deploy("tickfan.service")).unwrap();
    for line in [
        "Restart=on-failure",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "DynamicUser=yes",
        "CapabilityBoundingSet=",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} missing");
    }
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} missing"))
    };
    assert!(value("LimitNOFILE=").parse::<u64>().unwrap() >= 3 * 1024);
    for dir in value("ReadWritePaths=").split(' ') {
        assert!(dir.starts_with("/var/"), "{dir}");
    }

    // The command line of the unit parses as the binary parses it, with
    // the example file in place of /etc/tickfan/tickfan.toml.
    let exec = value("ExecStart=");
    let mut words = exec.split(' ');
    assert_eq!(words.next(), Some("/usr/local/bin/tickfan"));
    assert_eq!(words.next(), Some("serve"));
    let example = deploy("tickfan.toml");
    let args: Vec<&str> = words
        .map(|w| {
            if w == "/etc/tickfan/tickfan.toml" {
                example.to_str().unwrap()
            } else {
                w
            }
        })
        .collect();
    assert!(args.contains(&example.to_str().unwrap()), "{exec}");
    no_tickfan_variables();
    parse_serve(&args)
        .to_config()
        .expect("the unit's flags are valid");

    // The example --pin lies inside CPUAffinity= (a range `a-b`).
    let (lo, hi) = value("CPUAffinity=").split_once('-').unwrap();
    let cores = lo.parse::<usize>().unwrap()..=hi.parse::<usize>().unwrap();
    let text = std::fs::read_to_string(&example).unwrap();
    let pin = text
        .lines()
        .find_map(|l| l.strip_prefix("# pin = "))
        .expect("an example pin in tickfan.toml");
    let pin = tickfan::cli::parse_pin(pin.trim_matches('"')).unwrap();
    for core in [pin.feed, pin.publish].into_iter().flatten() {
        assert!(cores.contains(&core), "--pin core {core} outside {cores:?}");
    }

    // verify needs ExecStart's executable to exist: check a copy naming the
    // binary under test (the only change). Any complaint about the unit
    // fails the test; systemd reports bad lines as warnings with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| -> (bool, String) {
        let copy = dir.path().join("tickfan.service");
        std::fs::write(
            &copy,
            text.replace("/usr/local/bin/tickfan", env!("CARGO_BIN_EXE_tickfan")),
        )
        .unwrap();
        let out = run_tool(VERIFY, "systemd", &["verify", copy.to_str().unwrap()]);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let about_unit = said.lines().any(|l| l.contains("tickfan"));
        (out.status.success() && !about_unit, said)
    };
    let (ok, said) = check(&unit);
    assert!(ok, "systemd-analyze verify:\n{said}");
    // The check itself catches a bad line.
    let broken = unit.replace("Restart=on-failure", "Restart=sometimes");
    let (ok, said) = check(&broken);
    assert!(!ok, "a bad Restart= went unnoticed:\n{said}");
}

#[test]
fn the_alert_rules_pass_promtool_and_mirror_the_engine() {
    const PROMTOOL: &str = "/usr/bin/promtool";
    let rules = deploy("tickfan-alerts.yml");
    let out = run_tool(
        PROMTOOL,
        "prometheus",
        &["check", "rules", rules.to_str().unwrap()],
    );
    assert!(out.status.success(), "promtool check rules: {out:?}");
    let tests = deploy("tickfan-alerts.test.yml");
    let out = run_tool(
        PROMTOOL,
        "prometheus",
        &["test", "rules", tests.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // One rule per engine alert, on its gauge.
    let text = std::fs::read_to_string(&rules).unwrap();
    let exprs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .collect();
    for a in Alert::ALL {
        let want = format!("tickfan_alert{{name=\"{}\"}} == 1", a.as_str());
        assert!(exprs.contains(&want.as_str()), "no rule `{want}`");
    }
    let gauges = exprs
        .iter()
        .filter(|e| e.contains("tickfan_alert{"))
        .count();
    assert_eq!(gauges, Alert::COUNT, "a rule on an alert the engine lacks");

    // Every metric the rules name is exported by a running engine.
    let engine = crate::util::engine();
    let (status, body) = crate::admin::http(engine.admin_addr(), "GET", "/metrics");
    assert_eq!(status, 200);
    let exported: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for (i, _) in line.match_indices("tickfan_") {
            let name: String = line[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                exported.contains(&name.as_str()),
                "{name} (in the rules) is not exported by /metrics"
            );
        }
    }
    engine.stop();
}
