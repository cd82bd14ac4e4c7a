//! `tickfan serve --config FILE`: a TOML file of `flag = value` pairs,
//! turned into command-line flags before the real parse, so that one
//! parser (clap's) checks every value whatever its source.
//!
//! Precedence, strongest first: command line > environment
//! (`TICKFAN_<FLAG>`) > file > default. A first parse of the command line
//! and the environment tells which flags they already set (clap's
//! `ValueSource`); only the file's other keys are inserted, right after
//! `serve`. The file's path may itself come from `TICKFAN_CONFIG`.
//!
//! Keys are the long flag names, with `-` or `_`. Values: a string or a
//! number (`--flag=value`), a boolean for a switch (`true` → `--quiet`,
//! `false` → nothing), or an array of strings/numbers for a repeatable
//! flag (`bridge = ["name=lp1", "name=lp2"]` → two `--bridge`). An example
//! with every key and its default is `deploy/tickfan.toml`.

use std::path::Path;

use clap::parser::ValueSource;

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path}: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message, one line.
        message: String,
    },
    /// A key that is not a flag of `tickfan serve`.
    #[error(
        "config file {path}: unknown key '{key}' (keys are the flag names of `tickfan serve`)"
    )]
    UnknownKey {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },
    /// A value of the wrong kind (a table, an array for a single-valued
    /// flag, a non-boolean for a switch, …).
    #[error("config file {path}: key '{key}' {why}")]
    BadValue {
        /// The file.
        path: String,
        /// The key.
        key: String,
        /// What was expected.
        why: &'static str,
    },
}

/// `args` (a whole command line, program name first) with the flags of the
/// `--config` file inserted after `serve`, leaving out every flag the
/// command line or the environment already sets. Any other command line is
/// returned unchanged; so is one the first parse refuses (the real parse
/// then reports the error in clap's words).
///
/// # Errors
/// An unreadable file, bad TOML, an unknown key, or a value of the wrong kind.
pub fn expand_config_file(args: Vec<String>) -> Result<Vec<String>, ConfigFileError> {
    if args.get(1).map(String::as_str) != Some("serve") {
        return Ok(args);
    }
    let cmd = super::serve_command();
    let Ok(matches) = cmd.clone().try_get_matches_from(&args[1..]) else {
        return Ok(args);
    };
    let Some(path) = matches.get_one::<std::path::PathBuf>("config") else {
        return Ok(args);
    };
    let extra = file_args(path, &cmd, |id| {
        matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    })?;
    let mut out = args[..2].to_vec();
    out.extend(extra);
    out.extend_from_slice(&args[2..]);
    Ok(out)
}

/// The file's pairs as `--flag=value` arguments of `cmd`, skipping the
/// flags for which `already_set(id)` holds.
///
/// # Errors
/// As [`expand_config_file`].
pub(crate) fn file_args(
    path: &Path,
    cmd: &clap::Command,
    already_set: impl Fn(&str) -> bool,
) -> Result<Vec<String>, ConfigFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: shown.clone(),
        source,
    })?;
    let table: toml::Table =
        text.parse()
            .map_err(|e: toml::de::Error| ConfigFileError::Syntax {
                path: shown.clone(),
                message: e.message().replace('\n', " "),
            })?;
    let mut args = Vec::new();
    for (key, value) in table {
        let flag = key.replace('_', "-");
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()) && flag != "config" && flag != "help");
        let Some(arg) = arg else {
            return Err(ConfigFileError::UnknownKey { path: shown, key });
        };
        if already_set(arg.get_id().as_str()) {
            continue;
        }
        let bad = |why| ConfigFileError::BadValue {
            path: shown.clone(),
            key: key.clone(),
            why,
        };
        let switch = matches!(
            arg.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
        );
        match value {
            toml::Value::Boolean(on) if switch => {
                if on {
                    args.push(format!("--{flag}"));
                }
            }
            _ if switch => return Err(bad("is a switch: true or false")),
            toml::Value::Array(items) => {
                if !matches!(arg.get_action(), clap::ArgAction::Append) {
                    return Err(bad("takes one value, not an array"));
                }
                for item in items {
                    let text = scalar(item).ok_or_else(|| bad("must hold strings or numbers"))?;
                    args.push(format!("--{flag}={text}"));
                }
            }
            other => {
                let text = scalar(other).ok_or_else(|| bad("must be a string or a number"))?;
                args.push(format!("--{flag}={text}"));
            }
        }
    }
    Ok(args)
}

/// A string or a number as flag text.
fn scalar(v: toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> clap::Command {
        use clap::{Arg, ArgAction};
        clap::Command::new("serve")
            .arg(Arg::new("config").long("config"))
            .arg(Arg::new("max_symbols").long("max-symbols"))
            .arg(Arg::new("pin").long("pin"))
            .arg(Arg::new("duration").long("duration"))
            .arg(Arg::new("quiet").long("quiet").action(ArgAction::SetTrue))
            .arg(Arg::new("bridge").long("bridge").action(ArgAction::Append))
    }

    fn args(text: &str, set: &[&str]) -> Result<Vec<String>, ConfigFileError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.toml");
        std::fs::write(&p, text).unwrap();
        file_args(&p, &cmd(), |id| set.contains(&id)).map(|mut a| {
            a.sort();
            a
        })
    }

    #[test]
    fn a_file_becomes_flags_and_already_set_ones_are_left_out() {
        let a = args(
            "max_symbols = 20000\nquiet = true\npin = \"feed=0\"\nduration = \"5s\"\nbridge = [\"name=a\", \"name=b\"]\n",
            &["duration"],
        )
        .unwrap();
        assert_eq!(
            a,
            [
                "--bridge=name=a",
                "--bridge=name=b",
                "--max-symbols=20000",
                "--pin=feed=0",
                "--quiet"
            ]
        );
        assert_eq!(args("quiet = false\n", &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let e = |t| args(t, &[]).unwrap_err().to_string();
        assert!(e("max-symbolz = 1\n").contains("unknown key 'max-symbolz'"));
        assert!(e("config = \"x\"\n").contains("unknown key 'config'"));
        assert!(e("pin = [1, 2]\n").contains("key 'pin' takes one value"));
        assert!(e("quiet = \"yes\"\n").contains("key 'quiet' is a switch"));
        assert!(e("bridge = [{a = 1}]\n").contains("key 'bridge' must hold"));
        assert!(e("pin = { a = 1 }\n").contains("key 'pin' must be a string"));
        assert!(matches!(
            args("= nope", &[]),
            Err(ConfigFileError::Syntax { .. })
        ));
    }
}
