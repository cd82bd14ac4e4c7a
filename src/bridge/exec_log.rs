//! The simulated venue's own execution record: which order ids it executed
//! and the fills it answered, so a re-sent id (any attempt, any fencing
//! token, after a restart too) gets the first execution's fills and is
//! never executed twice.
//!
//! ```text
//!  execute(id) ─▶ lock ─▶ id known? ── yes ─▶ the recorded fills (no new execution)
//!                              └─ no ─▶ decide ─▶ executed? ─▶ append the line to exec_log
//!                                                             (written before the answer) ─▶ answer
//! ```
//!
//! File (`exec_log=PATH`, optional): one line per executed id,
//! `ID<TAB>FILL,FILL,…` with `FILL` = `fill_no:cum_lots:cum_amount:price`
//! in the order the fills were delivered (empty after the tab when nothing
//! was filled). Each line is written with one `write` call on an unbuffered
//! append-mode file before the venue answers, so it survives `kill -9` of
//! the engine (it lives in the OS page cache); it is not fsynced, so a power
//! loss may lose the newest lines. At open the file is read line by line; a
//! torn last line (no newline: a crash mid-write) is cut off, any other bad
//! line is an error naming its line number.
//!
//! Bound: the newest [`MEMORY_IDS`] ids are kept in memory (with their
//! fills, at most `fills` of them per id as the spec says); past it the
//! oldest id is forgotten, and a re-send of a forgotten id would execute
//! again: the bound is far above the engine's dedup capacity's working set
//! for the tests and demos this simulator serves. The file itself is not
//! rotated (an operator's concern, as a real venue's record would be).
//! Invariant: an id is in memory at most once and has at most one line per
//! process lifetime while it is remembered.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Outcome, VenueFill};
use crate::logging::repeat::error_repeating;
use crate::model::units::{Amount, Lots, Price};
use crate::model::warning::WarnKind;

/// Most order ids one venue remembers (oldest forgotten first).
pub const MEMORY_IDS: usize = 1_000_000;

/// What the venue executed, in memory, optionally backed by a file.
#[derive(Debug)]
pub(crate) struct ExecRecord {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    by_id: HashMap<Box<str>, Vec<VenueFill>>,
    order: VecDeque<Box<str>>,
    file: Option<(File, PathBuf)>,
    cap: usize,
}

impl Inner {
    fn remember(&mut self, id: &str, fills: Vec<VenueFill>) {
        if self.by_id.contains_key(id) {
            return;
        }
        if self.order.len() >= self.cap {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
        self.order.push_back(id.into());
        self.by_id.insert(id.into(), fills);
    }
}

fn bad(path: &Path, line: usize, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("exec_log {}: line {line}: {what}", path.display()),
    )
}

/// One line of the file, without its newline.
fn format_line(id: &str, fills: &[VenueFill]) -> String {
    let mut s = format!("{id}\t");
    for (i, f) in fills.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{}:{}:{}:{}",
            f.fill_no, f.cum_lots.0, f.cum_amount.0, f.price.0
        ));
    }
    s
}

fn parse_line(line: &str) -> Option<(&str, Vec<VenueFill>)> {
    let (id, rest) = line.split_once('\t')?;
    if id.is_empty() {
        return None;
    }
    let mut fills = Vec::new();
    for f in rest.split(',').filter(|f| !f.is_empty()) {
        let mut p = f.split(':').map(str::parse::<u64>);
        let mut next = || p.next()?.ok();
        let fill = VenueFill {
            fill_no: u32::try_from(next()?).ok()?,
            cum_lots: Lots(next()?),
            cum_amount: Amount(next()?),
            price: Price(next()?),
        };
        fills.push(fill);
    }
    Some((id, fills))
}

/// Reads an execution record file: every `(id, fills)` line in file order
/// (a torn last line is left out). For tests and operators checking that
/// the venue executed an id at most once.
///
/// # Errors
/// The file cannot be read, or a complete line does not parse.
pub fn read(path: &Path) -> io::Result<Vec<(String, Vec<VenueFill>)>> {
    let mut out = Vec::new();
    let mut r = BufReader::new(File::open(path)?);
    let mut buf = String::new();
    let mut n = 0;
    loop {
        buf.clear();
        if r.read_line(&mut buf)? == 0 || !buf.ends_with('\n') {
            return Ok(out);
        }
        n += 1;
        let (id, fills) =
            parse_line(buf.trim_end_matches('\n')).ok_or_else(|| bad(path, n, "not ID\\tFILLS"))?;
        out.push((id.to_string(), fills));
    }
}

impl ExecRecord {
    /// A record in memory only, remembering at most `cap` ids.
    pub(crate) fn in_memory(cap: usize) -> Self {
        ExecRecord {
            inner: Mutex::new(Inner {
                by_id: HashMap::new(),
                order: VecDeque::new(),
                file: None,
                cap: cap.max(1),
            }),
        }
    }

    /// A record backed by `path` (created when missing): reads what it
    /// holds, cuts a torn last line off, then appends.
    ///
    /// # Errors
    /// The file cannot be opened, read or cut, or holds a bad line.
    pub(crate) fn open(path: &Path, cap: usize) -> io::Result<Self> {
        let name =
            |e: io::Error| io::Error::new(e.kind(), format!("exec_log {}: {e}", path.display()));
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(name)?;
        let rec = ExecRecord::in_memory(cap);
        let mut good_len = 0u64;
        {
            let mut inner = rec.inner.lock().unwrap_or_else(|p| p.into_inner());
            file.seek(SeekFrom::Start(0)).map_err(name)?;
            let mut r = BufReader::new(&mut file);
            let mut buf = String::new();
            let mut n = 0;
            loop {
                buf.clear();
                let len = r.read_line(&mut buf).map_err(name)?;
                if len == 0 || !buf.ends_with('\n') {
                    break;
                }
                n += 1;
                let (id, fills) = parse_line(buf.trim_end_matches('\n'))
                    .ok_or_else(|| bad(path, n, "not ID\\tFILLS"))?;
                inner.remember(id, fills);
                good_len += len as u64;
            }
        }
        if file.metadata().map_err(name)?.len() != good_len {
            log::warn!(
                "exec_log {}: torn last line cut off (a crash while it was written)",
                path.display()
            );
            file.set_len(good_len).map_err(name)?;
        }
        rec.inner.lock().unwrap_or_else(|p| p.into_inner()).file = Some((file, path.into()));
        Ok(rec)
    }

    /// The answer for `id`: the recorded fills when it was executed before,
    /// else `decide()`; an `Executed` answer is recorded (and its line
    /// written) before it is returned. Transient and permanent answers are
    /// not executions and are not recorded.
    pub(crate) fn once(&self, id: &str, decide: impl FnOnce() -> Outcome) -> Outcome {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fills) = inner.by_id.get(id) {
            return Outcome::Executed(fills.clone());
        }
        let outcome = decide();
        if let Outcome::Executed(fills) = &outcome {
            if let Some((file, path)) = &mut inner.file {
                let mut line = format_line(id, fills);
                line.push('\n');
                if let Err(e) = file.write_all(line.as_bytes()) {
                    // Not recorded, so not executed: the engine retries it.
                    error_repeating!(
                        WarnKind::ExecLogFailed,
                        "exec_log {}: {e}: attempt answered transient",
                        path.display()
                    );
                    return Outcome::Transient("exec_log_write".into());
                }
            }
            inner.remember(id, fills.clone());
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(n: u32) -> VenueFill {
        VenueFill {
            fill_no: n,
            cum_lots: Lots(u64::from(n) * 10),
            cum_amount: Amount(u64::from(n) * 1_000),
            price: Price(100 + u64::from(n)),
        }
    }

    #[test]
    fn an_id_executes_once_and_answers_the_same_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec.log");
        let rec = ExecRecord::open(&path, 10).unwrap();
        let first = rec.once("a", || Outcome::Executed(vec![fill(2), fill(1)]));
        let again = rec.once("a", || panic!("executed twice"));
        assert_eq!(first, again);
        assert_eq!(
            rec.once("b", || Outcome::Transient("x".into())),
            Outcome::Transient("x".into())
        );
        assert_eq!(
            rec.once("b", || Outcome::Executed(vec![])),
            Outcome::Executed(vec![])
        );
        drop(rec);
        let rec = ExecRecord::open(&path, 10).unwrap();
        assert_eq!(rec.once("a", || panic!("executed after restart")), first);
        assert_eq!(rec.once("b", || panic!()), Outcome::Executed(vec![]));
        let lines = read(&path).unwrap();
        assert_eq!(
            lines,
            vec![("a".into(), vec![fill(2), fill(1)]), ("b".into(), vec![])]
        );
    }

    #[test]
    fn a_torn_last_line_is_cut_and_a_bad_line_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec.log");
        std::fs::write(&path, "a\t1:10:1000:101\nb\t1:1").unwrap();
        let rec = ExecRecord::open(&path, 10).unwrap();
        assert_eq!(
            rec.once("b", || Outcome::Executed(vec![fill(1)])),
            Outcome::Executed(vec![fill(1)])
        );
        drop(rec);
        assert_eq!(read(&path).unwrap().len(), 2, "the torn line is gone");
        std::fs::write(&path, "a\t1:x\n").unwrap();
        let e = ExecRecord::open(&path, 10).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn memory_is_bounded_oldest_forgotten() {
        let rec = ExecRecord::in_memory(2);
        for id in ["a", "b", "c"] {
            rec.once(id, || Outcome::Executed(vec![fill(1)]));
        }
        let inner = rec.inner.lock().unwrap();
        assert_eq!(inner.by_id.len(), 2);
        assert!(!inner.by_id.contains_key("a"));
    }
}
