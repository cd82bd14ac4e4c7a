//! The book's table "Flags of `tickfan serve`" (`docs/src/flags.md`)
//! against `tickfan serve --help`: the same headings in the same order,
//! under each the same flags in the same order, each with the same value
//! name (or the same choices) and the same default. So the table cannot go
//! stale: a flag added, renamed, regrouped or given a new default fails
//! here, naming the row.
//!
//! Also the docs' structure: every chapter of the book is in its
//! `SUMMARY.md` and every entry there is a file; every relative link of
//! the README and the book reaches a file and, with a `#anchor`, a heading
//! of that file; every command block of the README is also in the book.

use std::path::Path;
use std::process::Command;

/// One flag as `--help` shows it, or as the book's table lists it.
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

/// Parses the flag table of the chapter "Flags of `tickfan serve`": a row
/// `| **Heading** | | |` opens a group; a row `` | `--long VALUE` |
/// default | meaning | `` is a flag, its default `` `value` `` or `none …`
/// (or `off` for a switch).
fn from_chapter(chapter: &str) -> Vec<Flag> {
    let start = chapter
        .find("# Flags of `tickfan serve`\n")
        .filter(|&i| i == 0 || chapter[..i].ends_with('\n'))
        .expect("the chapter's title \"Flags of `tickfan serve`\"");
    let section = &chapter[start..];
    let section = &section[..section[1..].find("\n# ").map_or(section.len(), |i| i + 1)];
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

/// The book's chapter that holds the flag table.
const FLAGS_CHAPTER: &str = "docs/src/flags.md";

#[test]
fn the_book_s_flag_table_is_serve_help() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickfan"));
    // `--help` shows a variable's current value: show none.
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TICKFAN_")) {
        cmd.env_remove(k);
    }
    let out = cmd.args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = from_help(&String::from_utf8(out.stdout).unwrap());
    assert!(help.len() > 40, "{help:#?}");
    let chapter = read(FLAGS_CHAPTER);
    let table = from_chapter(&chapter);
    assert!(!table.is_empty(), "no flag table in {FLAGS_CHAPTER}");
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
            "{FLAGS_CHAPTER}, flag table row {}:\nwant {}\n got {}",
            i + 1,
            row(want),
            got.map_or("nothing".to_string(), row)
        );
    }
    assert_eq!(
        table.len(),
        help.len(),
        "{FLAGS_CHAPTER} lists flags that --help does not: {:?}",
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

/// `path`, relative to the repository, as text.
fn read(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The anchor GitHub and mdBook give a heading: lower case, a link's text
/// for the link, punctuation but `-` and `_` dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some((label, after)) = rest[open + 1..].split_once("](") else {
            break;
        };
        let Some(close) = after.find(')') else { break };
        text.push_str(&rest[..open]);
        text.push_str(label);
        rest = &after[close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a Markdown text outside its fenced code blocks, with their
/// numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let run: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
        let uniform = run.chars().all(|c| run.starts_with(c));
        if run.len() >= 3 && uniform {
            match &fence {
                None => fence = Some(run),
                Some(f) if run.starts_with(f.as_str()) && t.trim_end() == run => fence = None,
                Some(_) => {}
            }
            continue;
        }
        if fence.is_none() {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchors of a Markdown text's headings, in order; a repeated one
/// gets `-1`, `-2`, … as on GitHub and in mdBook.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let Some(h) = line[hashes..]
            .strip_prefix(' ')
            .filter(|_| (1..=6).contains(&hashes))
        else {
            continue;
        };
        let a = anchor(h);
        let n = seen.iter().filter(|s| **s == a).count();
        seen.push(a.clone());
        out.push(if n == 0 { a } else { format!("{a}-{n}") });
    }
    out
}

/// A line without its code spans (`` `…` ``, ``` ``…`` ```).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let after = &rest[open + ticks..];
        let fence = "`".repeat(ticks);
        match after.find(&fence) {
            Some(close) => rest = &after[close + ticks..],
            None => {
                rest = after;
                out.push_str(&fence);
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of a Markdown text's inline links (`[text](target)`) outside
/// code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// The relative links of `file` (a path under `root`, its text `text`)
/// that go nowhere: to no file or directory of the repository under
/// `root`, or, with a `#anchor`, to no heading of that Markdown file.
/// Returns how many relative links it checked and one error per broken one,
/// `FILE:LINE: TARGET: why`.
fn broken_links(root: &Path, file: &str, text: &str) -> (usize, Vec<String>) {
    let root = root.canonicalize().expect("the repository's directory");
    let here = root.join(file);
    let dir = here.parent().expect("a file in a directory");
    let (mut checked, mut errors) = (0, Vec::new());
    for (n, target) in links(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        checked += 1;
        let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
        let at = format!("{file}:{n}: {target}");
        if target.is_empty() {
            errors.push(format!("{at}: an empty link"));
            continue;
        }
        let to = if path.is_empty() {
            here.clone()
        } else {
            match dir.join(path).canonicalize() {
                Ok(p) if p.starts_with(&root) => p,
                Ok(_) => {
                    errors.push(format!("{at}: outside the repository"));
                    continue;
                }
                Err(_) => {
                    errors.push(format!("{at}: no such file"));
                    continue;
                }
            }
        };
        if fragment.is_empty() || to.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let target_text = if path.is_empty() {
            text.to_string()
        } else {
            std::fs::read_to_string(&to).unwrap_or_default()
        };
        if !anchors(&target_text).iter().any(|a| a == fragment) {
            errors.push(format!("{at}: no heading #{fragment} in that file"));
        }
    }
    (checked, errors)
}

#[test]
fn every_relative_link_of_the_readme_and_the_book_reaches_a_file_and_a_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = crate::docs_commands::doc_files();
    assert!(
        files.iter().any(|(f, _)| f == "README.md")
            && files.iter().any(|(f, _)| f.starts_with("docs/src/")),
        "{:?}",
        files.iter().map(|(f, _)| f).collect::<Vec<_>>()
    );
    let (mut checked, mut errors) = (0, Vec::new());
    for (file, text) in &files {
        let (n, e) = broken_links(root, file, text);
        checked += n;
        errors.extend(e);
    }
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
    assert!(
        checked > 50,
        "only {checked} relative links found: is it reading the docs?"
    );
}

/// The link check on a made-up repository: each broken link named by file
/// and line, the good ones passing.
#[test]
fn a_link_to_a_missing_file_or_heading_is_named_by_file_and_line() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("repo");
    std::fs::create_dir_all(root.join("docs/src")).unwrap();
    std::fs::write(top.path().join("outside.md"), "# Outside\n").unwrap();
    std::fs::write(
        root.join("docs/src/a.md"),
        "# A\n\n## Flags of `tickfan serve`\n\n## Same\n\n## Same\n\n```sh\n# not a heading\n```\n",
    )
    .unwrap();
    let text = "# R\n\n\
        [a](docs/src/a.md) [f](docs/src/a.md#flags-of-tickfan-serve) [2nd](docs/src/a.md#same-1) [self](#r) [dir](docs/) [web](https://example.com/x.md#y) `[code](nowhere.md)`\n\
        ```\n[fenced](nowhere.md)\n```\n\
        [gone](docs/src/b.md)\n\
        [no heading](docs/src/a.md#flags)\n\
        [in code](docs/src/a.md#not-a-heading)\n\
        [not self](#a)\n\
        [out](../outside.md)\n";
    let (checked, errors) = broken_links(&root, "README.md", text);
    assert_eq!(
        errors,
        [
            "README.md:7: docs/src/b.md: no such file",
            "README.md:8: docs/src/a.md#flags: no heading #flags in that file",
            "README.md:9: docs/src/a.md#not-a-heading: no heading #not-a-heading in that file",
            "README.md:10: #a: no heading #a in that file",
            "README.md:11: ../outside.md: outside the repository",
        ]
    );
    assert_eq!(checked, 10);
    assert_eq!(
        anchors("# Scale-out on NATS\n## Readers that keep up, at three loads (`bash perf/keeping_up.sh`)\n## [Orders](x.md) (TCP, port 9103): text lines\n"),
        [
            "scale-out-on-nats",
            "readers-that-keep-up-at-three-loads-bash-perfkeeping_upsh",
            "orders-tcp-port-9103-text-lines"
        ]
    );
}

/// What is wrong with the book's `SUMMARY.md` in `src` (the book's source
/// directory): a chapter file it does not list, an entry that is no file of
/// `src`, an entry listed twice.
fn summary_errors(src: &Path) -> Vec<String> {
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap_or_default();
    let mut errors = Vec::new();
    let mut listed: Vec<String> = Vec::new();
    for (n, target) in links(&summary) {
        let path = target.split('#').next().unwrap_or("");
        if path.is_empty() || !path.ends_with(".md") || !src.join(path).is_file() {
            errors.push(format!(
                "SUMMARY.md:{n}: ({target}) is not a chapter file of the book"
            ));
        } else if listed.iter().any(|l| l == path) {
            errors.push(format!("SUMMARY.md:{n}: {path} is listed twice"));
        } else {
            listed.push(path.to_string());
        }
    }
    let mut todo = vec![src.to_path_buf()];
    let mut chapters = Vec::new();
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                let rel = p.strip_prefix(src).unwrap().display().to_string();
                if rel != "SUMMARY.md" {
                    chapters.push(rel);
                }
            }
        }
    }
    chapters.sort();
    for c in chapters {
        if !listed.contains(&c) {
            errors.push(format!(
                "{c} is not in SUMMARY.md: a chapter the book does not show"
            ));
        }
    }
    errors
}

#[test]
fn every_chapter_is_in_the_summary_and_every_entry_of_it_is_a_chapter() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let book = std::fs::read_to_string(docs.join("book.toml")).expect("docs/book.toml");
    assert!(
        book.lines().any(|l| l.replace(' ', "") == "src=\"src\""),
        "docs/book.toml: the book's source is docs/src"
    );
    let errors = summary_errors(&docs.join("src"));
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
    let listed = links(&read("docs/src/SUMMARY.md")).len();
    assert!(listed > 10, "SUMMARY.md lists {listed} chapters");

    // The check on a made-up book: a chapter left out, an entry that is
    // no file, one listed twice.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("part")).unwrap();
    for f in ["intro.md", "a.md", "part/b.md"] {
        std::fs::write(src.join(f), "# x\n").unwrap();
    }
    std::fs::write(
        src.join("SUMMARY.md"),
        "# Summary\n\n[Intro](intro.md)\n\n- [A](a.md)\n- [Gone](gone.md)\n- [A again](a.md)\n- [Draft]()\n",
    )
    .unwrap();
    assert_eq!(
        summary_errors(src),
        [
            "SUMMARY.md:6: (gone.md) is not a chapter file of the book",
            "SUMMARY.md:7: a.md is listed twice",
            "SUMMARY.md:8: () is not a chapter file of the book",
            "part/b.md is not in SUMMARY.md: a chapter the book does not show",
        ]
    );
}

/// The README is the book's front door: each of its command blocks is a
/// block of the book too, so the reference holds every command the README
/// shows, and the two copies cannot drift apart unnoticed.
#[test]
fn every_command_block_of_the_readme_is_also_in_the_book() {
    use crate::docs_commands::{doc_files, shell_blocks, Block};
    let (shell, _) = shell_blocks(&doc_files());
    let body = |b: &Block| {
        b.body
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let book: Vec<String> = shell
        .iter()
        .filter(|b| b.file.starts_with("docs/src/"))
        .map(body)
        .collect();
    let readme: Vec<&Block> = shell.iter().filter(|b| b.file == "README.md").collect();
    assert!(
        readme.len() >= 2,
        "{} command blocks in the README",
        readme.len()
    );
    for b in readme {
        assert!(
            book.contains(&body(b)),
            "{}: this command block is in no chapter of the book (docs/src/)",
            b.at()
        );
    }
}
