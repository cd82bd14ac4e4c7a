//! Subjects on the backbone: `<prefix>.md.<symbol>` carries a symbol's
//! conflated updates, `<prefix>.snap.<symbol>` its snapshot requests.
//!
//! A symbol is one subject token. Symbols are printable ASCII without a
//! comma, so they may hold the bytes NATS gives a meaning to (`.` splits
//! tokens, `*` and `>` are wildcards); those and `%` are escaped as `%2E`,
//! `%2A`, `%3E`, `%25`. Every other symbol is its own token, unchanged, so
//! `nats sub 'tickfan.md.EURUSD'` works as one expects.
//!
//! A Redis glob has no NATS equivalent below a token, so a pattern with a
//! glob character maps to the closest NATS wildcard, `<prefix>.md.*` (one
//! token: every symbol), and the edge filters locally with the glob itself
//! ([`crate::protocol::glob::glob_match`]). A pattern without one is a
//! channel in disguise and maps to its own subject.

/// The subject of `symbol`'s updates.
pub(crate) fn md_subject(prefix: &str, symbol: &[u8]) -> String {
    subject(prefix, "md", symbol)
}

/// The subject of `symbol`'s snapshot requests.
pub(crate) fn snap_subject(prefix: &str, symbol: &[u8]) -> String {
    subject(prefix, "snap", symbol)
}

/// The wildcard every ingest answers snapshot requests on.
pub(crate) fn snap_wildcard(prefix: &str) -> String {
    format!("{prefix}.snap.*")
}

/// The NATS subject a client's interest maps to: a channel's own subject,
/// or for a glob the one-token wildcard (filtered locally).
pub(crate) fn interest_subject(prefix: &str, name: &[u8], pattern: bool) -> String {
    if pattern && has_glob(name) {
        format!("{prefix}.md.*")
    } else {
        md_subject(prefix, &unglob(name, pattern))
    }
}

/// True when `p` holds a Redis glob character.
fn has_glob(p: &[u8]) -> bool {
    p.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// A glob-free pattern's literal (its `\` escapes removed).
fn unglob(name: &[u8], pattern: bool) -> Vec<u8> {
    if !pattern {
        return name.to_vec();
    }
    let mut out = Vec::with_capacity(name.len());
    let mut it = name.iter();
    while let Some(&b) = it.next() {
        if b == b'\\' {
            if let Some(&n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(b);
        }
    }
    out
}

fn subject(prefix: &str, kind: &str, symbol: &[u8]) -> String {
    let mut s = String::with_capacity(prefix.len() + kind.len() + symbol.len() + 8);
    s.push_str(prefix);
    s.push('.');
    s.push_str(kind);
    s.push('.');
    for &b in symbol {
        match b {
            b'.' => s.push_str("%2E"),
            b'*' => s.push_str("%2A"),
            b'>' => s.push_str("%3E"),
            b'%' => s.push_str("%25"),
            _ => s.push(b as char),
        }
    }
    s
}

/// The symbol of a subject `<prefix>.<kind>.<token>`, unescaped, or `None`
/// when the subject is not one of ours or its escapes are bad.
pub(crate) fn symbol_of(prefix: &str, kind: &str, subject: &str) -> Option<Vec<u8>> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix('.')?;
    let token = rest.strip_prefix(kind)?.strip_prefix('.')?;
    if token.is_empty() || token.contains('.') {
        return None;
    }
    let b = token.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            let v = u8::from_str_radix(hex, 16).ok()?;
            if !matches!(v, b'.' | b'*' | b'>' | b'%') {
                return None;
            }
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_one_token_and_round_trip() {
        assert_eq!(md_subject("tickfan", b"EURUSD"), "tickfan.md.EURUSD");
        assert_eq!(snap_subject("p.q", b"BRK.A"), "p.q.snap.BRK%2EA");
        for sym in [&b"EURUSD"[..], b"BRK.A", b"a*b>c%d", b"%2E"] {
            let s = md_subject("x.y", sym);
            assert_eq!(s.matches('.').count(), 3, "{s}");
            assert_eq!(symbol_of("x.y", "md", &s).as_deref(), Some(sym));
        }
    }

    #[test]
    fn foreign_or_badly_escaped_subjects_name_no_symbol() {
        assert_eq!(symbol_of("tickfan", "md", "other.md.X"), None);
        assert_eq!(symbol_of("tickfan", "md", "tickfan.snap.X"), None);
        assert_eq!(symbol_of("tickfan", "md", "tickfan.md.a.b"), None);
        assert_eq!(symbol_of("tickfan", "md", "tickfan.md."), None);
        assert_eq!(symbol_of("tickfan", "md", "tickfan.md.%4"), None);
        assert_eq!(symbol_of("tickfan", "md", "tickfan.md.%41"), None);
    }

    #[test]
    fn a_glob_maps_to_the_one_token_wildcard_a_literal_to_its_subject() {
        assert_eq!(interest_subject("t", b"EUR*", true), "t.md.*");
        assert_eq!(interest_subject("t", b"EUR?SD", true), "t.md.*");
        assert_eq!(interest_subject("t", b"[AB]X", true), "t.md.*");
        assert_eq!(interest_subject("t", b"EURUSD", true), "t.md.EURUSD");
        assert_eq!(interest_subject("t", b"EURUSD", false), "t.md.EURUSD");
        // A channel named like a glob is a channel.
        assert_eq!(interest_subject("t", b"A*", false), "t.md.A%2A");
    }
}
