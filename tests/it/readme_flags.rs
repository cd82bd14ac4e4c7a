//! The README's table "Flags of `tickfan serve`" against `tickfan serve
//! --help`: the same headings in the same order, under each the same flags
//! in the same order, each with the same value name (or the same choices)
//! and the same default. So the table cannot go stale: a flag added,
//! renamed, regrouped or given a new default fails here, naming the row.
//! Also: the README's Contents list every section heading, in order.

use std::process::Command;

/// One flag as `--help` shows it, or as the README's table lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Flag {
    heading: String,
    /// `--feed-listen`.
    long: String,
    /// What follows the name: `ADDR`, `spin|yield|park`, or empty for a switch.
    value: String,
    /// `Some("127.0.0.1:9101")`, or `None` without a default.
    default: Option<String>,
}

/// Parses clap's long help (`--help`): headings are unindented lines
/// ending in `:`; an entry starts with an indented `-x, --long <VALUE>` or
/// `--long <VALUE>` line; its block holds `[default: …]` and, for a choice,
/// the `- name:` lines under "Possible values:".
fn from_help(help: &str) -> Vec<Flag> {
    let mut out: Vec<Flag> = Vec::new();
    let mut heading = String::new();
    let mut choices = false;
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            heading = line.trim_end_matches(':').to_string();
            continue;
        }
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let entry = (indent == 2 && t.starts_with('-') && t.contains("--"))
            || (indent == 6 && t.starts_with("--"));
        if entry {
            let from = t.find("--").unwrap();
            let mut words = t[from..].split_whitespace();
            let long = words.next().unwrap().to_string();
            let value = words
                .next()
                .map(|v| v.trim_matches(|c| c == '<' || c == '>').to_string())
                .unwrap_or_default();
            out.push(Flag {
                heading: heading.clone(),
                long,
                value,
                default: None,
            });
            choices = false;
            continue;
        }
        let Some(f) = out.last_mut() else { continue };
        if let Some(d) = t.strip_prefix("[default: ") {
            f.default = Some(d.trim_end_matches(']').to_string());
        } else if t == "Possible values:" {
            choices = true;
        } else if let Some(choice) = t.strip_prefix("- ").filter(|_| choices) {
            // A possible value: replaces the placeholder by the choices.
            let name = choice.split(':').next().unwrap();
            if f.value.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                f.value.clear();
            } else {
                f.value.push('|');
            }
            f.value.push_str(name);
        }
    }
    out.retain(|f| f.long != "--help");
    out
}

/// Parses the README's table: a row `| **Heading** | | |` opens a group; a
/// row `` | `--long VALUE` | default | meaning | `` is a flag, its default
/// `` `value` `` or `none …` (or `off` for a switch).
fn from_readme(readme: &str) -> Vec<Flag> {
    let start = readme
        .find("\n## Flags of `tickfan serve`\n")
        .expect("README section \"Flags of `tickfan serve`\"");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut out = Vec::new();
    let mut heading = String::new();
    for row in section.lines().filter(|l| l.starts_with("| ")) {
        // Cells split on `|` not escaped as `\|`.
        let cells: Vec<String> = row
            .replace("\\|", "\u{0}")
            .split('|')
            .map(|c| c.trim().replace('\u{0}', "|"))
            .collect();
        let (name, default) = (&cells[1], &cells[2]);
        if let Some(h) = name.strip_prefix("**") {
            heading = h.trim_end_matches("**").to_string();
            continue;
        }
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue; // the header row
        };
        let (long, value) = name.split_once(' ').unwrap_or((name, ""));
        let default = if let Some(d) = default.strip_prefix('`') {
            Some(
                d.strip_suffix('`')
                    .expect("a default in backticks")
                    .to_string(),
            )
        } else {
            assert!(
                default.starts_with("none") || (default == "off" && value.is_empty()),
                "{long}: a default is `value`, none …, or off for a switch; got {default:?}"
            );
            None
        };
        out.push(Flag {
            heading: heading.clone(),
            long: long.to_string(),
            value: value.to_string(),
            default,
        });
    }
    out
}

#[test]
fn the_readme_flag_table_is_serve_help() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickfan"));
    // `--help` shows a variable's current value: show none.
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TICKFAN_")) {
        cmd.env_remove(k);
    }
    let out = cmd.args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = from_help(&String::from_utf8(out.stdout).unwrap());
    assert!(help.len() > 40, "{help:#?}");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = from_readme(&readme);
    let row = |f: &Flag| {
        let value = if f.value.is_empty() {
            String::new()
        } else {
            format!(" {}", f.value.replace('|', "\\|"))
        };
        let default = f
            .default
            .as_ref()
            .map_or("none".into(), |d| format!("`{d}`"));
        format!("| **{}** … | `{}{value}` | {default} |", f.heading, f.long)
    };
    for (i, want) in help.iter().enumerate() {
        let got = table.get(i);
        assert!(
            got == Some(want),
            "README flag table, row {}: want {}\n                            got {}",
            i + 1,
            row(want),
            got.map_or("nothing".to_string(), row)
        );
    }
    assert_eq!(
        table.len(),
        help.len(),
        "README lists flags that --help does not: {:?}",
        &table[help.len().min(table.len())..]
    );
}

#[test]
fn the_help_parser_reads_headings_values_choices_and_defaults() {
    let help = "Usage: tickfan serve [OPTIONS]\n\nOptions:\n      --config <FILE>\n          Read\n          \n          [env: TICKFAN_CONFIG=]\n\n  -h, --help\n          Print help\n\nMarket data:\n      --idle <IDLE>\n          What\n\n          Possible values:\n          - spin:  Poll\n          - park:  Block\n          \n          [env: TICKFAN_IDLE=]\n          [default: park]\n\n      --quiet\n          No lines\n";
    assert_eq!(
        from_help(help),
        [
            Flag {
                heading: "Options".into(),
                long: "--config".into(),
                value: "FILE".into(),
                default: None
            },
            Flag {
                heading: "Market data".into(),
                long: "--idle".into(),
                value: "spin|park".into(),
                default: Some("park".into())
            },
            Flag {
                heading: "Market data".into(),
                long: "--quiet".into(),
                value: String::new(),
                default: None
            },
        ]
    );
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn the_readme_contents_list_every_section_in_order() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let (head, body) = readme
        .split_once("## Contents\n")
        .expect("README has a Contents section");
    assert!(head.starts_with("# tickfan"));
    let (toc, rest) = body.split_once("\n## ").expect("a section after Contents");
    let listed: Vec<String> = toc
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- ["))
        .map(|l| l.to_string())
        .collect();
    let mut headings = Vec::new();
    let mut in_code = false;
    for line in format!("## {rest}").lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            headings.push(format!("{h}](#{})", anchor(h)));
        }
    }
    assert_eq!(listed, headings, "README Contents and its headings differ");
}
