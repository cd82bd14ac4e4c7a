//! The shell lines of the docs' code blocks, as far as the docs test needs
//! them: logical lines (a trailing `\` continues a line; in a transcript
//! only the `$ ` lines are commands), comments dropped, each line cut at the
//! operators `;` `&&` `||` `|` `&` outside quotes into simple commands,
//! whose words are split as a POSIX shell splits them (the `shlex` crate),
//! with redirections and leading `NAME=value` assignments set aside; and a
//! command that runs tickfan (`tickfan …`, `cargo run … -- …`,
//! `target/release/tickfan …`) recognised with its arguments.

/// An operator after a simple command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `;`
    Then,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `|`
    Pipe,
    /// `&`
    Background,
}

impl Op {
    /// As written in a shell line.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::Then => ";",
            Op::And => "&&",
            Op::Or => "||",
            Op::Pipe => "|",
            Op::Background => "&",
        }
    }
}

/// One simple command of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Simple {
    /// As written (trimmed), quotes, redirections and a subshell's
    /// parenthesis included: what the runner hands to `bash`.
    pub text: String,
    /// Its words after shell splitting: the program first, no
    /// redirection, no `NAME=value` before the program.
    pub words: Vec<String>,
    /// The operator after it, if any.
    pub op: Option<Op>,
}

/// The logical lines of a block's body (`(line number, text)` of each
/// physical line): a line ending in `\` goes on on the next one; blank
/// lines and comment lines are skipped. In a transcript (`console`, or
/// lines that start with a `$ ` prompt), only the prompt lines are
/// commands, the rest is output. Each comes with the number of its first
/// physical line.
pub(crate) fn logical_lines(body: &[(usize, String)]) -> Vec<(usize, String)> {
    let transcript = body.iter().any(|(_, l)| l.starts_with("$ "));
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in body {
        let line = match (&open, transcript) {
            (Some(_), _) => line.as_str(),
            (None, false) => line.as_str(),
            (None, true) => match line.strip_prefix("$ ") {
                Some(command) => command,
                None => continue, // output
            },
        };
        let (text, continues) = match line.trim_end().strip_suffix('\\') {
            Some(head) => (head, true),
            None => (line.trim_end(), false),
        };
        let (first, mut joined) = open.take().unwrap_or((*n, String::new()));
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(text.trim());
        if continues {
            open = Some((first, joined));
        } else if !joined.is_empty() && !joined.starts_with('#') {
            out.push((first, joined));
        }
    }
    if let Some((first, joined)) = open {
        out.push((first, joined));
    }
    out
}

/// Cuts one logical line into simple commands at the operators outside
/// quotes; a `#` that starts a word ends the line (a comment).
///
/// # Errors
/// An unbalanced quote, or an operator with no command before it.
pub(crate) fn split(line: &str) -> Result<Vec<Simple>, String> {
    let chars: Vec<char> = line.chars().collect();
    let mut cmds = Vec::new();
    let mut cur = String::new();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    let end = |cur: &mut String, op: Option<Op>, cmds: &mut Vec<Simple>| -> Result<(), String> {
        let text = cur.trim().to_string();
        cur.clear();
        if text.is_empty() {
            return match op {
                Some(op) => Err(format!("`{}` with no command before it", op.as_str())),
                None => Ok(()),
            };
        }
        cmds.push(Simple {
            words: words(&text)?,
            text,
            op,
        });
        Ok(())
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev = if i == 0 { None } else { Some(chars[i - 1]) };
        if single {
            single = c != '\'';
            cur.push(c);
        } else if double {
            cur.push(c);
            if c == '\\' {
                if let Some(n) = next {
                    cur.push(n);
                    i += 1;
                }
            } else {
                double = c != '"';
            }
        } else {
            match c {
                '\\' => {
                    cur.push(c);
                    if let Some(n) = next {
                        cur.push(n);
                        i += 1;
                    }
                }
                '\'' => {
                    single = true;
                    cur.push(c);
                }
                '"' => {
                    double = true;
                    cur.push(c);
                }
                '#' if prev.is_none_or(|p| p.is_whitespace() || ";&|(".contains(p)) => break,
                ';' => end(&mut cur, Some(Op::Then), &mut cmds)?,
                '|' if next == Some('|') => {
                    end(&mut cur, Some(Op::Or), &mut cmds)?;
                    i += 1;
                }
                '|' => end(&mut cur, Some(Op::Pipe), &mut cmds)?,
                // `2>&1`, `<&0`: part of a redirection.
                '&' if matches!(prev, Some('>' | '<')) => cur.push(c),
                '&' if next == Some('&') => {
                    end(&mut cur, Some(Op::And), &mut cmds)?;
                    i += 1;
                }
                '&' => end(&mut cur, Some(Op::Background), &mut cmds)?,
                _ => cur.push(c),
            }
        }
        i += 1;
    }
    if single || double {
        return Err("an unbalanced quote".into());
    }
    end(&mut cur, None, &mut cmds)?;
    Ok(cmds)
}

/// The words of one simple command: a subshell's parentheses, its
/// redirections (`> f`, `2>/dev/null`, `2>&1`) and the `NAME=value`
/// assignments before the program set aside.
fn words(text: &str) -> Result<Vec<String>, String> {
    let inner = text.trim_start_matches('(').trim_end_matches(')');
    let all = shlex::split(inner).ok_or_else(|| format!("cannot split `{text}` into words"))?;
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in all {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let op = w.trim_start_matches(|c: char| c.is_ascii_digit());
        if is_placeholder(&w) {
            out.push(w);
            continue;
        }
        if op.starts_with(['<', '>']) || op.starts_with("&>") {
            // `>` alone takes the next word as its file.
            skip_next = op.trim_start_matches(['<', '>', '&']).is_empty();
            continue;
        }
        out.push(w);
    }
    let assignments = out
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .count();
    Ok(out.split_off(assignments))
}

/// Whether a word is a placeholder the docs write for a value, `<FILE>`
/// (not a redirection from `FILE>`).
pub(crate) fn is_placeholder(w: &str) -> bool {
    w.len() > 2
        && w.starts_with('<')
        && w.ends_with('>')
        && w[1..w.len() - 1]
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_')
}

/// The arguments of a command that runs tickfan (after the program name),
/// or `None`: `tickfan …`, `…/tickfan …` (`target/release/tickfan`,
/// `/usr/local/bin/tickfan`) and `cargo run [cargo flags] -- …` (no `--`:
/// no arguments), not a `cargo run` of another binary or an example.
pub(crate) fn tickfan_args(words: &[String]) -> Option<Vec<String>> {
    let first = words.first()?;
    if first == "tickfan" || first.ends_with("/tickfan") {
        return Some(words[1..].to_vec());
    }
    if first != "cargo" || words.get(1).map(String::as_str) != Some("run") {
        return None;
    }
    let dashes = words.iter().position(|w| w == "--").unwrap_or(words.len());
    let cargo_flags = &words[2..dashes];
    let other = cargo_flags.iter().enumerate().any(|(i, w)| {
        w == "--example"
            || w.starts_with("--example=")
            || (w == "--bin" && cargo_flags.get(i + 1).is_some_and(|b| b != "tickfan"))
            || (w.starts_with("--bin=") && w != "--bin=tickfan")
    });
    if other {
        return None;
    }
    Some(words.get(dashes + 1..).unwrap_or_default().to_vec())
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn the_splitter_cuts_at_operators_outside_quotes_and_drops_comments() {
    let cmds = split(
        r#"printf 'A|B; C\n' | nc -q1 127.0.0.1 9103 && echo "x # y" ; true & # a | comment"#,
    )
    .unwrap();
    let seen: Vec<(Vec<String>, Option<Op>)> = cmds.into_iter().map(|c| (c.words, c.op)).collect();
    assert_eq!(
        seen,
        [
            (strings(&["printf", "A|B; C\\n"]), Some(Op::Pipe)),
            (strings(&["nc", "-q1", "127.0.0.1", "9103"]), Some(Op::And)),
            (strings(&["echo", "x # y"]), Some(Op::Then)),
            (strings(&["true"]), Some(Op::Background)),
        ]
    );
    // A subshell, a redirection, `2>&1`, an assignment before the program.
    let cmds = split("(umask 077; head -c 24 /dev/urandom | base64 > tickfan.token)").unwrap();
    assert_eq!(cmds.len(), 3);
    assert_eq!(cmds[0].words, strings(&["umask", "077"]));
    assert_eq!(cmds[2].words, strings(&["base64"]));
    assert_eq!(cmds[2].text, "base64 > tickfan.token)");
    let cmds = split("RUST_LOG=debug tickfan serve 2>&1 >log.txt --quiet").unwrap();
    assert_eq!(cmds[0].words, strings(&["tickfan", "serve", "--quiet"]));
    assert!(split("tickfan serve 'unclosed").is_err());
    assert!(split("| tickfan serve").is_err());
}

#[test]
fn logical_lines_join_continuations_and_read_only_the_prompts_of_a_transcript() {
    let body = |lines: &[&str]| -> Vec<(usize, String)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 10, l.to_string()))
            .collect()
    };
    assert_eq!(
        logical_lines(&body(&[
            "# a comment line",
            "tickfan serve --bridge 'a' \\",
            "    --bridge 'b'",
            "",
            "tickfan orders",
        ])),
        [
            (11, "tickfan serve --bridge 'a' --bridge 'b'".to_string()),
            (14, "tickfan orders".to_string())
        ]
    );
    assert_eq!(
        logical_lines(&body(&[
            "$ nc 127.0.0.1 9103",
            "NEW o-1 EURUSD BUY 1",
            "ACK o-1"
        ])),
        [(10, "nc 127.0.0.1 9103".to_string())]
    );
}

#[test]
fn tickfan_is_recognised_as_written_cargo_run_or_a_path() {
    let args = |line: &str| tickfan_args(&split(line).unwrap()[0].words);
    let serve = Some(strings(&["serve", "--log-dir", "logs"]));
    assert_eq!(args("tickfan serve --log-dir logs"), serve);
    assert_eq!(args("cargo run --release -- serve --log-dir logs"), serve);
    assert_eq!(args("./target/release/tickfan serve --log-dir logs"), serve);
    assert_eq!(args("cargo run --release"), Some(vec![]));
    assert_eq!(args("cargo run --example journal_gen -- x"), None);
    assert_eq!(args("cargo run --bin other -- x"), None);
    assert_eq!(args("cargo install cargo-fuzz"), None);
    assert_eq!(
        args("install -m 0755 target/release/tickfan /usr/local/bin/tickfan"),
        None
    );
}
