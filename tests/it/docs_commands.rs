//! Every shell block of the README and `docs/` is run, run by a named
//! test, or says why not; every tickfan command line in them parses (issue
//! 26, item 3: a renamed flag breaks the build of the docs, not the
//! newcomer).
//!
//! A shell block is a fenced code block tagged `sh`, `bash`, `shell`,
//! `console` or `zsh`, or an untagged one with a `$ ` prompt line or a
//! line that starts with `tickfan` or `cargo`. Directly above its fence
//! (blank lines between allowed) stands one marker, an HTML comment that
//! Markdown does not show:
//!
//! - `<!-- docs-test: run -->`: [`docs_run`](crate::docs_run) runs it in a
//!   scratch directory on free ports; more marker lines may follow it:
//!   `<!-- docs-test: first: CMD -->` runs CMD before the block (a file or
//!   an engine the text assumes from earlier), `<!-- docs-test: set: SUB
//!   FLAGS -->` appends FLAGS to the block's `tickfan SUB` lines (a later
//!   flag wins: a shorter run with the same flags);
//! - `<!-- docs-test: run-as MODULE::TEST[, …] [— note] -->`: those tests
//!   (which must exist) do what the block does;
//! - `<!-- docs-test: not-run: REASON -->`.
//!
//! Whatever the marker, every tickfan command of every shell block (and of
//! `first:`/`set:`) is parsed by the binary's own clap parser
//! (`tools/cli.rs`, compiled into this test binary as `binary_tools`), so a renamed or
//! removed flag or subcommand fails here, naming the file, the line and
//! clap's error. A word `<NAME>` is a placeholder for a value (see
//! [`PLACEHOLDERS`]).

use std::path::{Path, PathBuf};

use crate::docs_shell::{is_placeholder, logical_lines, split, tickfan_args};

/// What a placeholder word stands for when a line is parsed.
const PLACEHOLDERS: [(&str, &str); 5] = [
    ("<FILE>", "ticks.csv"),
    ("<PATH>", "ticks.csv"),
    ("<DIR>", "logs"),
    ("<ADDR>", "127.0.0.1:9101"),
    ("<ID>", "o-1"),
];

/// A fenced code block of a Markdown file.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// The file, relative to the repository (`README.md`).
    pub file: String,
    /// Line number of the opening fence (from 1).
    pub fence: usize,
    /// The info string's first word (`sh`), or empty.
    pub info: String,
    /// The lines between the fences, with their numbers.
    pub body: Vec<(usize, String)>,
    /// The `docs-test:` directives above the fence, top first, with their
    /// line numbers.
    pub markers: Vec<(usize, String)>,
}

impl Block {
    /// `README.md:97`.
    pub(crate) fn at(&self) -> String {
        format!("{}:{}", self.file, self.fence)
    }

    /// Whether it is a shell block (see the module's doc).
    pub(crate) fn is_shell(&self) -> bool {
        match self.info.as_str() {
            "sh" | "bash" | "shell" | "console" | "zsh" => true,
            "" => self.body.iter().any(|(_, l)| {
                let first = l.split_whitespace().next().unwrap_or("");
                l.starts_with("$ ") || first == "tickfan" || first == "cargo"
            }),
            _ => false,
        }
    }
}

/// What a block's markers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Run it: `first` commands before, `set` flags appended per subcommand.
    Run {
        first: Vec<String>,
        set: Vec<(String, Vec<String>)>,
    },
    /// Those tests run it.
    RunAs(Vec<String>),
    /// Not run, for this reason.
    NotRun(String),
}

/// The text of a marker line, `<!-- docs-test: X -->` → `X`.
fn directive(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("<!-- docs-test:")?
        .strip_suffix("-->")
        .map(str::trim)
}

/// The fenced code blocks of `text` (named `file`) with the markers above
/// each, and the line numbers of marker lines that stand above no block.
pub(crate) fn blocks(file: &str, text: &str) -> (Vec<Block>, Vec<usize>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut markers_seen = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if directive(t).is_some() {
            markers_seen.push(i + 1);
        }
        let fence: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
        let uniform = fence
            .chars()
            .all(|c| c == fence.chars().next().unwrap_or('`'));
        if fence.len() < 3 || !uniform {
            i += 1;
            continue;
        }
        let info = t[fence.len()..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let mut markers = Vec::new();
        let mut k = i;
        while k > 0 {
            k -= 1;
            if lines[k].trim().is_empty() {
                continue;
            }
            match directive(lines[k]) {
                Some(d) => markers.push((k + 1, d.to_string())),
                None => break,
            }
        }
        markers.reverse();
        let mut j = i + 1;
        let mut body = Vec::new();
        while j < lines.len() {
            let c = lines[j].trim();
            if c.starts_with(&fence)
                && c.trim_start_matches(fence.chars().next().unwrap())
                    .is_empty()
            {
                break;
            }
            body.push((j + 1, lines[j].to_string()));
            j += 1;
        }
        out.push(Block {
            file: file.to_string(),
            fence: i + 1,
            info,
            body,
            markers,
        });
        i = j + 1;
    }
    let placed: Vec<usize> = out
        .iter()
        .flat_map(|b| b.markers.iter().map(|(n, _)| *n))
        .collect();
    markers_seen.retain(|n| !placed.contains(n));
    (out, markers_seen)
}

/// The plan of a shell block's markers.
///
/// # Errors
/// No marker, two plans, an unknown directive, an empty reason, a
/// `first:`/`set:` without `run`, a `set:` that matches no line, a
/// `run-as` test that does not exist.
pub(crate) fn plan(b: &Block) -> Result<Plan, String> {
    let mut plans = Vec::new();
    let mut first = Vec::new();
    let mut set = Vec::new();
    for (n, d) in &b.markers {
        let at = format!("{}:{n}", b.file);
        if d == "run" {
            plans.push(Plan::Run {
                first: vec![],
                set: vec![],
            });
        } else if let Some(rest) = d.strip_prefix("run-as ") {
            let names = rest.split(" — ").next().unwrap_or("");
            let names: Vec<String> = names.split(',').map(|s| s.trim().to_string()).collect();
            for name in &names {
                test_exists(name).map_err(|e| format!("{at}: run-as {name}: {e}"))?;
            }
            plans.push(Plan::RunAs(names));
        } else if let Some(reason) = d.strip_prefix("not-run:") {
            if reason.trim().is_empty() {
                return Err(format!("{at}: `not-run:` needs a reason"));
            }
            plans.push(Plan::NotRun(reason.trim().to_string()));
        } else if let Some(cmd) = d.strip_prefix("first:") {
            first.push(cmd.trim().to_string());
        } else if let Some(flags) = d.strip_prefix("set:") {
            let mut words =
                shlex::split(flags).ok_or_else(|| format!("{at}: cannot split `{d}`"))?;
            if words.len() < 2 {
                return Err(format!("{at}: `set:` takes a subcommand and flags"));
            }
            let sub = words.remove(0);
            let used = logical_lines(&b.body).iter().any(|(_, l)| {
                split(l).is_ok_and(|cmds| {
                    cmds.iter()
                        .any(|c| tickfan_args(&c.words).is_some_and(|a| a.first() == Some(&sub)))
                })
            });
            if !used {
                return Err(format!(
                    "{at}: `set: {sub} …` but no line of the block runs `tickfan {sub}`"
                ));
            }
            set.push((sub, words));
        } else {
            return Err(format!(
                "{at}: unknown docs-test directive `{d}` (run, run-as TEST, not-run: REASON, first: CMD, set: SUB FLAGS)"
            ));
        }
    }
    match plans.as_slice() {
        [] => Err(format!(
            "{}: a shell block without a marker: put `<!-- docs-test: run -->`, `<!-- docs-test: run-as MODULE::TEST -->` or `<!-- docs-test: not-run: REASON -->` above it",
            b.at()
        )),
        [Plan::Run { .. }] => Ok(Plan::Run { first, set }),
        [one] if first.is_empty() && set.is_empty() => Ok(one.clone()),
        [_] => Err(format!("{}: `first:` and `set:` go with `run` only", b.at())),
        _ => Err(format!(
            "{}: more than one of run, run-as, not-run",
            b.at()
        )),
    }
}

/// Whether `module::test` is a `#[test]` of the test sources: a module of
/// this binary (`tests/it/MODULE.rs`, declared in `main.rs`) or a test
/// file of its own (`tests/MODULE.rs`).
fn test_exists(name: &str) -> Result<(), String> {
    let (module, test) = name
        .split_once("::")
        .ok_or("write it as MODULE::TEST_NAME")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let read = |p: PathBuf| std::fs::read_to_string(p).ok();
    let src = match read(root.join("it").join(format!("{module}.rs"))) {
        Some(src) => {
            let main = read(root.join("it/main.rs")).unwrap_or_default();
            if !main.lines().any(|l| l.trim() == format!("mod {module};")) {
                return Err(format!("tests/it/main.rs does not declare `mod {module};`"));
            }
            src
        }
        None => read(root.join(format!("{module}.rs")))
            .ok_or(format!("no tests/it/{module}.rs or tests/{module}.rs"))?,
    };
    let lines: Vec<&str> = src.lines().collect();
    let found = lines.iter().enumerate().any(|(i, l)| {
        l.trim_start().starts_with(&format!("fn {test}("))
            && lines[..i]
                .iter()
                .rev()
                .take_while(|a| {
                    let a = a.trim_start();
                    a.starts_with("#[") || a.starts_with("//")
                })
                .any(|a| a.trim() == "#[test]")
    });
    if found {
        Ok(())
    } else {
        Err(format!("no #[test] fn {test} in that file"))
    }
}

/// `tickfan` + `args` through the binary's parser: `Ok` for a command it
/// takes (or for `--help`/`--version`), else clap's error, as printed.
pub(crate) fn parse(args: &[String]) -> Result<(), String> {
    use clap::error::ErrorKind as K;
    use clap::FromArgMatches;
    let all = std::iter::once("tickfan".to_string()).chain(args.iter().cloned());
    match crate::binary_tools::cli::command()
        .try_get_matches_from(all)
        .and_then(|m| crate::binary_tools::cli::Cli::from_arg_matches(&m))
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), K::DisplayHelp | K::DisplayVersion) => Ok(()),
        Err(e) => Err(e.render().to_string().trim_end().to_string()),
    }
}

/// Placeholders replaced by their values; an unknown `<NAME>` is an error.
fn fill_placeholders(args: &[String]) -> Result<Vec<String>, String> {
    args.iter()
        .map(|a| {
            if !is_placeholder(a) {
                return Ok(a.clone());
            }
            PLACEHOLDERS
                .iter()
                .find(|(p, _)| p == a)
                .map(|(_, v)| v.to_string())
                .ok_or(format!(
                    "unknown placeholder {a} (known: {:?})",
                    PLACEHOLDERS.map(|(p, _)| p)
                ))
        })
        .collect()
}

/// Parses every tickfan command of a shell block (and of its `first:` and
/// `set:` markers); returns how many it parsed, or one error per bad line:
/// `FILE:LINE: \`the line\`: clap's error`.
pub(crate) fn check_block(b: &Block) -> (usize, Vec<String>) {
    let (mut parsed, mut errors) = (0, Vec::new());
    let set = match plan(b) {
        Ok(Plan::Run { set, first }) => {
            for cmd in &first {
                let n = b.markers.iter().find(|(_, d)| d.contains(cmd.as_str()));
                let line = n.map_or(b.fence, |(n, _)| *n);
                let (p, e) = check_line(&b.file, line, cmd, &[]);
                parsed += p;
                errors.extend(e);
            }
            set
        }
        _ => vec![],
    };
    for (n, line) in logical_lines(&b.body) {
        let (p, e) = check_line(&b.file, n, &line, &set);
        parsed += p;
        errors.extend(e);
    }
    (parsed, errors)
}

/// One logical line: each of its tickfan commands parsed as written and,
/// when a `set:` applies to it, with those flags appended.
fn check_line(
    file: &str,
    n: usize,
    line: &str,
    set: &[(String, Vec<String>)],
) -> (usize, Vec<String>) {
    let cmds = match split(line) {
        Ok(c) => c,
        Err(e) => return (0, vec![format!("{file}:{n}: `{line}`: {e}")]),
    };
    let (mut parsed, mut errors) = (0, Vec::new());
    for args in cmds.iter().filter_map(|c| tickfan_args(&c.words)) {
        let mut variants = vec![args.clone()];
        for (_, flags) in set.iter().filter(|(s, _)| args.first() == Some(s)) {
            let mut more = args.clone();
            more.extend(flags.iter().cloned());
            variants.push(more);
        }
        for v in variants {
            parsed += 1;
            if let Err(e) = fill_placeholders(&v).and_then(|v| parse(&v)) {
                errors.push(format!("{file}:{n}: `tickfan {}`: {e}", v.join(" ")));
            }
        }
    }
    (parsed, errors)
}

/// README.md and every `docs/**/*.md` (the book's chapters in `docs/src/`),
/// as `(relative path, text)`, README.md first; not the built book
/// (`docs/book/`, generated by `mdbook build docs`).
pub(crate) fn doc_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut todo = vec![root.join("docs")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let p = entry.expect("a directory entry").path();
            if p == root.join("docs/book") {
                continue;
            }
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a readable doc");
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            (rel, text)
        })
        .collect()
}

/// Every shell block of the docs, and every marker error of `files`.
pub(crate) fn shell_blocks(files: &[(String, String)]) -> (Vec<Block>, Vec<String>) {
    let (mut shell, mut errors) = (Vec::new(), Vec::new());
    for (file, text) in files {
        let (all, stray) = blocks(file, text);
        for n in stray {
            errors.push(format!(
                "{file}:{n}: a docs-test marker that stands above no code block"
            ));
        }
        for b in all {
            if b.is_shell() {
                shell.push(b);
            } else if let Some((n, _)) = b.markers.first() {
                errors.push(format!(
                    "{}:{n}: a docs-test marker above a `{}` block, which is not a shell block",
                    b.file, b.info
                ));
            }
        }
    }
    (shell, errors)
}

#[test]
fn every_shell_block_in_the_docs_is_run_run_as_or_says_why_not() {
    let (shell, mut errors) = shell_blocks(&doc_files());
    let (mut run, mut run_as, mut not_run) = (0, 0, 0);
    for b in &shell {
        match plan(b) {
            Ok(Plan::Run { .. }) => run += 1,
            Ok(Plan::RunAs(_)) => run_as += 1,
            Ok(Plan::NotRun(_)) => not_run += 1,
            Err(e) => errors.push(e),
        }
    }
    eprintln!(
        "{} shell blocks: {run} run, {run_as} run-as, {not_run} not-run",
        shell.len()
    );
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n"));
    assert!(
        run > 0 && run_as > 0 && not_run > 0,
        "the scan found {run} run, {run_as} run-as, {not_run} not-run blocks: is it reading the docs?"
    );
}

#[test]
fn every_tickfan_command_in_the_docs_parses_with_the_binary_s_own_parser() {
    let (shell, _) = shell_blocks(&doc_files());
    let (mut parsed, mut errors) = (0, Vec::new());
    for b in &shell {
        let (p, e) = check_block(b);
        parsed += p;
        errors.extend(e);
    }
    assert!(errors.is_empty(), "\n{}\n", errors.join("\n\n"));
    assert!(
        parsed >= 10,
        "only {parsed} tickfan commands found in the docs"
    );
}

/// The doc file holding a line that starts with `prefix`, and the line's
/// number: README.md first, then the book's chapters.
fn doc_with_line(prefix: &str) -> (String, String, usize) {
    doc_files()
        .into_iter()
        .find_map(|(file, text)| {
            let n = text.lines().position(|l| l.starts_with(prefix))? + 1;
            Some((file, text, n))
        })
        .unwrap_or_else(|| panic!("no doc has a line starting `{prefix}`"))
}

/// The README's tour (the block "Running the engine by hand" of the book)
/// and the order path's "Try it" block, with one flag or subcommand
/// renamed in a copy: the check names the file, the line and clap's words
/// (with its tip); the copies unchanged pass.
#[test]
fn a_renamed_flag_or_subcommand_in_a_copy_of_the_readme_fails_naming_file_line_and_clap_s_error() {
    let errors = |file: &str, text: &str| -> Vec<String> {
        let (shell, _) = shell_blocks(&[(file.into(), text.into())]);
        shell.iter().flat_map(|b| check_block(b).1).collect()
    };
    let (file, readme, line) = doc_with_line("cargo run --release -- serve --log-dir logs");
    assert_eq!(file, "README.md", "the README's first serve line");
    assert_eq!(errors(&file, &readme), Vec::<String>::new());

    let renamed = readme.replacen("serve --log-dir logs", "serve --logs-dir logs", 1);
    let got = errors(&file, &renamed);
    assert_eq!(got.len(), 1, "{got:#?}");
    let want = format!("README.md:{line}: `tickfan serve --logs-dir logs`: error: unexpected argument '--logs-dir' found");
    assert!(got[0].starts_with(&want), "{}\nwant: {want}", got[0]);
    assert!(
        got[0].contains("tip: a similar argument exists: '--log-dir'"),
        "{}",
        got[0]
    );

    let renamed = readme.replacen("-- gen --symbols", "-- generate --symbols", 1);
    let got = errors(&file, &renamed);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(&format!("README.md:{}:", line + 2))
            && got[0].contains("error: unrecognized subcommand 'generate'"),
        "{}",
        got[0]
    );

    // A flag on the continuation of a line: named by the line's first line.
    let (file, chapter, serve) = doc_with_line("cargo run --release -- serve --bridge 'name=lp1");
    assert_eq!(
        file, "docs/src/order-path.md",
        "the serve line with two bridges"
    );
    assert_eq!(errors(&file, &chapter), Vec::<String>::new());
    let renamed = chapter.replacen("    --bridge 'name=lp2", "    --bridges 'name=lp2", 1);
    let got = errors(&file, &renamed);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(&format!("{file}:{serve}: `tickfan serve --bridge"))
            && got[0].contains("error: unexpected argument '--bridges' found"),
        "{}",
        got[0]
    );

    // A value clap refuses: the line as written and with its marker's
    // `set:` flags appended both fail.
    let renamed = chapter.replacen(
        "--rate 2000 --connections 4",
        "--rate fast --connections 4",
        1,
    );
    let got = errors(&file, &renamed);
    assert_eq!(got.len(), 2, "{got:#?}");
    for e in &got {
        assert!(
            e.starts_with(&format!("{file}:{}:", serve + 2))
                && e.contains("invalid value 'fast' for '--rate <PER_SEC>'"),
            "{e}"
        );
    }
}

/// Markers checked on a made-up document: each mistake named by file and line.
#[test]
fn a_missing_wrong_or_misplaced_marker_is_named_by_file_and_line() {
    let check = |text: &str| -> Vec<String> {
        let (shell, mut errors) = shell_blocks(&[("x.md".into(), text.into())]);
        errors.extend(shell.iter().filter_map(|b| plan(b).err()));
        errors
    };
    let ok = "<!-- docs-test: run -->\n<!-- docs-test: set: gen --duration 1s -->\n```sh\ntickfan gen -o t.csv\n```\n\n<!-- docs-test: run-as one_host::the_one_host_example_runs_as_written_in_one_working_directory — as written -->\n\n```console\n$ tickfan serve\n```\n<!-- docs-test: not-run: needs root -->\n```bash\nsudo true\n```\n```python\nimport tickfan\n```\n";
    assert_eq!(check(ok), Vec::<String>::new());
    let cases = [
        ("text\n```sh\ntickfan serve\n```\n", "x.md:2: a shell block without a marker"),
        ("```\n$ nc 127.0.0.1 9103\n```\n", "x.md:1: a shell block without a marker"),
        ("<!-- docs-test: run-as one_host::no_such_test -->\n```sh\ntickfan serve\n```\n", "x.md:1: run-as one_host::no_such_test: no #[test] fn no_such_test"),
        ("<!-- docs-test: run-as nowhere::a_test -->\n```sh\ntickfan serve\n```\n", "x.md:1: run-as nowhere::a_test: no tests/it/nowhere.rs"),
        ("<!-- docs-test: not-run: -->\n```sh\ntickfan serve\n```\n", "x.md:1: `not-run:` needs a reason"),
        ("<!-- docs-test: run -->\n<!-- docs-test: not-run: x -->\n```sh\ntickfan serve\n```\n", "x.md:3: more than one of run"),
        ("<!-- docs-test: runn -->\n```sh\ntickfan serve\n```\n", "x.md:1: unknown docs-test directive `runn`"),
        ("<!-- docs-test: run -->\n<!-- docs-test: set: gen --duration 1s -->\n```sh\ntickfan serve\n```\n", "x.md:2: `set: gen …` but no line"),
        ("<!-- docs-test: not-run: x -->\nsome text\n```sh\ntickfan serve\n```\n", "x.md:1: a docs-test marker that stands above no code block"),
        ("<!-- docs-test: run -->\n```python\nprint()\n```\n", "x.md:1: a docs-test marker above a `python` block"),
    ];
    for (text, want) in cases {
        let got = check(text);
        assert!(
            got.iter().any(|e| e.starts_with(want)),
            "for:\n{text}\nwant an error starting {want:?}, got {got:#?}"
        );
    }
}

#[test]
fn placeholders_are_filled_and_an_unknown_one_is_an_error() {
    let b = |line: &str| Block {
        file: "x.md".into(),
        fence: 1,
        info: "sh".into(),
        body: vec![(2, line.into())],
        markers: vec![(0, "not-run: x".into())],
    };
    assert_eq!(
        check_block(&b("tickfan replay <FILE> --to <ADDR>")),
        (1, vec![])
    );
    let (_, errors) = check_block(&b("tickfan replay <TICKS>"));
    assert!(
        errors[0].contains("unknown placeholder <TICKS>"),
        "{errors:?}"
    );
}

#[test]
fn every_run_block_runs_in_a_scratch_directory_on_free_ports() {
    let (shell, _) = shell_blocks(&doc_files());
    let mut ran = 0;
    let mut failures = Vec::new();
    for b in &shell {
        let Ok(Plan::Run { first, set }) = plan(b) else {
            continue;
        };
        ran += 1;
        eprintln!("running {}", b.at());
        match crate::docs_run::run_block(b, &first, &set) {
            Ok(notes) => notes.iter().for_each(|n| eprintln!("  {n}")),
            Err(e) => failures.push(e),
        }
    }
    assert!(ran > 0, "no block is marked run");
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}
